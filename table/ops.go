package table

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/records"
)

// viewName is what user SQL over one table calls it.
const viewName = "t"

// sqlErr turns an engine error about user SQL into a 400.
func sqlErr(what string, err error) error {
	if e := EngineErr(err); e != nil {
		return e
	}
	var se *duck.SQLError
	if errors.As(err, &se) {
		// The first line says what is wrong; the rest quotes the SQL mvq
		// wrapped around the user's, which would only confuse.
		msg, _, _ := strings.Cut(se.Err.Error(), "\n")
		return &errs.Error{Code: errs.CodeInvalidInput, Message: fmt.Sprintf("%s: %s", what, strings.TrimSpace(msg))}
	}
	var te *errs.Error
	if errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// EngineErr maps the SQL engine's admission errors: no session within the
// queue wait, or a query past its deadline, are errs.CodeServiceUnavailable
// (503); nil for any other error.
func EngineErr(err error) error {
	var be *duck.BusyError
	var te *duck.TimeoutError
	switch {
	case errors.As(err, &be):
		return &errs.Error{Code: errs.CodeServiceUnavailable, Err: be}
	case errors.As(err, &te):
		return &errs.Error{Code: errs.CodeServiceUnavailable, Err: te}
	}
	return nil
}

// checkExpr accepts expr only if DuckDB parses it as one expression that
// calls no refused function (duck.DB.CheckExpression); a refusal is
// errs.CodeInvalidInput naming what.
func (c *Catalog) checkExpr(ctx context.Context, what, expr string) error {
	if strings.TrimSpace(expr) == "" {
		return errs.Errorf(errs.CodeInvalidInput, "%s is empty", what)
	}
	if err := c.sql.CheckExpression(ctx, expr); err != nil {
		return sqlErr(what, err)
	}
	return nil
}

// referencedColumns returns the schema fields whose names appear in expr as
// identifiers (bare or double-quoted, case-insensitive), in schema order;
// at least one field so a row count is always available. An expression
// that can reach columns without naming them (*, COLUMNS(…), the row as t)
// gets every column.
func referencedColumns(schema *arrow.Schema, expr string) []string {
	if strings.Contains(expr, "*") {
		return columnNames(schema)
	}
	words := map[string]bool{}
	for i := 0; i < len(expr); {
		c := rune(expr[i])
		switch {
		case c == '\'':
			j := i + 1
			for j < len(expr) && !(expr[j] == '\'' && (j+1 >= len(expr) || expr[j+1] != '\'')) {
				if expr[j] == '\'' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '"':
			j := strings.IndexByte(expr[i+1:], '"')
			if j < 0 {
				return columnNames(schema)
			}
			words[strings.ToLower(expr[i+1:i+1+j])] = true
			i += j + 2
		case c == '_' || unicode.IsLetter(c) || c >= 0x80:
			j := i
			for j < len(expr) && (expr[j] == '_' || expr[j] >= 0x80 || unicode.IsLetter(rune(expr[j])) || unicode.IsDigit(rune(expr[j]))) {
				j++
			}
			words[strings.ToLower(expr[i:j])] = true
			i = j
		default:
			i++
		}
	}
	if words["columns"] || words[viewName] {
		return columnNames(schema)
	}
	var out []string
	for _, f := range schema.Fields() {
		if words[strings.ToLower(f.Name)] {
			out = append(out, f.Name)
		}
	}
	if len(out) == 0 {
		out = []string{schema.Field(0).Name}
	}
	return out
}

func columnNames(schema *arrow.Schema) []string {
	out := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		out[i] = f.Name
	}
	return out
}

// emptyReader yields no rows of schema; binding SQL against it checks
// names and types without reading data.
func emptyReader(schema *arrow.Schema) array.RecordReader {
	r, _ := array.NewRecordReader(schema, nil)
	return r
}

// bindCheck runs query over an empty input so bad SQL is a 400 even when no
// row would reach it.
func (c *Catalog) bindCheck(ctx context.Context, what string, schema *arrow.Schema, query string) error {
	rdr, err := c.sql.Query(ctx, map[string]array.RecordReader{viewName: emptyReader(schema)}, query)
	if err != nil {
		return sqlErr(what, err)
	}
	recs, err := duck.Collect(rdr)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return sqlErr(what, err)
	}
	return nil
}

// forEachFragment runs fn over frags with bounded parallelism and returns
// the first error (the others' contexts are cancelled by it).
func forEachFragment(ctx context.Context, frags []Fragment, fn func(ctx context.Context, i int, f Fragment) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, f := range frags {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return Recover("fragment step", func() error { return fn(gctx, i, f) }) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// matchCounts counts, per fragment, the rows where predicate is true,
// reading only the columns it names.
func (t *Table) matchCounts(ctx context.Context, m *Manifest, schema *arrow.Schema, predicate string) ([]int64, error) {
	cols := referencedColumns(schema, predicate)
	query := fmt.Sprintf("SELECT count(*) FILTER (WHERE COALESCE((%s), false)) FROM %s", predicate, viewName)
	counts := make([]int64, len(m.Fragments))
	sel, err := t.selectRows(ctx, m, schema, predicate)
	if err != nil {
		return nil, err
	}
	err = forEachFragment(ctx, m.Fragments, func(ctx context.Context, i int, f Fragment) error {
		if rows, ok := sel[f.ID]; sel != nil && (!ok || rows != nil && len(rows) == 0) {
			return nil // the index says no row of f matches
		}
		scan, err := t.Scan(ctx, m, ScanOptions{Columns: cols, Fragments: []Fragment{f}, Prefetch: 1, Rows: sel})
		if err != nil {
			return err
		}
		rdr, err := t.c.sql.Query(ctx, map[string]array.RecordReader{viewName: scan}, query)
		if err != nil {
			scan.Release()
			return sqlErr("predicate", err)
		}
		recs, err := duck.Collect(rdr)
		scan.Release()
		if err != nil {
			return sqlErr("predicate", err)
		}
		for _, r := range recs {
			if r.NumRows() > 0 {
				counts[i] = r.Column(0).(*array.Int64).Value(0)
			}
			r.Release()
		}
		return nil
	})
	return counts, err
}

// CountRows counts the rows of version (0: latest) where predicate holds
// (empty: all rows, from the manifest alone).
func (t *Table) CountRows(ctx context.Context, version uint64, predicate string) (int64, error) {
	m, err := t.Load(ctx, version)
	if err != nil {
		return 0, err
	}
	if predicate == "" {
		return m.NumRows(), nil
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return 0, err
	}
	if err := t.c.checkExpr(ctx, "predicate", predicate); err != nil {
		return 0, err
	}
	if err := t.c.bindCheck(ctx, "predicate", schema, fmt.Sprintf("SELECT count(*) FROM %s WHERE (%s)", viewName, predicate)); err != nil {
		return 0, err
	}
	counts, err := t.matchCounts(ctx, m, schema, predicate)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// Insert appends (mode "append", default) or replaces ("overwrite") the
// table's rows with the records of rdr, whose fields must match the table's
// by name and type; trailing nullable fields of the table (columns added
// later) may be left out and are null. It answers the new version and the rows written.
func (t *Table) Insert(ctx context.Context, rdr array.RecordReader, mode string) (*Manifest, int64, error) {
	m, schema, err := t.LoadSchema(ctx, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := t.c.guardWrite(t.id, m, "insert"); err != nil {
		return nil, 0, err
	}
	if n := rdr.Schema().NumFields(); n < schema.NumFields() && n > 0 && records.NullableFrom(schema, n) {
		// Columns added later (add_columns) may be left out: they are null.
		if err := records.CheckSameFields(rdr.Schema(), arrow.NewSchema(schema.Fields()[:n], nil)); err != nil {
			return nil, 0, err
		}
		rdr = records.PadReader(rdr, schema, t.c.opts.Mem)
		defer rdr.Release()
	} else if err := records.CheckSameFields(rdr.Schema(), schema); err != nil {
		return nil, 0, err
	}
	in := records.ConformReader(ctx, rdr, schema, t.c.opts.Mem)
	frags, err := t.WriteFragments(ctx, schema, in, 0)
	if err != nil {
		return nil, 0, t.writeGone(ctx, err)
	}
	var rows int64
	for _, f := range frags {
		rows += f.Rows
	}
	switch strings.ToLower(mode) {
	case "", "append":
		nm, err := t.Commit(ctx, AppendOp(m.Schema, frags))
		return nm, rows, err
	case "overwrite":
		nm, err := t.Commit(ctx, OverwriteOp(schema, frags, nil))
		return nm, rows, err
	default:
		return nil, 0, errs.Errorf(errs.CodeInvalidInput, "mode %q: want append or overwrite", mode)
	}
}

// rewriteHookKey keys a func() in a delete's or update's context (tests
// only) that runs between writing its files and committing them.
type rewriteHookKey struct{}

// maxRewriteAttempts bounds how often delete and update compute their
// change again after a concurrent commit changed a fragment they touch.
const maxRewriteAttempts = 8

// rewriteSpec says what a delete or update does to the rows where
// predicate matches.
type rewriteSpec struct {
	operation, predicate string
	// query (over view t, one fragment at a time) is the whole new
	// content of a fragment that is rewritten.
	query string
	// updated, for an update, is the select list of a matched row's new
	// values (the table's columns, in order); empty for a delete.
	updated string
}

// rewrite removes or changes the rows where spec.predicate matches and
// commits the result: in a fragment that can take a deletion file
// (canDelete), the matched rows are deleted by one and their new values
// (update) appended as a new fragment; any other fragment is rewritten
// whole with spec.query. It returns the new version (nil when nothing
// matched) and the matched count. A concurrent commit that changed a
// touched fragment (another delete's deletion file) makes it compute the
// change again on the new version, so no delete is lost.
func (t *Table) rewrite(ctx context.Context, spec rewriteSpec) (*Manifest, int64, error) {
	for attempt := 1; ; attempt++ {
		nm, n, err := t.rewriteOnce(ctx, spec)
		if err != nil && isFragmentChanged(err) && attempt < maxRewriteAttempts && ctx.Err() == nil {
			continue
		}
		return nm, n, err
	}
}

func (t *Table) rewriteOnce(ctx context.Context, spec rewriteSpec) (*Manifest, int64, error) {
	operation, predicate := spec.operation, spec.predicate
	m, err := t.Load(ctx, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := t.c.guardWrite(t.id, m, operation); err != nil {
		return nil, 0, err
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, 0, err
	}
	if err := t.c.bindCheck(ctx, operation, schema, spec.query); err != nil {
		return nil, 0, err
	}
	counts, err := t.matchCounts(ctx, m, schema, predicate)
	if err != nil {
		return nil, 0, err
	}
	var touched []Fragment
	var matched int64
	for i, c := range counts {
		if c > 0 {
			touched = append(touched, m.Fragments[i])
			matched += c
		}
	}
	if matched == 0 {
		return nil, 0, nil
	}
	type change struct {
		rep   Replacement
		added *Fragment // an update's new rows of a fragment with a deletion file
		skip  bool      // no matched row was left to read: no change
	}
	changes := make([]change, len(touched))
	var written []string // files of this attempt, removed if it fails
	var mu sync.Mutex
	wrote := func(keys ...string) {
		mu.Lock()
		written = append(written, keys...)
		mu.Unlock()
	}
	ok := false
	defer func() {
		if !ok {
			for _, k := range written {
				_ = t.c.wh.Delete(context.WithoutCancel(ctx), k)
			}
		}
	}()
	err = forEachFragment(ctx, touched, func(ctx context.Context, i int, f Fragment) error {
		ch := &changes[i]
		ch.rep = Replacement{Old: f.ID, OldKey: f.Key()}
		if canDelete(m, f) {
			live, recs, err := t.matchedRows(ctx, m, schema, f, spec)
			if err != nil {
				return err
			}
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			if len(live) == 0 {
				ch.skip = true
				return nil
			}
			nf, gone, err := t.withDeletions(ctx, m, f, live)
			if err != nil {
				return err
			}
			if !gone {
				wrote(t.key + nf.deletionPath())
				ch.rep.New, ch.rep.InPlace = &nf, true
			}
			if len(recs) > 0 {
				af, err := t.WriteFile(ctx, schema, recs)
				if err != nil {
					return err
				}
				wrote(t.key + af.Path)
				ch.added = &af
			}
			return nil
		}
		scan, err := t.Scan(ctx, m, ScanOptions{Fragments: []Fragment{f}, Prefetch: 1})
		if err != nil {
			return err
		}
		rdr, err := t.c.sql.Query(ctx, map[string]array.RecordReader{viewName: scan}, spec.query)
		if err != nil {
			scan.Release()
			return sqlErr(operation, err)
		}
		recs, err := duck.Collect(records.ConformReader(ctx, rdr, schema, t.c.opts.Mem))
		scan.Release()
		if err != nil {
			return sqlErr(operation, err)
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		nf, err := t.WriteFile(ctx, schema, recs)
		if err != nil {
			return err
		}
		wrote(t.key + nf.Path)
		if nf.Rows > 0 {
			ch.rep.New = &nf
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	reps := make([]Replacement, 0, len(changes))
	var added []Fragment
	for _, ch := range changes {
		if ch.skip {
			continue
		}
		reps = append(reps, ch.rep)
		if ch.added != nil {
			added = append(added, *ch.added)
		}
	}
	if len(reps) == 0 {
		return nil, 0, nil
	}
	if hook, _ := ctx.Value(rewriteHookKey{}).(func()); hook != nil {
		hook()
	}
	nm, err := t.Commit(ctx, func(base *Manifest) (*Manifest, error) {
		nextID := base.NextFragmentID
		next, err := RewriteOp(operation, reps)(base)
		if err != nil {
			return nil, err
		}
		assignIDs(next, added)
		next.lanceOp = rewriteLanceOp(predicate, reps, nextID, next)
		return next, nil
	})
	if err != nil {
		// A conflict committed nothing: this attempt's files go. Another
		// commit error may hide a version that was written after all, so
		// they stay, for CleanupOrphans to judge.
		ok = !IsConflict(err)
		return nil, 0, err
	}
	ok = true
	return nm, matched, nil
}

// matchedRows reads the rows of fragment f (of version m) where
// spec.predicate matches: their live offsets, ascending, and for an
// update their new values (records of schema, in the same order).
func (t *Table) matchedRows(ctx context.Context, m *Manifest, schema *arrow.Schema, f Fragment, spec rewriteSpec) ([]uint32, []arrow.RecordBatch, error) {
	cols := referencedColumns(schema, spec.predicate)
	sel := RowAddrColumn
	out := arrow.NewSchema([]arrow.Field{{Name: RowAddrColumn, Type: arrow.PrimitiveTypes.Uint64}}, nil)
	if spec.updated != "" {
		cols = nil
		sel = spec.updated + ", " + RowAddrColumn
		out = arrow.NewSchema(append(append([]arrow.Field(nil), schema.Fields()...), out.Field(0)), nil)
	}
	query := fmt.Sprintf("SELECT %s FROM %s WHERE COALESCE((%s), false) ORDER BY %s", sel, viewName, spec.predicate, RowAddrColumn)
	scan, err := t.Scan(ctx, m, ScanOptions{Columns: cols, Fragments: []Fragment{f}, Prefetch: 1, RowAddr: true})
	if err != nil {
		return nil, nil, err
	}
	rdr, err := t.c.sql.Query(ctx, map[string]array.RecordReader{viewName: scan}, query)
	if err != nil {
		scan.Release()
		return nil, nil, sqlErr(spec.operation, err)
	}
	recs, err := duck.Collect(records.ConformReader(ctx, rdr, out, t.c.opts.Mem))
	scan.Release()
	if err != nil {
		return nil, nil, sqlErr(spec.operation, err)
	}
	var live []uint32
	var rows []arrow.RecordBatch
	last := out.NumFields() - 1
	for _, r := range recs {
		for _, a := range r.Column(last).(*array.Uint64).Values() {
			live = append(live, uint32(a)) // the offset: the address's low 32 bits
		}
		if spec.updated != "" && r.NumRows() > 0 {
			rows = append(rows, array.NewRecordBatch(schema, r.Columns()[:last], r.NumRows()))
		}
		r.Release()
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	return live, rows, nil
}

// Delete removes the rows where predicate is true: the fragments holding
// such rows get a deletion file (rewrite). It answers the new version, or
// the current one when nothing matched.
func (t *Table) Delete(ctx context.Context, predicate string) (*Manifest, int64, error) {
	if err := t.c.checkExpr(ctx, "predicate", predicate); err != nil {
		return nil, 0, err
	}
	query := fmt.Sprintf("SELECT * FROM %s WHERE NOT COALESCE((%s), false)", viewName, predicate)
	nm, n, err := t.rewrite(ctx, rewriteSpec{operation: "delete", predicate: predicate, query: query})
	if err == nil && nm == nil {
		nm, err = t.Load(ctx, 0)
	}
	return nm, n, err
}

// Update sets columns to SQL expressions on the rows where predicate holds
// (empty: all rows). Every expression sees the row as it was before the
// update. The matched rows are deleted from their fragments and their new
// values appended as new fragments (rewrite), so they come last in table
// order; no match commits nothing and answers the current version. An unknown column is
// errs.CodeTableColumnNotFound; bad SQL or a value that does not fit the column
// is errs.CodeInvalidInput.
func (t *Table) Update(ctx context.Context, predicate string, updates [][2]string) (*Manifest, int64, error) {
	if len(updates) == 0 {
		return nil, 0, errs.Errorf(errs.CodeInvalidInput, "updates is empty")
	}
	if predicate == "" {
		predicate = "true"
	}
	if err := t.c.checkExpr(ctx, "predicate", predicate); err != nil {
		return nil, 0, err
	}
	_, schema, err := t.LoadSchema(ctx, 0)
	if err != nil {
		return nil, 0, err
	}
	set := map[string]string{}
	for i, u := range updates {
		col, expr := u[0], u[1]
		if len(schema.FieldIndices(col)) == 0 {
			return nil, 0, errs.Errorf(errs.CodeTableColumnNotFound, "updates[%d]: column %q not found", i, col)
		}
		if _, dup := set[col]; dup {
			return nil, 0, errs.Errorf(errs.CodeInvalidInput, "updates[%d]: column %q set twice", i, col)
		}
		if err := t.c.checkExpr(ctx, fmt.Sprintf("updates[%d] (%s)", i, col), expr); err != nil {
			return nil, 0, err
		}
		set[col] = expr
	}
	// The CASE gives an expression the column's type as the SQL engine
	// unifies them (a string literal set on an integer column is cast, or
	// is a 400), for rewritten fragments and matched rows alike.
	sel := make([]string, 0, schema.NumFields())
	for _, f := range schema.Fields() {
		q := duck.QuoteIdent(f.Name)
		if expr, ok := set[f.Name]; ok {
			sel = append(sel, fmt.Sprintf("CASE WHEN COALESCE((%s), false) THEN (%s) ELSE %s END AS %s", predicate, expr, q, q))
		} else {
			sel = append(sel, q)
		}
	}
	list := strings.Join(sel, ", ")
	query := fmt.Sprintf("SELECT %s FROM %s", list, viewName)
	nm, n, err := t.rewrite(ctx, rewriteSpec{operation: "update", predicate: predicate, query: query, updated: list})
	if err == nil && nm == nil {
		nm, err = t.Load(ctx, 0)
	}
	return nm, n, err
}

// Restore commits a new version whose content is that of version v.
func (t *Table) Restore(ctx context.Context, v uint64) (*Manifest, error) {
	old, err := t.Load(ctx, v)
	if err != nil {
		return nil, err
	}
	return t.Commit(ctx, RestoreOp(old))
}

// QueryOptions select rows for Query.
type QueryOptions struct {
	Version uint64   // 0: latest
	Columns []string // nil: all
	Aliases []string // output names for Columns (nil: the column names)
	Filter  string   // SQL predicate; empty: all rows
	Offset  int64
	Limit   int64 // 0: no limit
	RowAddr bool  // add _rowaddr (live offsets; see ScanOptions.RowAddr)
	// LanceRowAddr makes _rowaddr Lance's address, for answers to users
	// (ScanOptions.LanceRowAddr); a filter sees the same values.
	LanceRowAddr bool
	// Rows, when set, reads only these rows (selection.go) instead of
	// asking the catalog's row selector (Indexes.Select).
	Rows Selection
}

// Query streams the selected rows in table order. Release the reader.
func (t *Table) Query(ctx context.Context, q QueryOptions) (array.RecordReader, error) {
	m, schema, err := t.LoadSchema(ctx, q.Version)
	if err != nil {
		return nil, err
	}
	out, _, err := ProjectSchema(schema, q.Columns, q.RowAddr)
	if err != nil {
		return nil, err
	}
	if q.Aliases != nil {
		fields := out.Fields()
		for i := range q.Aliases {
			fields[i].Name = q.Aliases[i]
		}
		out = arrow.NewSchema(fields, nil)
	}
	if q.Filter == "" {
		scan, err := t.Scan(ctx, m, ScanOptions{Columns: q.Columns, RowAddr: q.RowAddr, LanceRowAddr: q.LanceRowAddr})
		if err != nil {
			return nil, err
		}
		return records.LimitReader(scan, out, q.Offset, q.Limit), nil
	}
	query, err := t.filterSQL(ctx, schema, q)
	if err != nil {
		return nil, err
	}
	opts := ScanOptions{RowAddr: q.RowAddr, LanceRowAddr: q.LanceRowAddr}
	sel := q.Rows
	if sel == nil {
		if sel, err = t.selectRows(ctx, m, schema, q.Filter); err != nil {
			return nil, err
		}
	}
	if sel != nil {
		opts.Fragments, opts.Rows = sel.Fragments(m), sel
	}
	scan, err := t.Scan(ctx, m, opts)
	if err != nil {
		return nil, err
	}
	rdr, err := t.c.sql.Query(ctx, map[string]array.RecordReader{viewName: scan}, query)
	if err != nil {
		scan.Release()
		return nil, sqlErr("filter", err)
	}
	return records.ReleaseAlso(records.ConformReader(ctx, rdr, out, t.c.opts.Mem), scan), nil
}

// filterSQL is the SQL of a query with a filter (checked, and bound to the
// table's schema), over the table's rows named viewName.
func (t *Table) filterSQL(ctx context.Context, schema *arrow.Schema, q QueryOptions) (string, error) {
	if err := t.c.checkExpr(ctx, "filter", q.Filter); err != nil {
		return "", err
	}
	sel := "*"
	if q.Columns != nil || q.RowAddr {
		names := q.Columns
		if names == nil {
			names = columnNames(schema)
		}
		quoted := make([]string, 0, len(names)+1)
		for _, n := range names {
			quoted = append(quoted, duck.QuoteIdent(n))
		}
		if q.RowAddr {
			quoted = append(quoted, RowAddrColumn)
		}
		sel = strings.Join(quoted, ", ")
	}
	query := fmt.Sprintf("SELECT %s FROM %s WHERE (%s)", sel, viewName, q.Filter)
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	if q.Offset > 0 {
		query += fmt.Sprintf(" OFFSET %d", q.Offset)
	}
	if err := t.c.bindCheck(ctx, "filter", func() *arrow.Schema { s, _, _ := ProjectSchema(schema, nil, q.RowAddr); return s }(), query); err != nil {
		return "", err
	}
	return query, nil
}

// FragmentLengths summarises fragment row counts for stats.
type FragmentLengths struct {
	Min, Max, Mean, P25, P50, P75, P99 int64
}

// Stats describes a version's layout.
type Stats struct {
	TotalBytes        int64
	NumRows           int64
	NumFragments      int64
	NumSmallFragments int64
	Lengths           FragmentLengths
}

// Stats computes layout statistics of the latest version. A fragment is
// small when it holds under a quarter of MaxRowsPerFragment rows.
func (t *Table) Stats(ctx context.Context) (Stats, error) {
	m, err := t.Load(ctx, 0)
	if err != nil {
		return Stats{}, err
	}
	s := Stats{TotalBytes: m.NumBytes(), NumRows: m.NumRows(), NumFragments: int64(len(m.Fragments))}
	if len(m.Fragments) == 0 {
		return s, nil
	}
	rows := make([]int64, len(m.Fragments))
	for i, f := range m.Fragments {
		rows[i] = f.Rows
		if f.Rows < int64(t.c.opts.MaxRowsPerFragment/4) {
			s.NumSmallFragments++
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i] < rows[j] })
	pct := func(p float64) int64 { return rows[int(p*float64(len(rows)-1)+0.5)] }
	s.Lengths = FragmentLengths{Min: rows[0], Max: rows[len(rows)-1], Mean: s.NumRows / int64(len(rows)), P25: pct(.25), P50: pct(.5), P75: pct(.75), P99: pct(.99)}
	return s, nil
}
