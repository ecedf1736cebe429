package refresh

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Views over sources whose schema evolves (table/schema_evolve.go).
//
// A view reads the source columns its source_query references (DuckDB's
// parse tree: every column reference, or every column for a star); every
// kind's applier sees only that query's output, so the query is the one
// place that says what a view reads. When the source's schema at the
// version to refresh differs from the one the view last refreshed from, a
// column the view reads that is gone (dropped or renamed) or whose type or
// nullability changed fails the refresh at plan time, naming the column,
// and the view's status says so (Freshness.Problem). A change to columns
// the view does not read is invisible to it: the refresh stays
// incremental.

// sourceReads are the columns of schema the view's query reads.
func (e *Engine) sourceReads(ctx context.Context, v *View, schema *arrow.Schema) []string {
	var names map[string]bool
	star := v.query.star
	if st, err := e.db.CheckSelect(ctx, v.query.SQL); err == nil {
		names, star = st.ColumnRefs()
	} else {
		names = v.query.words // the lexer's over-approximation
	}
	var out []string
	for _, f := range schema.Fields() {
		if star || names[strings.ToLower(f.Name)] {
			out = append(out, f.Name)
		}
	}
	return out
}

// sourceSchemaProblem answers why view v cannot refresh from source
// version to when it last refreshed from version from: a column it reads
// is gone or changed between the two schemas. nil when nothing it reads
// changed, or when version from can no longer be read (the query's bind
// then names a missing column).
func (e *Engine) sourceSchemaProblem(ctx context.Context, v *View, src *table.Table, from uint64, to *table.Manifest) error {
	if from == 0 || from == to.Version {
		return nil
	}
	old, err := src.Load(ctx, from)
	if err != nil || old.Schema == to.Schema {
		return nil
	}
	os, err := old.ArrowSchema()
	if err != nil {
		return nil
	}
	ns, err := to.ArrowSchema()
	if err != nil {
		return err
	}
	for _, name := range e.sourceReads(ctx, v, os) {
		of := os.Field(os.FieldIndices(name)[0])
		idx := ns.FieldIndices(name)
		if len(idx) == 0 {
			return errs.Errorf(errs.CodeInvalidTableState, "view %s reads column %q of %s, which version %d no longer has (dropped or renamed since version %d): create the view again over the new schema",
				table.JoinID(v.ID), name, table.JoinID(v.Def.Source), to.Version, from)
		}
		nf := ns.Field(idx[0])
		if !arrow.TypeEqual(of.Type, nf.Type) || of.Nullable != nf.Nullable {
			return errs.Errorf(errs.CodeInvalidTableState, "view %s reads column %q of %s, which changed from %s to %s at version %d (since version %d): create the view again over the new schema",
				table.JoinID(v.ID), name, table.JoinID(v.Def.Source), describeField(of), describeField(nf), to.Version, from)
		}
	}
	return nil
}

// rewrittenReads answers why a column view v reads may hold other values
// in a fragment the source kept since version from: the column now sits
// in another data file of that fragment (LanceDB's alter_columns writes
// a cast column to a new file under the same fragment id), or the name
// now names another column (a drop and a rename to the dropped name, a
// swap of two names: another Lance field id; for versions without field
// ids, another column of the file). "" when no such column moved; nothing is compared when the
// schema is the same and neither version has a fragment of several files
// or columns out of order.
func (e *Engine) rewrittenReads(ctx context.Context, v *View, src *table.Table, from uint64, to *table.Manifest) (string, error) {
	layered := func(m *table.Manifest) bool {
		return slices.ContainsFunc(m.Fragments, func(f table.Fragment) bool { return f.Parts != "" || f.Extra != "" })
	}
	if from == 0 || from == to.Version {
		return "", nil
	}
	old, err := src.Load(ctx, from)
	if err != nil {
		return "", nil // the caller's change detection answers for a lost version
	}
	if !layered(old) && !layered(to) && old.Schema == to.Schema {
		return "", nil // the same schema over files in the schema's order
	}
	os, err := old.ArrowSchema()
	if err != nil {
		return "", err
	}
	ns, err := to.ArrowSchema()
	if err != nil {
		return "", err
	}
	prev := make(map[uint32]table.Fragment, len(old.Fragments))
	for _, f := range old.Fragments {
		prev[f.ID] = f
	}
	for _, name := range e.sourceReads(ctx, v, os) {
		oi, ni := os.FieldIndices(name), ns.FieldIndices(name)
		if len(oi) != 1 || len(ni) != 1 {
			continue // gone or renamed: sourceSchemaProblem's to answer
		}
		// Lance names a column's data by field id, which a column keeps
		// through renames: another id under the name is another column (a
		// column dropped and another renamed to its name, two names
		// swapped), whatever file columns the fragments number.
		oid, oidOK := old.FieldIDAt(oi[0])
		nid, nidOK := to.FieldIDAt(ni[0])
		ids := oidOK && nidOK
		if ids && oid != nid {
			return fmt.Sprintf("column %q of the source is another column since version %d (Lance field %d, then %d: a column dropped or renamed and another renamed to its name)", name, from, oid, nid), nil
		}
		for _, f := range to.Fragments {
			pf, ok := prev[f.ID]
			if !ok || pf.Path != f.Path {
				continue
			}
			// Data files are never changed: a column in the same file
			// holds the same values.
			op, oc, ook, err := pf.FieldFile(oi[0])
			if err != nil {
				return "", err
			}
			np, nc, nok, err := f.FieldFile(ni[0])
			if err != nil {
				return "", err
			}
			// Another file (a column rewritten in place), or, where the
			// versions do not know field ids, another column of the same
			// file. A layout of parts numbers leaf columns, the others
			// top-level ones (they agree up to the first struct), so with
			// field ids the file column is not compared: a LanceDB drop of
			// any column turns every fragment into parts, which must not
			// refresh every view whole.
			if op != np || ook != nok || !ids && oc != nc {
				return fmt.Sprintf("column %q of source fragment %d reads other data since version %d (a column rewritten in place, or dropped or renamed and another renamed to its name)", name, f.ID, from), nil
			}
		}
	}
	return "", nil
}

func describeField(f arrow.Field) string {
	if f.Nullable {
		return f.Type.String() + " (nullable)"
	}
	return f.Type.String() + " (not null)"
}

// keepBindings keeps a table's virtual and computed columns (mvq.columns)
// true through a schema change: dropping every output of a binding
// removes the binding (and its backfill records); any other change to a
// bound column or to a column a binding reads is refused, naming both.
func keepBindings(next *table.Manifest, ch table.SchemaChange) error {
	bs, err := tableColumns(next)
	if err != nil || len(bs) == 0 {
		return err
	}
	dropped := map[string]bool{}
	for _, d := range ch.Dropped {
		dropped[d] = true
	}
	refuse := func(col, what string, b ColumnBinding) error {
		return errs.Errorf(errs.CodeInvalidInput, "column %q: %s; it belongs to %s column %q (mvq.columns)", col, what, b.Kind, b.Name)
	}
	var kept []ColumnBinding
	var removed []string
	for _, b := range bs {
		outs := b.columnNames()
		all := len(outs) > 0
		for _, o := range outs {
			all = all && dropped[o]
		}
		reads := b.reads()
		for _, col := range ch.Dropped {
			if reads[strings.ToLower(col)] && !all {
				return refuse(col, "dropping it is not allowed while a column reads it", b)
			}
			if slices.Contains(outs, col) && !all {
				return refuse(col, fmt.Sprintf("drop all of its outputs %v together", outs), b)
			}
		}
		for old := range ch.Renamed {
			if slices.Contains(outs, old) || reads[strings.ToLower(old)] {
				return refuse(old, "renaming it is not supported", b)
			}
		}
		for _, col := range ch.Retyped {
			if slices.Contains(outs, col) || reads[strings.ToLower(col)] {
				return refuse(col, "changing its type or nullability is not supported", b)
			}
		}
		if all {
			removed = append(removed, b.Name)
			continue
		}
		kept = append(kept, b)
	}
	if len(removed) == 0 {
		return nil
	}
	if len(kept) == 0 {
		delete(next.Properties, propColumns)
	} else {
		raw, err := json.Marshal(kept)
		if err != nil {
			return err
		}
		next.Properties[propColumns] = raw
	}
	if _, ok := next.Properties[propFilled]; ok {
		filled, err := filledMap(next)
		if err != nil {
			return err
		}
		for _, n := range removed {
			delete(filled, n)
		}
		raw, err := json.Marshal(filled)
		if err != nil {
			return err
		}
		next.Properties[propFilled] = raw
	}
	return nil
}

// reads are the (lower-case) names a binding's values are computed from:
// a virtual column's input_columns, the words of a computed expression.
func (b *ColumnBinding) reads() map[string]bool {
	out := map[string]bool{}
	for _, c := range b.InputColumns {
		out[strings.ToLower(c)] = true
	}
	if b.Expression != "" {
		toks, err := lexSQL(b.Expression)
		if err != nil {
			return out
		}
		for _, t := range toks {
			if t.kind == tokWord || t.kind == tokQuoted {
				out[strings.ToLower(t.text)] = true
			}
		}
	}
	return out
}
