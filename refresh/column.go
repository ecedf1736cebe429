package refresh

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// Virtual and computed columns (spec add_columns). A column added with a
// virtual_column (user code a runtime runs) or computed (a SQL expression
// DuckDB evaluates) starts all NULL; its binding is kept in the table's
// "mvq.columns" property. A backfill job (backfill.go) fills existing rows;
// on a view, every refresh computes the columns for the rows it adds.

const (
	propColumns = "mvq.columns" // Properties: []ColumnBinding
	propFilled  = "mvq.filled"  // Properties: binding name → fragment id → version that filled it

	// UDFBackend is the udf_backend of virtual columns mvq runs.
	UDFBackend = "mvq.runtime/v1"

	bindingUDF      = "udf"
	bindingComputed = "computed"
)

// AddColumnEntry is the spec's AddColumnsEntry.
type AddColumnEntry struct {
	Name          string              `json:"name"`
	Expression    *string             `json:"expression"`
	Computed      *string             `json:"computed"`
	VirtualColumn *VirtualColumnEntry `json:"virtual_column"`
}

// VirtualColumnEntry is the spec's AddVirtualColumnEntry.
type VirtualColumnEntry struct {
	InputColumns     []string          `json:"input_columns"`
	Outputs          []VirtualOutput   `json:"outputs"`
	Image            *string           `json:"image"`
	UDF              string            `json:"udf"`
	UDFName          string            `json:"udf_name"`
	UDFVersion       string            `json:"udf_version"`
	UDFBackend       *string           `json:"udf_backend"`
	AutoBackfill     *bool             `json:"auto_backfill"`
	Manifest         *string           `json:"manifest"`
	ManifestChecksum *string           `json:"manifest_checksum"`
	FieldMetadata    map[string]string `json:"field_metadata"`
}

// VirtualOutput is the spec's AddVirtualColumnOutputEntry.
type VirtualOutput struct {
	Column      string             `json:"column"`
	StructField string             `json:"struct_field"`
	DataType    arrowjson.DataType `json:"data_type"`
	Nullable    *bool              `json:"nullable"`
	Metadata    map[string]string  `json:"metadata"`
}

// ColumnBinding is a virtual or computed column as the table keeps it.
// The output columns' types are the table schema's.
type ColumnBinding struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "udf" or "computed"
	// computed
	Expression string `json:"expression,omitempty"`
	// udf
	UDFBackend       string        `json:"udf_backend,omitempty"`
	UDF              string        `json:"udf,omitempty"`
	Runtime          string        `json:"runtime,omitempty"`
	InputColumns     []string      `json:"input_columns,omitempty"`
	Outputs          []BoundOutput `json:"outputs"`
	UDFName          string        `json:"udf_name,omitempty"`
	UDFVersion       string        `json:"udf_version,omitempty"`
	Image            string        `json:"image,omitempty"`
	Manifest         string        `json:"manifest,omitempty"`
	ManifestChecksum string        `json:"manifest_checksum,omitempty"`
	AutoBackfill     bool          `json:"auto_backfill,omitempty"`
}

// BoundOutput maps the key a UDF answers to a column of the table.
type BoundOutput struct {
	Column      string `json:"column"`
	StructField string `json:"struct_field"`
}

// Version is what "filled by the same UDF version" compares: udf_version,
// or for a computed column a digest of its expression.
func (b *ColumnBinding) Version() string {
	if b.Kind == bindingComputed {
		return "sql:" + sha256Hex(b.Expression)[:16]
	}
	return b.UDFVersion
}

// columnNames are the binding's output columns.
func (b *ColumnBinding) columnNames() []string {
	out := make([]string, len(b.Outputs))
	for i, o := range b.Outputs {
		out[i] = o.Column
	}
	return out
}

// has reports whether col is one of the binding's outputs or its name.
func (b *ColumnBinding) has(col string) bool {
	return b.Name == col || slices.Contains(b.columnNames(), col)
}

// tableColumns reads the bindings kept in manifest m.
func tableColumns(m *table.Manifest) ([]ColumnBinding, error) {
	raw, ok := m.Properties[propColumns]
	if !ok {
		return nil, nil
	}
	var out []ColumnBinding
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("version %d: column bindings unreadable", m.Version), Err: err}
	}
	return out, nil
}

// filledMap reads the backfill bookkeeping of m: binding → fragment id →
// the version whose values every non-null value of the fragment is.
func filledMap(m *table.Manifest) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	raw, ok := m.Properties[propFilled]
	if !ok {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("version %d: backfill record unreadable", m.Version), Err: err}
	}
	return out, nil
}

// compactFilled keeps the backfill record true after table.Compact: a
// merged fragment is filled by a version only when every part was.
func compactFilled(raw json.RawMessage, merges []table.Merge) (json.RawMessage, error) {
	var doc map[string]map[string]string
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	for _, frags := range doc {
		for _, mg := range merges {
			v, all := "", true
			for k, id := range mg.From {
				key := strconv.FormatUint(uint64(id), 10)
				got, ok := frags[key]
				delete(frags, key)
				if k == 0 {
					v = got
				}
				all = all && ok && got == v
			}
			if all && v != "" {
				frags[strconv.FormatUint(uint64(mg.To), 10)] = v
			}
		}
	}
	return json.Marshal(doc)
}

// AddColumns adds the columns of entries to table id (a table or a view),
// all NULL in existing rows, and records their bindings. Every fragment is
// rewritten with the new columns (same ids, so row addresses and a view's
// lineage stay). It answers the new version and the bindings added.
// Errors: CodeInvalidInput naming the field ("new_columns[0].virtual_column.udf:
// ..."), CodeTableNotFound, CodeConcurrentModification when the table
// changed while the columns were added (try again).
func (e *Engine) AddColumns(ctx context.Context, id []string, entries []AddColumnEntry) (*table.Manifest, []ColumnBinding, error) {
	return e.addColumns(ctx, id, "", entries)
}

func (e *Engine) addColumns(ctx context.Context, id []string, branch string, entries []AddColumnEntry) (*table.Manifest, []ColumnBinding, error) {
	if len(entries) == 0 {
		return nil, nil, invalid("new_columns: at least one column is required")
	}
	t, err := e.cat.OpenTable(ctx, id)
	if err == nil {
		t, err = t.OnBranch(ctx, branch)
	}
	if err != nil {
		return nil, nil, err
	}
	m, schema, err := t.LoadSchema(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	existing, err := tableColumns(m)
	if err != nil {
		return nil, nil, err
	}
	taken := map[string]bool{}
	for _, f := range schema.Fields() {
		taken[strings.ToLower(f.Name)] = true
	}
	for _, b := range existing {
		taken[strings.ToLower(b.Name)] = true
	}
	var added []ColumnBinding
	var fields []arrow.Field
	cur := schema
	for i, ent := range entries {
		field := fmt.Sprintf("new_columns[%d]", i)
		b, fs, err := e.bindColumn(ctx, field, ent, cur, taken)
		if err != nil {
			return nil, nil, err
		}
		added = append(added, b)
		fields = append(fields, fs...)
		cur = arrow.NewSchema(append(slices.Clone(cur.Fields()), fs...), nil)
	}
	if _, err := table.EncodeSchema(cur); err != nil {
		return nil, nil, invalid("new_columns: %v", err)
	}
	// Rewrite every fragment with the new columns, all null.
	files := make([]table.Fragment, len(m.Fragments))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for k, f := range m.Fragments {
		g.Go(func() error {
			recs, err := t.ReadFragment(gctx, f, nil, e.mem)
			if err != nil {
				return err
			}
			defer releaseAll(recs)
			out := make([]arrow.RecordBatch, 0, len(recs))
			defer func() { releaseAll(out) }()
			for _, r := range recs {
				rec, err := withNulls(gctx, r, cur, e)
				if err != nil {
					return err
				}
				out = append(out, rec)
			}
			nf, err := t.WriteFile(gctx, cur, out)
			if err != nil {
				return err
			}
			nf.ID = f.ID
			files[k] = nf
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	enc, err := table.EncodeSchema(cur)
	if err != nil {
		return nil, nil, err
	}
	bindings := append(slices.Clone(existing), added...)
	raw, err := json.Marshal(bindings)
	if err != nil {
		return nil, nil, err
	}
	nm, err := t.Commit(ctx, func(base *table.Manifest) (*table.Manifest, error) {
		if base.Version != m.Version {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "table %s changed while columns were added (version %d, now %d): try again", table.JoinID(id), m.Version, base.Version)
		}
		base.Operation = "add_columns"
		base.Schema = enc
		base.Fragments = files
		if base.Properties == nil {
			base.Properties = map[string]json.RawMessage{}
		}
		base.Properties[propColumns] = raw
		names := make([]string, len(added))
		for i, b := range added {
			names[i] = b.Name
		}
		base.Metadata = map[string]string{"mvq.added_columns": strings.Join(names, ",")}
		return base, nil
	})
	if err != nil {
		for _, f := range files {
			_ = e.cat.Warehouse().Delete(context.WithoutCancel(ctx), t.Key(f.Path))
		}
		return nil, nil, fmt.Errorf("add columns to %s: %w", table.JoinID(id), err)
	}
	return nm, added, nil
}

// withNulls is r with the fields of schema it lacks appended, all null.
func withNulls(ctx context.Context, r arrow.RecordBatch, schema *arrow.Schema, e *Engine) (arrow.RecordBatch, error) {
	cols := slices.Clone(r.Columns())
	var made []arrow.Array
	defer func() {
		for _, c := range made {
			c.Release()
		}
	}()
	for _, f := range schema.Fields()[len(cols):] {
		c := array.MakeArrayOfNull(e.mem, f.Type, int(r.NumRows()))
		made = append(made, c)
		cols = append(cols, c)
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: schema.Field(i).Name, Type: c.DataType(), Nullable: true}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, r.NumRows())
	defer rec.Release()
	return table.Conform(ctx, rec, schema, e.mem)
}

// bindColumn validates one entry against the schema so far and answers
// its binding and output fields.
func (e *Engine) bindColumn(ctx context.Context, field string, ent AddColumnEntry, schema *arrow.Schema, taken map[string]bool) (ColumnBinding, []arrow.Field, error) {
	var b ColumnBinding
	name := strings.TrimSpace(ent.Name)
	if name == "" {
		return b, nil, invalid("%s.name: required", field)
	}
	given := 0
	for _, set := range []bool{ent.Expression != nil, ent.Computed != nil, ent.VirtualColumn != nil} {
		if set {
			given++
		}
	}
	switch {
	case given != 1:
		return b, nil, invalid("%s: give exactly one of expression, computed or virtual_column", field)
	case ent.Expression != nil:
		return b, nil, errs.Errorf(errs.CodeUnsupported, "%s.expression: one-off expression columns are not supported; use computed (filled by backfill_column)", field)
	}
	claim := func(col, at string) error {
		lower := strings.ToLower(col)
		switch {
		case col == "" || strings.TrimSpace(col) != col:
			return invalid("%s: column name %q is empty or has surrounding spaces", at, col)
		case strings.HasPrefix(col, reservedPrefix) || col == table.RowAddrColumn:
			return invalid("%s: column name %q is reserved", at, col)
		case taken[lower]:
			return invalid("%s: column %q exists already", at, col)
		}
		taken[lower] = true
		return nil
	}
	if ent.Computed != nil {
		expr := strings.TrimSpace(*ent.Computed)
		if expr == "" {
			return b, nil, invalid("%s.computed: empty", field)
		}
		if err := e.db.CheckExpression(ctx, expr); err != nil {
			return b, nil, invalid("%s.computed: %v", field, err)
		}
		typ, err := e.computedType(ctx, schema, expr)
		if err != nil {
			return b, nil, invalid("%s.computed: %v", field, err)
		}
		if err := claim(name, field+".name"); err != nil {
			return b, nil, err
		}
		b = ColumnBinding{Name: name, Kind: bindingComputed, Expression: expr, Outputs: []BoundOutput{{Column: name, StructField: name}}}
		return b, []arrow.Field{{Name: name, Type: typ, Nullable: true}}, nil
	}
	vc := ent.VirtualColumn
	field += ".virtual_column"
	if vc.UDFBackend != nil && *vc.UDFBackend != UDFBackend {
		return b, nil, invalid("%s.udf_backend: %q is not supported; this deployment runs %q (udf = base64 of {\"runtime\": \"<name>\"})", field, *vc.UDFBackend, UDFBackend)
	}
	if vc.UDF == "" {
		return b, nil, invalid("%s.udf: required (base64 of {\"runtime\": \"<name>\"})", field)
	}
	doc, err := decodeBase64(vc.UDF)
	if err != nil {
		return b, nil, invalid("%s.udf: not base64: %v", field, err)
	}
	d, ok, err := parseUDFDoc(doc, field+".udf")
	if err != nil {
		return b, nil, err
	}
	if !ok {
		return b, nil, invalid("%s.udf: not a runtime reference (want base64 of {\"runtime\": \"<name>\"})", field)
	}
	// udf_name and udf_version may be left out: the runtime's name and
	// "1" (a backfill refills rows filled by another udf_version).
	udfName, udfVersion := vc.UDFName, vc.UDFVersion
	if udfName == "" {
		udfName = d.Runtime
	}
	if udfVersion == "" {
		udfVersion = DefaultUDFVersion
	}
	if strings.TrimSpace(udfName) == "" {
		return b, nil, invalid("%s.udf_name: blank", field)
	}
	if strings.TrimSpace(udfVersion) == "" {
		return b, nil, invalid("%s.udf_version: blank", field)
	}
	if len(vc.InputColumns) == 0 {
		return b, nil, invalid("%s.input_columns: at least one input column is required", field)
	}
	for _, c := range vc.InputColumns {
		if len(schema.FieldIndices(c)) == 0 {
			return b, nil, errs.Errorf(errs.CodeTableColumnNotFound, "%s.input_columns: column %q not found", field, c)
		}
	}
	b = ColumnBinding{Name: name, Kind: bindingUDF, UDFBackend: UDFBackend, UDF: vc.UDF, Runtime: d.Runtime,
		InputColumns: slices.Clone(vc.InputColumns), UDFName: udfName, UDFVersion: udfVersion}
	if vc.Image != nil {
		b.Image = *vc.Image
	}
	if vc.AutoBackfill != nil {
		b.AutoBackfill = *vc.AutoBackfill
	}
	if vc.Manifest != nil && *vc.Manifest != "" {
		sum := ""
		if vc.ManifestChecksum != nil {
			sum = *vc.ManifestChecksum
		}
		if _, err := e.checkManifestText(field+".manifest", *vc.Manifest, sum); err != nil {
			return b, nil, err
		}
		b.Manifest, b.ManifestChecksum = *vc.Manifest, ManifestChecksum(*vc.Manifest)
	} else if vc.ManifestChecksum != nil && *vc.ManifestChecksum != "" {
		return b, nil, invalid("%s.manifest_checksum: given without a manifest", field)
	}
	var fields []arrow.Field
	seenKey := map[string]bool{}
	for k, o := range vc.Outputs {
		at := fmt.Sprintf("%s.outputs[%d]", field, k)
		col := o.Column
		if col == "" && len(vc.Outputs) == 1 {
			col = name
		}
		if o.StructField == "" {
			return b, nil, invalid("%s.struct_field: required (the key the UDF answers)", at)
		}
		if seenKey[o.StructField] || strings.HasPrefix(o.StructField, "__") {
			return b, nil, invalid("%s.struct_field: %q is repeated or reserved", at, o.StructField)
		}
		seenKey[o.StructField] = true
		if o.Nullable != nil && !*o.Nullable {
			return b, nil, invalid("%s.nullable: must be true: a virtual column is NULL until it is filled", at)
		}
		js := arrowjson.Schema{Fields: []arrowjson.Field{{Name: col, Type: o.DataType, Nullable: true, Metadata: o.Metadata}}}
		as, err := js.ToArrow()
		if err != nil {
			return b, nil, invalid("%s.data_type: %s", at, strings.TrimPrefix(err.Error(), "arrowjson: "))
		}
		if err := claim(col, at+".column"); err != nil {
			return b, nil, err
		}
		f := as.Field(0)
		if len(vc.FieldMetadata) > 0 {
			keys, vals := f.Metadata.Keys(), f.Metadata.Values()
			for k, v := range vc.FieldMetadata {
				keys, vals = append(keys, k), append(vals, v)
			}
			f.Metadata = arrow.NewMetadata(keys, vals)
		}
		fields = append(fields, f)
		b.Outputs = append(b.Outputs, BoundOutput{Column: col, StructField: o.StructField})
	}
	// The runtime must exist (after the manifest's mvq.runtime), the
	// manifest fit it, and an embeddings runtime fit the outputs.
	s, err := e.settingsFrom(field+".manifest", b.Manifest, b.Runtime)
	if err != nil {
		if strings.HasPrefix(tableMessage(err), field+".manifest") {
			return b, nil, err
		}
		return b, nil, invalid("%s.udf: %v", field, tableMessage(err))
	}
	if len(vc.Outputs) == 0 {
		// Left out: one embedding column, for a runtime that declares
		// its dimensions.
		if s.Dimensions <= 0 {
			return b, nil, invalid("%s.outputs: at least one output is required (they may be left out only for a runtime that declares dimensions; runtime %s does not)", field, s.Name)
		}
		f, err := embeddingOutput(name, s.Dimensions, vc.FieldMetadata)
		if err != nil {
			return b, nil, invalid("%s.outputs: %v", field, err)
		}
		if err := claim(name, field+".name"); err != nil {
			return b, nil, err
		}
		fields = append(fields, f)
		b.Outputs = append(b.Outputs, BoundOutput{Column: name, StructField: udf.HashEmbedField})
	}
	if err := checkEmbeddingShape(s, b.InputColumns, schema, fields); err != nil {
		return b, nil, invalid("%s: %v", field, err)
	}
	return b, fields, nil
}

// DefaultUDFVersion is the udf_version of a virtual column added without
// one.
const DefaultUDFVersion = "1"

// embeddingOutput is the column an embeddings runtime of dims dimensions
// fills when add_columns leaves the outputs out: fixed_size_list<float32>
// [dims], answered under the key "embedding", with the entry's
// field_metadata.
func embeddingOutput(name string, dims int, meta map[string]string) (arrow.Field, error) {
	if dims > 1<<16 {
		return arrow.Field{}, fmt.Errorf("%d dimensions: at most %d", dims, 1<<16)
	}
	f := arrow.Field{Name: name, Type: arrow.FixedSizeListOf(int32(dims), arrow.PrimitiveTypes.Float32), Nullable: true}
	if len(meta) > 0 {
		var keys, vals []string
		for _, k := range slices.Sorted(maps.Keys(meta)) {
			keys, vals = append(keys, k), append(vals, meta[k])
		}
		f.Metadata = arrow.NewMetadata(keys, vals)
	}
	return f, nil
}

// tableMessage is err's message without the code's decoration.
func tableMessage(err error) string {
	if te, ok := err.(*errs.Error); ok && te.Message != "" {
		return te.Message
	}
	return err.Error()
}

// checkEmbeddingShape: an openai-embeddings runtime takes one text input
// and answers one fixed_size_list<float32>[dimensions] output.
func checkEmbeddingShape(s udf.Settings, inputs []string, schema *arrow.Schema, outs []arrow.Field) error {
	if s.Kind != udf.KindHTTP || s.Protocol != udf.ProtocolOpenAIEmbeddings {
		return nil
	}
	if len(inputs) != 1 || len(outs) != 1 {
		return fmt.Errorf("runtime %s (openai-embeddings) takes one input column and gives one output", s.Name)
	}
	if idx := schema.FieldIndices(inputs[0]); len(idx) > 0 && !isText(schema.Field(idx[0]).Type) {
		return fmt.Errorf("input_columns: %q is %s; runtime %s embeds text", inputs[0], schema.Field(idx[0]).Type, s.Name)
	}
	want := arrow.FixedSizeListOf(int32(s.Dimensions), arrow.PrimitiveTypes.Float32)
	if got, ok := outs[0].Type.(*arrow.FixedSizeListType); !ok || got.Len() != want.Len() || got.Elem().ID() != arrow.FLOAT32 {
		return fmt.Errorf("outputs[0].data_type: %s, but runtime %s answers embeddings of %d dimensions: want {\"type\": \"fixed_size_list\", \"length\": %d, \"fields\": [{\"name\": \"item\", \"type\": {\"type\": \"float32\"}, \"nullable\": true}]}",
			outs[0].Type, s.Name, s.Dimensions, s.Dimensions)
	}
	return nil
}

// computedType binds expr over an empty input of schema and answers its
// type.
func (e *Engine) computedType(ctx context.Context, schema *arrow.Schema, expr string) (arrow.DataType, error) {
	out, err := e.bind(ctx, computedInput, schema, computedQuery(expr))
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(tableMessage(err), "source_query: "))
	}
	t := out.Field(0).Type
	if t.ID() == arrow.NULL {
		return nil, fmt.Errorf("the expression has no type (a bare NULL); cast it")
	}
	return t, nil
}

// computedInput names the rows a computed column's expression reads.
const computedInput = "__rows"

func computedQuery(expr string) string {
	return "SELECT (" + expr + ") AS " + duck.QuoteIdent("v") + " FROM " + duck.QuoteIdent(computedInput)
}

// columnSettings resolves the runtime of a udf binding for one job under
// the job's inline manifest (jobManifest), else the column's
// (settingsInForce).
func (e *Engine) columnSettings(b *ColumnBinding, jobManifest string) (udf.Settings, error) {
	return e.settingsInForce(jobManifest, b.Manifest, "virtual_column.manifest", b.Runtime)
}
