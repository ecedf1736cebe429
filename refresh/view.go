package refresh

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/lru"
	lancefile "github.com/mvq-dev/mvq/lance/file"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/internal/strictjson"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// Engine creates views and runs the steps of their refreshes against a
// catalog. It keeps no state between calls except a small cache of
// immutable versions, keyed by job, so it is safe for concurrent use and
// any number of processes may run steps of one job.
type Engine struct {
	cat   *table.Catalog
	db    *duck.DB
	mem   memory.Allocator
	cache cache
	views *lru.Cache[string, viewEntry] // decoded latest view versions (View)
	// wholeFileBytes: source fragments up to this size are read with one
	// request, larger ones with ranged reads of the row groups and pages
	// needed.
	wholeFileBytes int64
	opts           EngineOptions
	// udfs runs user code (subprocess pools, http limits); Close stops it.
	udfs      *udf.Manager
	chunkHook func() // tests: runs in each chunking goroutine
	// cpuWaitHook (tests) runs when an item finds every CPU token taken.
	cpuWaitHook func()
	// readHook (tests) runs when a work item reads its source rows.
	readHook func()
	// syncHook (tests) runs before a work item syncs the files rels.
	syncHook func(rels []string)
	// userCodeHook (tests) runs as a computed column's user code starts.
	userCodeHook func()
	passes       passThroughs // projection-only queries run without DuckDB (project.go)
	// fssts shares trained FSST tables among the files the work items of
	// a view write in this process (fragio.go).
	fssts *lru.Cache[string, *lancefile.FSSTTables]
	// cpu holds a token per row-wise item applying and writing
	// (EngineOptions.CPUItems).
	cpu chan struct{}
}

// Close stops the subprocesses user code runs in. The engine must not be
// used after.
func (e *Engine) Close() error { return e.udfs.Close() }

// NewEngine returns an engine over cat that evaluates SQL with cat.SQL(),
// with the default EngineOptions.
func NewEngine(cat *table.Catalog) *Engine { return NewEngineWith(cat, EngineOptions{}) }

// NewEngineWith is NewEngine with options (zero fields: defaults).
// It installs Hooks on cat.
func NewEngineWith(cat *table.Catalog, opts EngineOptions) *Engine {
	cat.Use(Hooks())
	opts = opts.withDefaults()
	return &Engine{cat: cat, db: cat.SQL(), mem: cat.Options().Mem, wholeFileBytes: defaultWholeFileBytes, opts: opts, udfs: udf.NewManager(cat.Options().Mem),
		views: lru.New[string, viewEntry](viewsBytes), fssts: lru.New[string, *lancefile.FSSTTables](fsstTablesBytes),
		cpu: make(chan struct{}, opts.CPUItems)}
}

// cpuSlot waits for one of the engine's CPUItems tokens (or ctx) and
// answers how long it waited; releaseCPU gives the token back.
func (e *Engine) cpuSlot(ctx context.Context) (time.Duration, error) {
	select {
	case e.cpu <- struct{}{}:
		return 0, nil
	default:
	}
	if e.cpuWaitHook != nil {
		e.cpuWaitHook()
	}
	t0 := time.Now()
	select {
	case e.cpu <- struct{}{}:
		return time.Since(t0), nil
	case <-ctx.Done():
		return time.Since(t0), context.Cause(ctx)
	}
}

func (e *Engine) releaseCPU() { <-e.cpu }

// cpuHold is a work item's claim on a CPU token while it applies and
// writes. User code (a column computed by a runtime: HTTP or a
// subprocess) waits on I/O, so the item gives the token up for the call
// (leave) and takes one again after it (back); calls from several of the
// item's goroutines share one leave.
type cpuHold struct {
	e    *Engine
	mu   sync.Mutex
	held bool
	out  int // user-code calls in flight
}

type cpuHoldKey struct{}

// holdCPU takes a token for a work item (waiting as cpuSlot does) and
// answers ctx carrying the hold, for the item's user-code calls.
func (e *Engine) holdCPU(ctx context.Context) (context.Context, *cpuHold, time.Duration, error) {
	waited, err := e.cpuSlot(ctx)
	if err != nil {
		return ctx, nil, waited, err
	}
	h := &cpuHold{e: e, held: true}
	return context.WithValue(ctx, cpuHoldKey{}, h), h, waited, nil
}

// leaveCPU gives up the token of the work item of ctx, if any, for a call
// that waits on I/O; the answer takes it back (or fails when ctx ends).
func leaveCPU(ctx context.Context) func() error {
	h, _ := ctx.Value(cpuHoldKey{}).(*cpuHold)
	if h == nil {
		return func() error { return nil }
	}
	h.mu.Lock()
	h.out++
	if h.held {
		h.e.releaseCPU()
		h.held = false
	}
	h.mu.Unlock()
	return func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.out--
		if h.out > 0 || h.held {
			return nil
		}
		if _, err := h.e.cpuSlot(ctx); err != nil {
			return err
		}
		h.held = true
		return nil
	}
}

// release gives the token back when the item is done.
func (h *cpuHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.e.releaseCPU()
		h.held = false
	}
}

// CreateRequest mirrors the API's CreateMaterializedViewRequest.
type CreateRequest struct {
	Kind         string     `json:"kind"`
	SourceQuery  string     `json:"source_query"`
	OutputSchema string     `json:"output_schema"` // base64 Arrow IPC schema; "" = derive
	UDTFSpec     *UDTFEntry `json:"udtf_spec,omitempty"`
	AutoRefresh  bool       `json:"auto_refresh,omitempty"`
}

// UDTFEntry is the spec's MaterializedViewUdtfEntry. For a chunker view UDTF
// is the base64 chunker spec JSON and UDTFSha the hex SHA-256 of the
// decoded JSON; the optional fields are stored as they are. The fields
// NotHonoured lists are recorded and never acted on; a refresh reports
// them (Options.UDTFSpecNotHonoured).
type UDTFEntry struct {
	Kind                     string          `json:"kind"`
	UDTF                     string          `json:"udtf"`
	UDTFSha                  string          `json:"udtf_sha"`
	UDTFName                 string          `json:"udtf_name"`
	UDTFVersion              string          `json:"udtf_version"`
	InputColumns             []string        `json:"input_columns,omitempty"`
	PartitionBy              *string         `json:"partition_by,omitempty"`
	PartitionByIndexedColumn *string         `json:"partition_by_indexed_column,omitempty"`
	NumCPUs                  *float64        `json:"num_cpus,omitempty"`
	NumGPUs                  *float64        `json:"num_gpus,omitempty"`
	Memory                   *int64          `json:"memory,omitempty"`
	ErrorHandling            json.RawMessage `json:"error_handling,omitempty"`
	Batch                    *bool           `json:"batch,omitempty"`
	Manifest                 *string         `json:"manifest,omitempty"`
	ManifestChecksum         *string         `json:"manifest_checksum,omitempty"`
}

// NotHonoured lists, by their JSON names, the fields of u given (not
// empty) that this deployment records but does not act on: the resource
// requests (num_cpus, num_gpus, memory: the operator's runtimes fix the
// resources), batch (the chunker runs in the worker), an index-based
// partitioning (partition_by_indexed_column; partition_by is honoured),
// and udtf_name and udtf_version (the udtf envelope, not a name, says
// what runs). nil for a nil u.
func (u *UDTFEntry) NotHonoured() []string {
	if u == nil {
		return nil
	}
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"udtf_name", u.UDTFName != ""},
		{"udtf_version", u.UDTFVersion != ""},
		{"partition_by_indexed_column", u.PartitionByIndexedColumn != nil},
		{"num_cpus", u.NumCPUs != nil},
		{"num_gpus", u.NumGPUs != nil},
		{"memory", u.Memory != nil},
		{"batch", u.Batch != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// View is a materialized view at one version.
type View struct {
	ID       []string
	Def      Definition
	Manifest *table.Manifest
	Table    *table.Table
	// Schema is the view's output schema (the table schema).
	Schema *arrow.Schema
	// Watermark is what the view was last refreshed from; nil when it
	// never was.
	Watermark *Watermark
	// Binding is the view's kind bound to its udtf_spec: what derives
	// its schema and applies it (see ViewKind).
	Binding Binding
	// Columns are the virtual and computed columns added to the view
	// (add_columns); a refresh computes them for the rows it adds.
	Columns []ColumnBinding

	query *sourceQuery
	kind  *View      // the view without Columns (kindView)
	udtf  *UDTFEntry // Def.UDTFSpec decoded (nil: none)
}

func invalid(format string, args ...any) error {
	return errs.Errorf(errs.CodeInvalidInput, format, args...)
}

// CreateView validates req and creates the view as a table at version 1
// with no rows, its Definition in Properties["mvq.view"] and its output
// schema as the table schema. Errors are *errs.Error: CodeInvalidInput
// naming the field ("source_query: ...", "udtf_spec.udtf: ...",
// "output_schema: ..."), CodeNamespaceNotFound, CodeTableAlreadyExists
// (the view exists) and CodeTableNotFound (the source does not).
func (e *Engine) CreateView(ctx context.Context, id []string, req CreateRequest) (*table.Manifest, error) {
	if len(id) == 0 {
		return nil, invalid("id: a view identifier needs a name")
	}
	for _, p := range id {
		if err := table.ValidatePart(p); err != nil {
			return nil, invalid("id: %v", err)
		}
	}
	kind := Kind(req.Kind)
	if kind == "" {
		return nil, invalid("kind: required (%s)", strings.Join(KindNames(), ", "))
	}
	vk, err := kindOf(kind)
	if err != nil {
		return nil, err
	}
	rowwise := vk.Traits().RowWise
	if strings.TrimSpace(req.SourceQuery) == "" {
		return nil, invalid("source_query: required")
	}
	def := Definition{Kind: kind, SourceQuery: req.SourceQuery, AutoRefresh: req.AutoRefresh}
	binding, err := bindEntry(kind, req.UDTFSpec)
	if err != nil {
		return nil, err
	}
	var manifest *Manifest
	if u := req.UDTFSpec; u != nil && u.Manifest != nil && *u.Manifest != "" {
		sum := ""
		if u.ManifestChecksum != nil {
			sum = *u.ManifestChecksum
		}
		if manifest, err = e.checkManifestText("udtf_spec.manifest", *u.Manifest, sum); err != nil {
			return nil, err
		}
	}
	if ru, ok := binding.(runtimeUser); ok {
		for _, name := range ru.Runtimes() {
			if _, ok := e.opts.Runtimes.Lookup(name); !ok {
				return nil, invalid("udtf_spec.udtf: runtime %q is not a runtime of this deployment (declared: %s)", name, runtimeList(e.opts.Runtimes))
			}
			// The stored manifest within what the runtime allows.
			if _, err := e.resolveRuntime("udtf_spec.manifest", manifest, name); err != nil {
				return nil, err
			}
		}
	}
	if req.UDTFSpec != nil {
		if def.UDTFSpec, err = json.Marshal(req.UDTFSpec); err != nil {
			return nil, err
		}
		if req.UDTFSpec.Manifest != nil {
			def.Manifest = *req.UDTFSpec.Manifest
		}
	}
	sq, err := analyzeQuery(req.SourceQuery, rowwise)
	if err != nil {
		return nil, err
	}
	if err := checkQuery(ctx, e.db, sq, rowwise); err != nil {
		return nil, err
	}
	def.Source = sq.Source

	if ok, err := e.cat.NamespaceExists(ctx, id[:len(id)-1]); err != nil {
		return nil, err
	} else if !ok {
		return nil, errs.Errorf(errs.CodeNamespaceNotFound, "namespace %s not found", table.JoinID(id[:len(id)-1]))
	}
	if _, err := e.cat.OpenTable(ctx, id); err == nil {
		return nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", table.JoinID(id))
	} else if errs.CodeOf(err) != errs.CodeTableNotFound {
		return nil, err
	}
	if table.JoinID(sq.Source) == table.JoinID(id) {
		return nil, invalid("source_query: a view cannot read itself")
	}
	if err := e.checkChain(ctx, id, sq.Source); err != nil {
		return nil, err
	}
	src, err := e.cat.OpenTable(ctx, sq.Source)
	if err != nil {
		if errs.CodeOf(err) == errs.CodeTableNotFound {
			return nil, errs.Errorf(errs.CodeTableNotFound, "source_query: source table %s not found", table.JoinID(sq.Source))
		}
		return nil, err
	}
	sm, err := src.Load(ctx, 0)
	if err != nil {
		return nil, err
	}
	// The view binds to the source's identity: a rename keeps it bound.
	if def.SourceUUID, err = src.Identity(ctx, sm); err != nil {
		return nil, err
	}
	srcSchema, err := sm.ArrowSchema()
	if err != nil {
		return nil, err
	}
	var schema *arrow.Schema
	if tos, ok := binding.(takesOutputSchema); ok {
		if req.OutputSchema == "" {
			return nil, invalid("output_schema: required for a %s view that runs user code (its columns cannot be derived)", kind)
		}
		given, err := arrowjson.DecodeIPCSchema(req.OutputSchema)
		if err != nil {
			return nil, invalid("output_schema: not a base64 Arrow IPC schema (%s)", strings.TrimPrefix(err.Error(), "arrowjson: "))
		}
		sel, err := e.bind(ctx, sq.Name, srcSchema, sq.SQL)
		if err != nil {
			return nil, err
		}
		if err := tos.CheckOutputSchema(sel.Fields(), given); err != nil {
			return nil, err
		}
		schema = given
	} else if schema, err = e.deriveSchema(ctx, rowwise, sq, binding, srcSchema); err != nil {
		return nil, err
	} else if req.OutputSchema != "" {
		given, err := arrowjson.DecodeIPCSchema(req.OutputSchema)
		if err != nil {
			return nil, invalid("output_schema: not a base64 Arrow IPC schema (%s)", strings.TrimPrefix(err.Error(), "arrowjson: "))
		}
		if err := sameFields(given, schema); err != nil {
			return nil, invalid("output_schema: %v", err)
		}
		schema = given
	}
	if def.OutputSchema, err = table.EncodeSchema(schema); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	empty, _ := array.NewRecordReader(schema, nil)
	_, m, err := e.cat.CreateTable(ctx, id, schema, empty, "create", map[string]json.RawMessage{propView: raw})
	if err != nil {
		return nil, fmt.Errorf("create view %s: %w", table.JoinID(id), err)
	}
	return m, nil
}

// bindEntry validates udtf_spec for kind (what every kind shares here,
// the rest by the kind) and returns the kind bound to it.
func bindEntry(kind Kind, u *UDTFEntry) (Binding, error) {
	vk, err := kindOf(kind)
	if err != nil {
		return nil, err
	}
	switch use := vk.Traits().Spec; {
	case u != nil && use == SpecForbidden:
		return nil, invalid("udtf_spec: must be null for kind %s", kind)
	case u == nil && use == SpecRequired:
		return nil, invalid("udtf_spec: required for kind %s", kind)
	case u == nil:
		return vk.Bind(nil, nil)
	}
	if u.Kind != string(kind) {
		return nil, invalid("udtf_spec.kind: %q must match the view kind %q", u.Kind, kind)
	}
	if u.UDTF == "" {
		return nil, invalid("udtf_spec.udtf: required")
	}
	doc, err := decodeBase64(u.UDTF)
	if err != nil {
		return nil, invalid("udtf_spec.udtf: not base64: %v", err)
	}
	sum := sha256.Sum256(doc)
	if u.UDTFSha == "" {
		return nil, invalid("udtf_spec.udtf_sha: required (hex SHA-256 of the decoded udtf)")
	}
	if !strings.EqualFold(u.UDTFSha, hex.EncodeToString(sum[:])) {
		return nil, invalid("udtf_spec.udtf_sha: %q is not the SHA-256 of the decoded udtf (%x)", u.UDTFSha, sum)
	}
	if u.Manifest != nil && *u.Manifest != "" {
		if err := checkManifest(*u.Manifest); err != nil {
			return nil, invalid("udtf_spec.manifest: %v", err)
		}
	}
	return vk.Bind(u, doc)
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err == nil {
			return b, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// checkManifest accepts a JSON object without duplicate keys.
func checkManifest(s string) error {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if obj == nil {
		return fmt.Errorf("not a JSON object")
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON object")
	}
	if err := strictjson.Check([]byte(s), 64); err != nil {
		return fmt.Errorf("not a valid JSON object: %v", err)
	}
	return nil
}

// sameFields reports the first field where got differs from want in name
// or type (nullability and metadata are not compared).
func sameFields(got, want *arrow.Schema) error {
	for i := 0; i < max(got.NumFields(), want.NumFields()); i++ {
		switch {
		case i >= got.NumFields():
			w := want.Field(i)
			return fmt.Errorf("field %d %q (%s) missing: the view produces %s", i, w.Name, w.Type, fieldList(want))
		case i >= want.NumFields():
			g := got.Field(i)
			return fmt.Errorf("field %d %q (%s) is not produced by the view, which produces %s", i, g.Name, g.Type, fieldList(want))
		}
		g, w := got.Field(i), want.Field(i)
		if g.Name != w.Name {
			return fmt.Errorf("field %d is %q, the view produces %q there (%s)", i, g.Name, w.Name, fieldList(want))
		}
		if !arrow.TypeEqual(g.Type, w.Type) {
			return fmt.Errorf("field %q has type %s, the view produces %s", g.Name, g.Type, w.Type)
		}
	}
	return nil
}

func fieldList(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// sqlError turns an error of user SQL into a 400 naming source_query.
func sqlError(err error) error {
	if e := table.EngineErr(err); e != nil {
		return e
	}
	var se *duck.SQLError
	if !errors.As(err, &se) {
		return err
	}
	msg := se.Err.Error()
	// DuckDB quotes the query (with the engine's internal input names)
	// after the first line; the first line says what is wrong.
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if strings.Contains(msg, `"`+table.RowAddrColumn+`" must appear in the GROUP BY`) {
		return invalid("source_query: aggregates are not allowed in a row-wise view (each view row must come from one source row); use kind udtf")
	}
	return invalid("source_query: %s", strings.TrimSpace(msg))
}

// withRowAddr is schema plus the _rowaddr column row-wise queries read.
func withRowAddr(schema *arrow.Schema) *arrow.Schema {
	fields := append(schema.Fields(), arrow.Field{Name: table.RowAddrColumn, Type: arrow.PrimitiveTypes.Uint64})
	return arrow.NewSchema(fields, nil)
}

// bind runs query over an empty input of schema and returns the result
// schema: names and types without reading a row.
func (e *Engine) bind(ctx context.Context, name string, schema *arrow.Schema, query string) (*arrow.Schema, error) {
	empty, _ := array.NewRecordReader(schema, nil)
	rdr, err := e.db.Query(ctx, map[string]array.RecordReader{name: empty}, query)
	if err != nil {
		return nil, sqlError(err)
	}
	out := rdr.Schema()
	recs, err := duck.Collect(rdr)
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return nil, sqlError(err)
	}
	return out, nil
}

// deriveSchema computes the view's output schema by binding its query over
// an empty input of the source schema and handing the selected columns to
// the kind.
func (e *Engine) deriveSchema(ctx context.Context, rowwise bool, sq *sourceQuery, b Binding, src *arrow.Schema) (*arrow.Schema, error) {
	if !rowwise {
		out, err := e.bind(ctx, sq.Name, src, sq.SQL)
		if err != nil {
			return nil, err
		}
		cols, err := b.Columns(out.Fields())
		if err != nil {
			return nil, err
		}
		return arrow.NewSchema(cols, nil), nil
	}
	out, err := e.bind(ctx, sq.Name, withRowAddr(src), sq.Rowwise)
	if err != nil {
		return nil, err
	}
	cols := selectedFields(out)
	seen := map[string]bool{}
	for _, f := range cols {
		lower := strings.ToLower(f.Name)
		switch {
		case f.Name == "":
			return nil, invalid("source_query: an output column has no name; use AS")
		case strings.HasPrefix(f.Name, reservedPrefix):
			return nil, invalid("source_query: output column %q: names starting with %q are reserved", f.Name, reservedPrefix)
		case seen[lower]:
			return nil, invalid("source_query: output column %q selected twice; give each column a unique name with AS", f.Name)
		}
		seen[lower] = true
	}
	rest, err := b.Columns(cols)
	if err != nil {
		return nil, err
	}
	fields := []arrow.Field{{Name: SourceRowIDColumn, Type: arrow.PrimitiveTypes.Uint64}}
	return arrow.NewSchema(append(fields, rest...), nil), nil
}

// selectedFields are the user's columns of a row-wise query result: all
// but the leading __source_row_id and any _rowaddr a star brought in.
func selectedFields(out *arrow.Schema) []arrow.Field {
	var cols []arrow.Field
	for i, f := range out.Fields() {
		if i == 0 || f.Name == table.RowAddrColumn {
			continue
		}
		cols = append(cols, f)
	}
	return cols
}

func isText(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	}
	return false
}

// View loads a view's definition and latest version. A table that is not
// a view is CodeInvalidInput; a missing one CodeTableNotFound. The decoded
// view is cached, keyed by the identifier and checked on every call
// against the latest version file the warehouse lists (number, name, size,
// modification time): one listing per call, and the manifest is read and
// decoded again only when a commit, drop or re-create changed it. A *View
// is shared and must not be modified.
func (e *Engine) View(ctx context.Context, id []string) (*View, error) {
	key := strings.Join(id, "\x00")
	ent, ok := e.views.Get(key)
	t := ent.t
	if !ok {
		var err error
		if t, err = e.cat.OpenTable(ctx, id); err != nil {
			return nil, err
		}
	}
	vf, err := t.LatestVersion(ctx)
	if err != nil {
		if ok && errs.CodeOf(err) == errs.CodeTableNotFound {
			e.views.Delete(key)
		}
		return nil, err
	}
	if ok && ent.vf.Same(vf) {
		return ent.v, nil
	}
	m, err := t.LoadFile(ctx, vf)
	if err != nil {
		return nil, err
	}
	v, err := viewOf(t, m)
	if err != nil {
		return nil, err
	}
	ent = viewEntry{t: t, vf: vf, v: v}
	e.views.Set(key, ent, ent.size(key))
	return v, nil
}

// viewEntry is a cached latest decoded version of a view (Engine.views).
type viewEntry struct {
	t  *table.Table
	vf table.VersionFile
	v  *View
}

// viewsBytes bounds Engine.views.
const viewsBytes = 64 << 20

// size is the entry's share of viewsBytes under key: the decoded view
// is taken to be as large as its manifest file.
func (e viewEntry) size(key string) int64 {
	return int64(len(key)) + e.vf.Size + 1024
}

// loadView loads version v of a view (0: the latest).
func (e *Engine) loadView(ctx context.Context, id []string, v uint64) (*View, error) {
	t, err := e.cat.OpenTable(ctx, id)
	if err != nil {
		return nil, err
	}
	m, err := t.Load(ctx, v)
	if err != nil {
		return nil, err
	}
	return viewOf(t, m)
}

// viewOf decodes the view kept in manifest m of table t.
func viewOf(t *table.Table, m *table.Manifest) (*View, error) {
	raw, ok := m.Properties[propView]
	if !ok {
		return nil, invalid("table %s is not a materialized view", table.JoinID(t.ID()))
	}
	corrupt := func(what string, err error) error {
		return &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("view %s v%d: %s", table.JoinID(t.ID()), m.Version, what), Err: err}
	}
	v := &View{ID: t.ID(), Manifest: m, Table: t}
	if err := json.Unmarshal(raw, &v.Def); err != nil {
		return nil, corrupt("definition unreadable", err)
	}
	if w, ok := m.Properties[propWatermark]; ok {
		v.Watermark = new(Watermark)
		if err := json.Unmarshal(w, v.Watermark); err != nil {
			return nil, corrupt("watermark unreadable", err)
		}
	}
	var err error
	if v.Schema, err = m.ArrowSchema(); err != nil {
		return nil, corrupt("schema unreadable", err)
	}
	if v.query, err = analyzeQuery(v.Def.SourceQuery, traitsOf(v.Def.Kind).RowWise); err != nil {
		return nil, corrupt("source query", err)
	}
	var u *UDTFEntry
	if len(v.Def.UDTFSpec) > 0 && string(v.Def.UDTFSpec) != "null" {
		u = new(UDTFEntry)
		if err := json.Unmarshal(v.Def.UDTFSpec, u); err != nil {
			return nil, corrupt("udtf_spec unreadable", err)
		}
	}
	if v.Binding, err = bindEntry(v.Def.Kind, u); err != nil {
		return nil, corrupt("udtf_spec", err)
	}
	v.udtf = u
	if err := v.splitColumns(); err != nil {
		return nil, err
	}
	return v, nil
}

// cache keeps a few immutable objects (view and source versions) per job,
// so the work items of a job running in one process read them once. Keys
// include the job id: a table dropped and created again under the same
// name starts its versions over.
type cache struct {
	mu    sync.Mutex
	m     map[string]any
	order []string
}

const cacheSize = 64

func (c *cache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *cache) put(key string, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]any{}
	}
	if _, ok := c.m[key]; !ok {
		c.order = append(c.order, key)
	}
	c.m[key] = v
	for len(c.order) > cacheSize {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}
