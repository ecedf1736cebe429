package table

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/records"
)

// Schema evolution: alter_columns (rename, nullability, type widening),
// drop_columns, update_field_metadata and schema_metadata/update. Each is
// one commit that changes only the manifest: no data file is read or
// written.
//
// How a data file written under an older schema is read under a newer one:
//   - Columns are matched by position. A fragment's ColumnMap says, for
//     each top-level field of its version's schema, which top-level column
//     of the file holds it; an empty map means the file's columns are the
//     schema's fields in order (every file written under the schema of its
//     version). drop_columns removes the dropped positions from every
//     fragment's map, so the dropped data stays in the file, unread.
//   - A rename changes only the field's name in the schema: the file
//     column keeps its old name and readers take the schema's (Conform).
//   - A widened type (int32 → int64, float32 → float64, …) is cast on read;
//     a column made nullable needs nothing.
//   - Field and schema metadata live in the manifest's schema only.
// Old versions keep their own schema and maps, so they read as they did.
//
// A writer that wrote files under a schema whose columns were since
// dropped must not commit them as if they had the new layout: WriteFileAt
// remembers the schema a file was written with, and Commit refuses
// (errs.CodeConcurrentModification, a 409) a new fragment whose columns do not
// line up with the schema it would be committed under.

// ColumnMap maps the top-level fields of a version's schema to the
// top-level columns of a fragment's data file: entry i is the file column
// of field i. Empty: the identity (the file has exactly the schema's
// columns). In JSON it is an array of column indices. It is kept as a
// string so Fragment stays comparable.
type ColumnMap string

// NewColumnMap builds a map from file column indices.
func NewColumnMap(cols []int) ColumnMap {
	var sb strings.Builder
	for i, c := range cols {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(c))
	}
	if sb.Len() == 0 {
		return ColumnMap("-") // maps no field (never written: a table keeps one column)
	}
	return ColumnMap(sb.String())
}

// Indices are the file column indices, or nil for the identity.
func (m ColumnMap) Indices() ([]int, error) {
	if m == "" {
		return nil, nil
	}
	if m == "-" {
		return []int{}, nil
	}
	parts := strings.Split(string(m), ",")
	out := make([]int, len(parts))
	seen := make(map[int]bool, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1<<20 || seen[n] {
			return nil, fmt.Errorf("column map %q: bad entry %q", string(m), p)
		}
		seen[n] = true
		out[i] = n
	}
	return out, nil
}

// MarshalJSON writes the map as an array of column indices.
func (m ColumnMap) MarshalJSON() ([]byte, error) {
	idx, err := m.Indices()
	if err != nil {
		return nil, err
	}
	if idx == nil {
		return []byte("null"), nil
	}
	return json.Marshal(idx)
}

// UnmarshalJSON reads an array of column indices.
func (m *ColumnMap) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = ""
		return nil
	}
	var idx []int
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("columns: %w", err)
	}
	cm := NewColumnMap(idx)
	if _, err := cm.Indices(); err != nil {
		return err
	}
	*m = cm
	return nil
}

// FileFields translates top-level field indices of the fragment's version
// schema (nil: all of them) into column indices of its data file, as
// leafIndices wants them. nil answers nil (every column) only where the
// file's columns are the schema's.
func (f Fragment) FileFields(fields []int) ([]int, error) {
	idx, err := f.Columns.Indices()
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d (%s): corrupt column map", f.ID, f.Path), Err: err}
	}
	if idx == nil {
		return fields, nil
	}
	if fields == nil {
		return idx, nil
	}
	out := make([]int, len(fields))
	for i, k := range fields {
		if k < 0 || k >= len(idx) {
			return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d (%s): field %d not in its column map", f.ID, f.Path, k)}
		}
		out[i] = idx[k]
	}
	return out, nil
}

// conformAll conforms records read from data files (file names and
// types) to schema (the names and types of the version read), releasing
// the originals.
func conformAll(ctx context.Context, recs []arrow.RecordBatch, schema *arrow.Schema, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	for i, r := range recs {
		if r.Schema().Equal(schema) {
			continue
		}
		c, err := records.Conform(ctx, r, schema, mem)
		if err != nil {
			for _, rest := range recs[i:] {
				rest.Release()
			}
			for _, done := range recs[:i] {
				done.Release()
			}
			return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: "data file does not match the table schema", Err: err}
		}
		r.Release()
		recs[i] = c
	}
	return recs, nil
}

// checkWritten refuses new fragments of next written (in this process,
// by WriteFileAt) under a schema whose columns do not line up with next's:
// a concurrent drop_columns (or add_columns) changed the table's layout
// after the writer read it.
func checkWritten(next *Manifest) error {
	var schema *arrow.Schema
	for _, f := range next.Fragments {
		if f.written == nil || f.Columns != "" {
			continue
		}
		if schema == nil {
			s, err := next.ArrowSchema()
			if err != nil {
				return err
			}
			schema = s
		}
		if !records.SameLayout(f.written, schema) {
			return &errs.Error{Code: errs.CodeConcurrentModification, Message: fmt.Sprintf("%s: the table's columns changed in a concurrent commit (now %s); retry", next.Operation, records.FieldNames(schema))}
		}
	}
	return nil
}

// Alteration is one entry of alter_columns. Field names the entry in
// errors (e.g. "alterations[0]").
type Alteration struct {
	Field    string
	Path     string
	Rename   *string
	Nullable *bool
	DataType arrow.DataType // nil: unchanged
}

// FieldMetadataUpdate is one entry of update_field_metadata: the keys of
// Metadata are set (a nil value deletes the key), or replace the field's
// metadata when Replace.
type FieldMetadataUpdate struct {
	Field    string
	Path     string
	Metadata map[string]*string
	Replace  bool
}

// SchemaChange is what a schema-evolution commit changed, for the hooks
// of other packages (refresh keeps the bindings of computed columns).
type SchemaChange struct {
	Operation string
	Renamed   map[string]string // old name → new name
	Dropped   []string
	Retyped   []string // type or nullability changed (names after renames)
	// rewrite: the data files no longer hold a column's type and are
	// rewritten in the new schema (a widening on a Lance table).
	rewrite bool
}

// SchemaHook sees every schema-evolution commit before it is written: it
// may refuse it (an error, a 400 naming the column) or adjust next's
// properties. It runs again on every rebase.
type SchemaHook func(next *Manifest, ch SchemaChange) error

// WriteGuard sees every direct write to a table before it is applied:
// op names the operation as users know it ("insert", "update",
// "delete", "merge_insert", "overwrite", "version create", "rename", or
// a schema change such as "add_columns"), id the table and m its latest
// version. An error refuses the write and reaches the caller as is.
// Refreshes and backfills are not direct writes and are never guarded.
type WriteGuard func(id []string, m *Manifest, op string) error

// reservedMetadataKey reports keys that Parquet and Arrow writers read
// from schema and field metadata themselves.
func reservedMetadataKey(k string) bool {
	u := strings.ToUpper(k)
	return strings.HasPrefix(u, "PARQUET:") || strings.HasPrefix(u, "ARROW:")
}

// resolveColumn finds a top-level column by path. A path naming a field
// inside a struct is refused: only top-level columns evolve.
func resolveColumn(schema *arrow.Schema, field, path string) (int, error) {
	if path == "" {
		return -1, errs.Errorf(errs.CodeInvalidInput, "%s: a column path is required", field)
	}
	if i := schema.FieldIndices(path); len(i) > 0 {
		return i[0], nil
	}
	if head, _, ok := strings.Cut(path, "."); ok {
		if i := schema.FieldIndices(head); len(i) > 0 && schema.Field(i[0]).Type.ID() == arrow.STRUCT {
			return -1, errs.Errorf(errs.CodeInvalidInput, "%s: %q is a field inside struct column %q: only top-level columns can be changed", field, path, head)
		}
	}
	return -1, errs.Errorf(errs.CodeTableColumnNotFound, "%s: column %q not found", field, path)
}

// evolve commits a schema change: fn edits a private copy of the latest
// schema (and the fragments' column maps) and answers what changed,
// after the write guards allow it.
func (t *Table) evolve(ctx context.Context, operation string, fn func(base *Manifest, schema *arrow.Schema) (*arrow.Schema, SchemaChange, error)) (*Manifest, error) {
	return t.Commit(ctx, func(base *Manifest) (*Manifest, error) {
		if err := t.c.guardWrite(t.id, base, operation); err != nil {
			return nil, err
		}
		schema, err := base.ArrowSchema()
		if err != nil {
			return nil, err
		}
		next, ch, err := fn(base, schema)
		if err != nil {
			return nil, err
		}
		ch.Operation = operation
		enc, err := encodeSchema(next)
		if err != nil {
			return nil, errs.Errorf(errs.CodeSchemaValidation, "%s: %v", operation, err)
		}
		base.Operation = operation
		base.Schema = enc
		if err := t.c.runSchemaHooks(base, ch); err != nil {
			return nil, err
		}
		if ch.rewrite {
			if err := t.rewriteFragments(ctx, base, next); err != nil {
				return nil, err
			}
		}
		return base, nil
	})
}

// AlterColumns renames columns, makes them nullable and widens their
// types, in one new version. Every path is resolved against the latest
// schema; a path given twice, a rename onto an existing name (compared
// without case, as SQL does), a nullable column made non-nullable and a
// type change that is not a widening are 400s naming the entry and the
// column; an unknown column is errs.CodeTableColumnNotFound (404).
// Cost: one manifest write; no data is read or rewritten (widened types
// are cast when read), except that a widening on a Lance table rewrites
// every fragment in the new type (rewriteFragments): LanceDB reads a
// column in the type its data file holds, and misreads the old one.
func (t *Table) AlterColumns(ctx context.Context, alts []Alteration) (*Manifest, error) {
	if len(alts) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "alterations: at least one alteration is required")
	}
	return t.evolve(ctx, "alter_columns", func(base *Manifest, schema *arrow.Schema) (*arrow.Schema, SchemaChange, error) {
		fields := slices.Clone(schema.Fields())
		ch := SchemaChange{Renamed: map[string]string{}}
		touched := map[int]string{}
		for _, a := range alts {
			i, err := resolveColumn(schema, a.Field+".path", a.Path)
			if err != nil {
				return nil, ch, err
			}
			if prev, dup := touched[i]; dup {
				return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s.path: column %q is already altered by %s", a.Field, a.Path, prev)
			}
			touched[i] = a.Field
			if a.Rename == nil && a.Nullable == nil && a.DataType == nil {
				return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s: nothing to alter for column %q (give rename, nullable or data_type)", a.Field, a.Path)
			}
			f := fields[i]
			old := f.Name
			if a.DataType != nil && !arrow.TypeEqual(a.DataType, f.Type) {
				if !records.Widens(f.Type, a.DataType) {
					return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s.data_type: column %q cannot change from %s to %s: only widening without rewriting data is supported (wider integers, float32 to float64, utf8/binary to large_utf8/large_binary)", a.Field, old, f.Type, a.DataType)
				}
				f.Type = a.DataType
				ch.Retyped = append(ch.Retyped, old)
				ch.rewrite = base.IsLance()
			}
			if a.Nullable != nil && *a.Nullable != f.Nullable {
				if !*a.Nullable {
					return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s.nullable: column %q is nullable and cannot be made non-nullable", a.Field, old)
				}
				f.Nullable = true
				if !slices.Contains(ch.Retyped, old) {
					ch.Retyped = append(ch.Retyped, old)
				}
			}
			if a.Rename != nil && *a.Rename != old {
				name := *a.Rename
				switch {
				case strings.TrimSpace(name) == "":
					return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s.rename: the new name of column %q is empty", a.Field, old)
				case name == RowAddrColumn:
					return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s.rename: name %q is reserved", a.Field, name)
				case strings.ContainsAny(name, "\x00"):
					return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s.rename: name %q has a NUL byte", a.Field, name)
				}
				f.Name = name
				ch.Renamed[old] = name
			}
			fields[i] = f
		}
		seen := map[string]string{}
		for _, f := range fields {
			k := strings.ToLower(f.Name)
			if other, dup := seen[k]; dup {
				return nil, ch, errs.Errorf(errs.CodeInvalidInput, "alterations: the table would have columns %q and %q, which SQL cannot tell apart", other, f.Name)
			}
			seen[k] = f.Name
		}
		for k, old := range ch.Retyped {
			if n, ok := ch.Renamed[old]; ok {
				ch.Retyped[k] = n
			}
		}
		md := schema.Metadata()
		next := arrow.NewSchema(fields, &md)
		if err := checkSchema(next); err != nil {
			return nil, ch, err
		}
		return next, ch, nil
	})
}

// DropColumns removes columns from the schema in one new version. The
// data stays in the files (each fragment's column map skips it), so old
// versions still read it; cleanup of old versions does not reclaim it
// until the fragments are rewritten (update, compaction).
// Cost: one manifest write; no data is read or rewritten.
func (t *Table) DropColumns(ctx context.Context, columns []string) (*Manifest, error) {
	if len(columns) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "columns: at least one column is required")
	}
	return t.evolve(ctx, "drop_columns", func(base *Manifest, schema *arrow.Schema) (*arrow.Schema, SchemaChange, error) {
		var ch SchemaChange
		drop := map[int]bool{}
		for k, c := range columns {
			field := fmt.Sprintf("columns[%d]", k)
			i, err := resolveColumn(schema, field, c)
			if err != nil {
				return nil, ch, err
			}
			if drop[i] {
				return nil, ch, errs.Errorf(errs.CodeInvalidInput, "%s: column %q is listed twice", field, c)
			}
			drop[i] = true
			ch.Dropped = append(ch.Dropped, schema.Field(i).Name)
		}
		if len(drop) == schema.NumFields() {
			return nil, ch, errs.Errorf(errs.CodeInvalidInput, "columns: a table keeps at least one column (drop the table instead)")
		}
		var fields []arrow.Field
		for i, f := range schema.Fields() {
			if !drop[i] {
				fields = append(fields, f)
			}
		}
		for k, f := range base.Fragments {
			idx, err := f.FileFields(nil)
			if err != nil {
				return nil, ch, err
			}
			if idx == nil {
				idx = make([]int, schema.NumFields())
				for i := range idx {
					idx[i] = i
				}
				if base.lance {
					// The file's columns are this schema's: a Lance
					// manifest needs their leaf counts to place leaves.
					counts, _, err := leafCounts(schema)
					if err != nil {
						return nil, ch, err
					}
					base.Fragments[k].leaves = formatCounts(counts)
				}
			}
			if len(idx) != schema.NumFields() {
				return nil, ch, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("fragment %d: column map has %d entries for %d fields", f.ID, len(idx), schema.NumFields())}
			}
			var kept []int
			for i, c := range idx {
				if !drop[i] {
					kept = append(kept, c)
				}
			}
			base.Fragments[k].Columns = NewColumnMap(kept)
		}
		base.carry = base.carry.withoutFields(drop)
		md := schema.Metadata()
		return arrow.NewSchema(fields, &md), ch, nil
	})
}

// UpdateFieldMetadata merges (or, with Replace, replaces) the metadata of
// columns and answers the new version and each updated column's resulting
// metadata. Keys starting with PARQUET: or ARROW: are refused (the file
// writers read them). Cost: one manifest write.
func (t *Table) UpdateFieldMetadata(ctx context.Context, updates []FieldMetadataUpdate) (*Manifest, map[string]map[string]string, error) {
	if len(updates) == 0 {
		return nil, nil, errs.Errorf(errs.CodeInvalidInput, "updates: at least one update is required")
	}
	for _, u := range updates {
		for k := range u.Metadata {
			if reservedMetadataKey(k) {
				return nil, nil, errs.Errorf(errs.CodeInvalidInput, "%s.metadata: key %q is reserved for the file format", u.Field, k)
			}
		}
	}
	var result map[string]map[string]string
	m, err := t.evolve(ctx, "update_field_metadata", func(base *Manifest, schema *arrow.Schema) (*arrow.Schema, SchemaChange, error) {
		result = map[string]map[string]string{}
		fields := slices.Clone(schema.Fields())
		for _, u := range updates {
			i, err := resolveColumn(schema, u.Field+".path", u.Path)
			if err != nil {
				return nil, SchemaChange{}, err
			}
			md := map[string]string{}
			if !u.Replace {
				for k, v := range fields[i].Metadata.ToMap() {
					md[k] = v
				}
			}
			for k, v := range u.Metadata {
				if v == nil {
					delete(md, k)
				} else {
					md[k] = *v
				}
			}
			fields[i].Metadata = arrow.MetadataFrom(md)
			if len(md) == 0 {
				fields[i].Metadata = arrow.Metadata{}
			}
			result[fields[i].Name] = md
		}
		smd := schema.Metadata()
		return arrow.NewSchema(fields, &smd), SchemaChange{}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return m, result, nil
}

// UpdateSchemaMetadata replaces the schema's metadata with md and answers
// the new version. Cost: one manifest write.
func (t *Table) UpdateSchemaMetadata(ctx context.Context, md map[string]string) (*Manifest, error) {
	for k := range md {
		if reservedMetadataKey(k) {
			return nil, errs.Errorf(errs.CodeInvalidInput, "key %q is reserved for the file format", k)
		}
	}
	return t.evolve(ctx, "update_schema_metadata", func(base *Manifest, schema *arrow.Schema) (*arrow.Schema, SchemaChange, error) {
		var smd *arrow.Metadata
		if len(md) > 0 {
			m := arrow.MetadataFrom(md)
			smd = &m
		}
		return arrow.NewSchema(schema.Fields(), smd), SchemaChange{}, nil
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ReadFragmentAs is ReadFragment with the records given the names and
// types of schema, the schema of the version f belongs to (fields nil:
// all of them), whatever schema the file was written under.
func (t *Table) ReadFragmentAs(ctx context.Context, f Fragment, schema *arrow.Schema, fields []int, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	recs, err := t.ReadFragment(ctx, f, fields, mem)
	if err != nil {
		return nil, err
	}
	want := schema
	if fields != nil {
		fs := make([]arrow.Field, len(fields))
		for k, i := range fields {
			fs[k] = schema.Field(i)
		}
		want = arrow.NewSchema(fs, nil)
	}
	return conformAll(ctx, recs, want, mem)
}

// rewriteFragments rewrites every fragment of m (being committed, in
// schema s) as a new data file in s: its live rows, cast to s's types, as
// a fragment with a new id, as compaction does (property rewriters see
// the moves, and mvq's per-fragment indexes are rebuilt for the new
// fragments after the commit). Deletion files and column maps go with
// the old files. The rows keep their identities (RowIDsProperty: the
// new fragment's origin and deleted positions are the old one's), so a
// view over the table does not expand them again. It runs in the
// commit's op, so a retried commit rewrites again and cleanup removes
// the unused files.
func (t *Table) rewriteFragments(ctx context.Context, m *Manifest, s *arrow.Schema) error {
	prev, err := t.RowIDs(ctx, m)
	if err != nil {
		return err
	}
	mem := t.c.opts.Mem
	out := make([]Fragment, 0, len(m.Fragments))
	var merges []Merge
	var ids RowIDs
	for _, f := range m.Fragments {
		recs, err := t.ReadFragmentAs(ctx, f, s, nil, mem)
		if err != nil {
			return err
		}
		nf, err := t.WriteFile(ctx, s, recs)
		for _, r := range recs {
			r.Release()
		}
		if err != nil {
			return err
		}
		if nf.Rows != f.Rows {
			return &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("rewrite of fragment %d read %d rows of %d", f.ID, nf.Rows, f.Rows)}
		}
		nf.ID = m.NextFragmentID
		m.NextFragmentID++
		out = append(out, nf)
		merges = append(merges, Merge{From: []uint32{f.ID}, To: nf.ID})
		id := FragmentRowIDs{Fragment: nf.ID, Origin: f.ID}
		if p, ok := prev[f.ID]; ok {
			id.Origin, id.Deleted = p.Origin, p.Deleted
		}
		ids.Fragments = append(ids.Fragments, id)
	}
	raw, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if m.Properties == nil {
		m.Properties = map[string]json.RawMessage{}
	}
	for key, prop := range m.Properties {
		fn, ok := t.c.propertyRewriter(key)
		if !ok {
			continue
		}
		np, err := fn(prop, merges)
		if err != nil {
			return fmt.Errorf("rewrite: property %s: %w", key, err)
		}
		m.Properties[key] = np
	}
	m.Properties[RowIDsProperty] = raw
	m.Fragments = out
	return nil
}
