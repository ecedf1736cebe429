package refresh

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/table"
)

var (
	sharedDBOnce sync.Once
	sharedDB     *duck.DB
	sharedDBErr  error
)

func testDB(t testing.TB) *duck.DB {
	t.Helper()
	sharedDBOnce.Do(func() { sharedDB, sharedDBErr = duck.Open(duck.Options{Threads: 2}) })
	if sharedDBErr != nil {
		t.Fatal(sharedDBErr)
	}
	return sharedDB
}

// bundle is what a test works with: a catalog on a fresh warehouse
// (file://, or a bucket prefix in S3 mode: testenv.Warehouse),
// an engine over it and a namespace "docs".
type bundle struct {
	ctx context.Context
	cat *table.Catalog
	e   *Engine
}

func setup(t testing.TB, opts table.Options) *bundle {
	t.Helper()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, testenv.Warehouse(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	opts.Indexes = index.Maintenance()
	cat := table.NewCatalog(wh, testDB(t), opts)
	if err := cat.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	return &bundle{ctx: ctx, cat: cat, e: NewEngine(cat)}
}

var articleSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "title", Type: arrow.BinaryTypes.String},
	{Name: "lang", Type: arrow.BinaryTypes.String},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// article is a source row; a body of "<null>" is NULL.
type article struct {
	id                int64
	title, lang, body string
}

func articles(t testing.TB, rows ...article) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, articleSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.title)
		b.Field(2).(*array.StringBuilder).Append(r.lang)
		if r.body == "<null>" {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(r.body)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(articleSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

var srcID = []string{"docs", "articles"}

// The source starts as two fragments: 0 holds ids 1-4, 1 holds ids 5-6.
var (
	frag0 = []article{
		{1, "Alpha", "en", "aaaabbbbcc"},
		{2, "Beta", "fr", "dddd"},
		{3, "Gamma", "en", ""},
		{4, "Delta", "en", "<null>"},
	}
	frag1 = []article{
		{5, "Eps", "en", "eeeeffff"},
		{6, "Zeta", "en", "g"},
	}
)

func (b *bundle) source(t testing.TB, frags ...[]article) *table.Table {
	t.Helper()
	tb, _, err := b.cat.CreateTable(b.ctx, srcID, articleSchema, articles(t, frags[0]...), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frags[1:] {
		b.insert(t, tb, f...)
	}
	return tb
}

func (b *bundle) insert(t testing.TB, tb *table.Table, rows ...article) {
	t.Helper()
	if _, _, err := tb.Insert(b.ctx, articles(t, rows...), "append"); err != nil {
		t.Fatal(err)
	}
}

const queryView = `SELECT id, lower(title) AS title FROM "docs$articles" WHERE lang = 'en'`

// chunkerEntry returns a udtf_spec for a chunker spec JSON.
func chunkerEntry(spec string) *UDTFEntry {
	sum := sha256.Sum256([]byte(spec))
	return &UDTFEntry{
		Kind:        "chunker",
		UDTF:        base64.StdEncoding.EncodeToString([]byte(spec)),
		UDTFSha:     hex.EncodeToString(sum[:]),
		UDTFName:    "fixed",
		UDTFVersion: "1",
	}
}

const fixed4 = `{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":4,"chunk_overlap":0}`

func (b *bundle) create(t testing.TB, name string, req CreateRequest) []string {
	t.Helper()
	id := []string{"docs", name}
	m, err := b.e.CreateView(b.ctx, id, req)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || m.NumRows() != 0 {
		t.Fatalf("created view at v%d with %d rows", m.Version, m.NumRows())
	}
	return id
}

func (b *bundle) chunkerView(t testing.TB, name string) []string {
	t.Helper()
	return b.create(t, name, CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)})
}

// plan prepares opts and plans a refresh.
func (b *bundle) plan(t testing.TB, id []string, job string, opts Options) *Plan {
	t.Helper()
	if err := b.e.Prepare(b.ctx, id, &opts); err != nil {
		t.Fatal(err)
	}
	p, err := b.e.Plan(b.ctx, id, job, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// expandAll expands every item of p, in order.
func (b *bundle) expandAll(t testing.TB, p *Plan) []ItemResult {
	t.Helper()
	var out []ItemResult
	for i := range p.Items {
		r, err := b.e.Expand(b.ctx, p, i)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// refresh runs a whole refresh the way the orchestrator does.
func (b *bundle) refresh(t testing.TB, id []string, job string, opts Options) (*Plan, Result) {
	t.Helper()
	p := b.plan(t, id, job, opts)
	res, err := b.e.Commit(b.ctx, p, b.expandAll(t, p))
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

// rows renders every row of a table's latest version in table order, as
// "col|col|...": row addresses as fragment:offset, NULL as ∅.
func (b *bundle) rows(t testing.TB, id []string) []string {
	t.Helper()
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := tb.Query(b.ctx, table.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			var parts []string
			for _, c := range r.Columns() {
				parts = append(parts, cell(c, i))
			}
			out = append(out, strings.Join(parts, "|"))
		}
		r.Release()
	}
	return out
}

func cell(c arrow.Array, i int) string {
	if c.IsNull(i) {
		return "∅"
	}
	switch c := c.(type) {
	case *array.Uint64:
		f, o := table.SplitRowAddress(c.Value(i))
		return fmt.Sprintf("%d:%d", f, o)
	case *array.String:
		return c.Value(i)
	default:
		return c.ValueStr(i)
	}
}

func (b *bundle) manifest(t testing.TB, id []string) *table.Manifest {
	t.Helper()
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tb.Load(b.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func eqRows(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func eqResult(t testing.TB, got, want Result) {
	t.Helper()
	if got != want {
		t.Fatalf("result %+v, want %+v", got, want)
	}
}

func TestQueryViewFullRefresh(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})

	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := fieldList(v.Schema); got != "(__source_row_id uint64, id int64, title utf8)" {
		t.Fatalf("schema %s", got)
	}
	if v.Watermark != nil || v.Def.Kind != KindQuery || table.JoinID(v.Def.Source) != "docs$articles" {
		t.Fatalf("view %+v", v)
	}

	p, res := b.refresh(t, id, "j1", Options{})
	if p.Mode != ModeFull || len(p.Items) != 1 || p.Items[0].Rows != 6 {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 2, RowsAdded: 5})
	eqRows(t, "view", b.rows(t, id), []string{
		"0:0|1|alpha", "0:2|3|gamma", "0:3|4|delta", "1:0|5|eps", "1:1|6|zeta",
	})
	m := b.manifest(t, id)
	if m.Metadata[metaJobID] != "j1" || m.Properties[propView] == nil || m.Properties[propWatermark] == nil {
		t.Fatalf("manifest metadata %v, properties %v", m.Metadata, m.Properties)
	}
	v, err = b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if wm := v.Watermark; wm.SourceVersion != 2 || !slices.Equal(wm.Fragments, IDSet{0, 1}) || wm.OutputLimit != nil || len(wm.Lineage) != 1 {
		t.Fatalf("watermark %+v", wm)
	}
}

func TestQueryViewStarAndBareName(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0)
	id := b.create(t, "star", CreateRequest{Kind: "query", SourceQuery: "select * from docs$articles a where a.id % 2 = 0;"})
	b.refresh(t, id, "j1", Options{})
	eqRows(t, "view", b.rows(t, id), []string{"0:1|2|Beta|fr|dddd", "0:3|4|Delta|en|∅"})
}

func TestChunkerView(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := fieldList(v.Schema); got != "(__source_row_id uint64, __chunk_index int32, id int64, chunk utf8)" {
		t.Fatalf("schema %s", got)
	}
	want := []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd",
		"1:0|0|5|eeee", "1:0|1|5|ffff", "1:1|0|6|g",
	}
	for _, workers := range []int{1, 3, 64} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			vid := b.chunkerView(t, fmt.Sprintf("chunks%d", workers))
			_, res := b.refresh(t, vid, "j1", Options{IntraApplierConcurrency: workers})
			eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 2, RowsAdded: 7})
			eqRows(t, "view", b.rows(t, vid), want)
		})
	}
}

func TestChunkerKeepInputAndFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	spec := `{"chunker":"fixed","input_column":"body","output_column":"text","chunk_size":6,"chunk_overlap":2,"keep_input":true}`
	id := b.create(t, "keep", CreateRequest{Kind: "chunker", SourceQuery: `SELECT upper(body) AS body, title FROM "docs$articles" WHERE id <> 2`, UDTFSpec: chunkerEntry(spec)})
	b.refresh(t, id, "j1", Options{})
	eqRows(t, "view", b.rows(t, id), []string{
		"0:0|0|AAAABBBBCC|Alpha|AAAABB", "0:0|1|AAAABBBBCC|Alpha|BBBBCC",
		"1:0|0|EEEEFFFF|Eps|EEEEFF", "1:0|1|EEEEFFFF|Eps|FFFF",
		"1:1|0|G|Zeta|G",
	})
}

func TestIncrementalAppend(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{RowGroupRows: 2})
	b.e.wholeFileBytes = 0 // ranged reads, seeking across row groups
	src := b.source(t, frag0)
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{})

	b.insert(t, src, frag1...)
	b.insert(t, src, article{7, "Eta", "en", "hhhhi"}, article{8, "Theta", "de", "jj"}, article{9, "Iota", "en", "kkkkllll"})
	p := b.plan(t, id, "j2", Options{SourceTaskSize: 2})
	if p.Mode != ModeIncremental || p.SourceVersion != 3 || p.BaseViewVersion != 2 {
		t.Fatalf("plan %+v", p)
	}
	// Only fragments 1 and 2 are expanded, in items of 2 rows.
	var got []string
	for _, it := range p.Items {
		got = append(got, fmt.Sprintf("%d:%v rows=%d before=%d", it.Index, it.Ranges, it.Rows, it.ExistingRowsBefore))
	}
	eqRows(t, "items", got, []string{
		"0:[{1 0 2}] rows=2 before=4",
		"1:[{2 0 2}] rows=2 before=4",
		"2:[{2 2 3}] rows=1 before=4",
	})
	results := b.expandAll(t, p)
	for i, r := range results {
		if r.RowsRead != p.Items[i].Rows || len(r.Fragments) != 1 || len(r.Spans) != 1 {
			t.Fatalf("item %d result %+v", i, r)
		}
	}
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 3, ViewVersion: 3, RowsAdded: 8})
	eqRows(t, "view", b.rows(t, id), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd",
		"1:0|0|5|eeee", "1:0|1|5|ffff", "1:1|0|6|g",
		"2:0|0|7|hhhh", "2:0|1|7|i", "2:1|0|8|jj", "2:2|0|9|kkkk", "2:2|1|9|llll",
	})
	// The first refresh's fragment is kept as it was.
	m := b.manifest(t, id)
	if len(m.Fragments) != 4 || m.Fragments[0].ID != 0 || m.NumRows() != 12 {
		t.Fatalf("fragments %+v", m.Fragments)
	}
}

func TestSourceDeleteAndUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0, frag1)
	q := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})
	c := b.chunkerView(t, "chunks")
	b.refresh(t, q, "q1", Options{})
	b.refresh(t, c, "c1", Options{})

	// Deleting id 5 gives source fragment 1 a deletion file: the view
	// loses the rows of id 5 and reads no source row.
	if _, n, err := src.Delete(b.ctx, "id = 5"); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	p, res := b.refresh(t, q, "q2", Options{})
	if p.Mode != ModeIncremental || len(p.RemovedSourceFragments) != 0 || fmt.Sprint(p.RemovedSourceRows) != "[{1 [0 1]}]" || len(p.Items) != 0 {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 3, ViewVersion: 3, RowsRemoved: 1})
	eqRows(t, "query view after delete", b.rows(t, q), []string{"0:0|1|alpha", "0:2|3|gamma", "0:3|4|delta", "1:1|6|zeta"})
	_, res = b.refresh(t, c, "c2", Options{})
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 3, ViewVersion: 3, RowsRemoved: 2})
	eqRows(t, "chunker view after delete", b.rows(t, c), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd", "1:1|0|6|g",
	})

	// Updating id 1 deletes it from fragment 0 and appends it as
	// fragment 2: only that row is removed and expanded again.
	if _, n, err := src.Update(b.ctx, "id = 1", [][2]string{{"body", "'xyz'"}, {"title", "'ALEPH'"}}); err != nil || n != 1 {
		t.Fatalf("update: %d, %v", n, err)
	}
	p, res = b.refresh(t, q, "q3", Options{})
	if len(p.Items) != 1 || p.Items[0].Rows != 1 || fmt.Sprint(p.Items[0].Ranges) != "[{2 0 1}]" {
		t.Fatalf("plan after update %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 4, ViewVersion: 4, RowsAdded: 1, RowsRemoved: 1})
	eqRows(t, "query view after update", b.rows(t, q), []string{"0:2|3|gamma", "0:3|4|delta", "1:1|6|zeta", "2:0|1|aleph"})
	_, res = b.refresh(t, c, "c3", Options{})
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 4, ViewVersion: 4, RowsAdded: 1, RowsRemoved: 3})
	eqRows(t, "chunker view after update", b.rows(t, c), []string{"0:1|0|2|dddd", "1:1|0|6|g", "2:0|0|1|xyz"})
}

func TestRemovalRewritesMixedFragments(t *testing.T) {
	t.Parallel()
	// One view fragment holds rows of source fragments 0 and 1; deleting
	// from fragment 1 rewrites it keeping fragment 0's rows.
	b := setup(t, table.Options{})
	src := b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{})
	if m := b.manifest(t, id); len(m.Fragments) != 1 {
		t.Fatalf("want one view fragment, got %+v", m.Fragments)
	}
	if _, _, err := src.Delete(b.ctx, "id = 6"); err != nil {
		t.Fatal(err)
	}
	_, res := b.refresh(t, id, "j2", Options{})
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 3, ViewVersion: 3, RowsRemoved: 1})
	eqRows(t, "view", b.rows(t, id), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd",
		"1:0|0|5|eeee", "1:0|1|5|ffff",
	})
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var lin []string
	for _, l := range v.Watermark.Lineage {
		lin = append(lin, fmt.Sprintf("%d:%d-%d", l.Fragment, l.Lo, l.Hi))
	}
	eqRows(t, "lineage", lin, []string{"1:0-1"})
}

func TestNoOp(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{})
	p := b.plan(t, id, "j2", Options{})
	if p.Mode != ModeNoOp || len(p.Items) != 0 {
		t.Fatalf("plan %+v", p)
	}
	res, err := b.e.Commit(b.ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, res, Result{Mode: ModeNoOp, SourceVersion: 2, ViewVersion: 2})
	if m := b.manifest(t, id); m.Version != 2 {
		t.Fatalf("no_op committed v%d", m.Version)
	}
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	limit := func(n int64) *int64 { return &n }

	// Five rows: the cut falls inside source row 1:0 (after its first chunk).
	p, res := b.refresh(t, id, "j1", Options{OutputLimit: limit(5), MaxRowsPerFragment: 3})
	if p.Mode != ModeFull {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 2, RowsAdded: 5})
	eqRows(t, "view", b.rows(t, id), []string{"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd", "1:0|0|5|eeee"})
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if wm := v.Watermark; *wm.OutputLimit != 5 || wm.LimitCut == nil || *wm.LimitCut != 1 {
		t.Fatalf("watermark %+v", wm)
	}
	// The limit is applied where the rows are written: the files that were
	// cut away are gone.
	for _, f := range v.Manifest.Fragments {
		if f.Rows > 3 {
			t.Fatalf("fragment %+v over max_rows_per_fragment", f)
		}
	}

	// Same limit, new rows: every item already has 5 rows before it, so it
	// is skipped without reading; the view does not change.
	b.insert(t, src, article{7, "Eta", "en", "hhhh"})
	p = b.plan(t, id, "j2", Options{OutputLimit: limit(5)})
	if p.Mode != ModeIncremental || len(p.Items) != 1 || p.Items[0].ExistingRowsBefore != 5 || !p.Skippable(0, 0) {
		t.Fatalf("plan %+v", p)
	}
	results := b.expandAll(t, p)
	if !results[0].Skipped || len(results[0].Fragments) != 0 {
		t.Fatalf("result %+v", results[0])
	}
	res, err = b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 3, ViewVersion: 3})
	eqRows(t, "view after skip", b.rows(t, id), []string{"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd", "1:0|0|5|eeee"})

	// A different limit recomputes from scratch, so rows cut before come back.
	p, res = b.refresh(t, id, "j3", Options{OutputLimit: limit(9)})
	if p.Mode != ModeFull {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 3, ViewVersion: 4, RowsAdded: 8, RowsRemoved: 5})
	eqRows(t, "view with limit 9", b.rows(t, id), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd",
		"1:0|0|5|eeee", "1:0|1|5|ffff", "1:1|0|6|g", "2:0|0|7|hhhh",
	})
	// The limit was not reached: nothing was cut.
	v, _ = b.e.View(b.ctx, id)
	if v.Watermark.LimitCut != nil {
		t.Fatalf("watermark %+v", v.Watermark)
	}

	// Removing rows below the cut of a trimmed view is a full refresh:
	// rows cut before move up into the limit.
	b.refresh(t, id, "j4", Options{OutputLimit: limit(3)})
	if _, _, err := src.Delete(b.ctx, "id = 1"); err != nil {
		t.Fatal(err)
	}
	p, res = b.refresh(t, id, "j5", Options{OutputLimit: limit(3)})
	if p.Mode != ModeFull {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 4, ViewVersion: 6, RowsAdded: 3, RowsRemoved: 3})
	eqRows(t, "view after delete", b.rows(t, id), []string{"0:1|0|2|dddd", "1:0|0|5|eeee", "1:0|1|5|ffff"})

	// No limit after a limited refresh: full again.
	p, res = b.refresh(t, id, "j6", Options{})
	if p.Mode != ModeFull {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 4, ViewVersion: 7, RowsAdded: 5, RowsRemoved: 3})

	// Zero rows is a valid limit.
	_, res = b.refresh(t, id, "j7", Options{OutputLimit: limit(0)})
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 4, ViewVersion: 8, RowsRemoved: 5})
	eqRows(t, "view with limit 0", b.rows(t, id), []string{})
}

func TestOutputLimitWithinItems(t *testing.T) {
	t.Parallel()
	// Items that end past the limit write only what can be kept and say
	// where they stopped; Commit cuts across items.
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	n := int64(2)
	p := b.plan(t, id, "j1", Options{OutputLimit: &n, SourceTaskSize: 1})
	results := b.expandAll(t, p)
	if r := results[0]; r.RowsWritten != 2 || r.LimitCut == nil || *r.LimitCut != 0 {
		t.Fatalf("item 0 %+v", r)
	}
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 2, RowsAdded: 2})
	eqRows(t, "view", b.rows(t, id), []string{"0:0|0|1|aaaa", "0:0|1|1|bbbb"})
	// Staged files past the limit were removed.
	if ents, _ := b.cat.Warehouse().List(b.ctx, "docs/chunks.lance/data/"); len(ents) != 1 {
		t.Fatalf("data files %+v", ents)
	}
}

func TestMaxRowsPerFragment(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{MaxRowsPerFragment: 2})
	check := func() {
		t.Helper()
		m := b.manifest(t, id)
		for _, f := range m.Fragments {
			if f.Rows > 2 || f.Rows == 0 {
				t.Fatalf("fragment %+v", f)
			}
		}
	}
	check()
	if n := len(b.manifest(t, id).Fragments); n != 4 {
		t.Fatalf("%d fragments", n)
	}
	// A removal rewrite respects the cap too.
	if _, _, err := src.Delete(b.ctx, "id = 6"); err != nil {
		t.Fatal(err)
	}
	b.refresh(t, id, "j2", Options{MaxRowsPerFragment: 2})
	check()
	eqRows(t, "view", b.rows(t, id), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd",
		"1:0|0|5|eeee", "1:0|1|5|ffff",
	})
}

func TestIdempotentExpandAndCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	p := b.plan(t, id, "job-1", Options{SourceTaskSize: 4, MaxRowsPerFragment: 2})
	first := b.expandAll(t, p)
	files := func() []string {
		ents, err := b.cat.Warehouse().List(b.ctx, "docs/chunks.lance/data/")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name)
		}
		return out
	}
	before := files()
	ext := b.cat.DataExt()
	// Each run of an item names its files with its own token.
	staged := regexp.MustCompile(`^_staging-job-1-([01])-([01])-r[0-9a-f]{8}` + regexp.QuoteMeta(ext) + `$`)
	if len(before) != 4 {
		t.Fatalf("staged files %v, want 2 per item", before)
	}
	for _, name := range before {
		if !staged.MatchString(name) {
			t.Fatalf("staged file %q is not _staging-job-1-{item}-{k}-{run}%s", name, ext)
		}
	}
	// A retried expand writes the same rows into files of its own: it
	// never replaces a file the first run wrote (and recorded).
	second := b.expandAll(t, p)
	shape := func(rs []ItemResult) string {
		var out []string
		for _, r := range rs {
			for _, f := range r.Fragments {
				out = append(out, fmt.Sprintf("%d:%d", r.Index, f.Rows))
			}
			out = append(out, fmt.Sprint(r.RowsRead, r.RowsWritten, r.Spans))
		}
		return strings.Join(out, " ")
	}
	if shape(first) != shape(second) {
		t.Fatalf("retried expand differs:\n%+v\n%+v", first, second)
	}
	after := files()
	if len(after) != 8 {
		t.Fatalf("files after retry %v, want the first run's 4 and the retry's 4", after)
	}
	for _, r := range second {
		for _, f := range r.Fragments {
			if slices.Contains(before, strings.TrimPrefix(f.Path, "data/")) {
				t.Fatalf("the retry wrote %s, a file of the first run", f.Path)
			}
		}
	}
	before = after

	res, err := b.e.Commit(b.ctx, p, second)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.e.Commit(b.ctx, p, second)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, again, res)
	if m := b.manifest(t, id); m.Version != 2 {
		t.Fatalf("second commit made v%d", m.Version)
	}
	// Discard after a commit keeps the committed files.
	if err := b.e.Discard(b.ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	eqRows(t, "files after discard", files(), before)
	eqRows(t, "view", b.rows(t, id), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd",
		"1:0|0|5|eeee", "1:0|1|5|ffff", "1:1|0|6|g",
	})
}

func TestCommitConflictAndDiscard(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	p1 := b.plan(t, id, "a", Options{})
	p2 := b.plan(t, id, "a-1", Options{})
	r1 := b.expandAll(t, p1)
	r2 := b.expandAll(t, p2)
	if _, err := b.e.Commit(b.ctx, p2, r2); err != nil {
		t.Fatal(err)
	}
	if _, err := b.e.Commit(b.ctx, p1, r1); errs.CodeOf(err) != errs.CodeConcurrentModification {
		t.Fatalf("stale commit: %v", err)
	}
	// Discarding job "a" leaves job "a-1"'s files alone.
	if err := b.e.Discard(b.ctx, p1, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.e.Discard(b.ctx, p1, nil); err != nil {
		t.Fatal(err)
	}
	ents, err := b.cat.Warehouse().List(b.ctx, "docs/chunks.lance/data/")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name, "_staging-a-1-0-0-") || !strings.HasSuffix(ents[0].Name, b.cat.DataExt()) {
		t.Fatalf("files %+v", ents)
	}
	eqRows(t, "view", b.rows(t, id)[:1], []string{"0:0|0|1|aaaa"})
}

func TestUDTFView(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0, frag1)
	id := b.create(t, "bylang", CreateRequest{Kind: "udtf", SourceQuery: `SELECT lang, count(*)::INT AS n FROM "docs$articles" GROUP BY lang ORDER BY lang`})
	p, res := b.refresh(t, id, "j1", Options{})
	if p.Mode != ModeFull || len(p.Items) != 1 {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 2, RowsAdded: 2})
	eqRows(t, "view", b.rows(t, id), []string{"en|5", "fr|1"})

	if p := b.plan(t, id, "j2", Options{}); p.Mode != ModeNoOp {
		t.Fatalf("plan %+v", p)
	}
	b.insert(t, src, article{7, "Eta", "de", "x"})
	_, res = b.refresh(t, id, "j3", Options{})
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 3, ViewVersion: 3, RowsAdded: 3, RowsRemoved: 2})
	eqRows(t, "view", b.rows(t, id), []string{"de|1", "en|5", "fr|1"})
}

func TestExpandHonoursCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	p := b.plan(t, id, "j1", Options{})
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	if _, err := b.e.Expand(ctx, p, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("expand with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestNoArrowMemoryLeaks(t *testing.T) {
	t.Parallel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	b := setup(t, table.Options{Mem: mem, RowGroupRows: 2})
	b.e.wholeFileBytes = 0
	src := b.source(t, frag0, frag1)
	c := b.chunkerView(t, "chunks")
	q := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})
	u := b.create(t, "bylang", CreateRequest{Kind: "udtf", SourceQuery: `SELECT lang, count(*) AS n FROM "docs$articles" GROUP BY lang`})
	limit := int64(4)
	for i, step := range []func(){
		func() {},
		func() { b.insert(t, src, article{7, "Eta", "en", "hhhhiiii"}) },
		func() {
			if _, _, err := src.Delete(b.ctx, "id = 5"); err != nil {
				t.Fatal(err)
			}
		},
	} {
		step()
		b.refresh(t, c, fmt.Sprintf("c%d", i), Options{IntraApplierConcurrency: 2, MaxRowsPerFragment: 3})
		b.refresh(t, c, fmt.Sprintf("l%d", i), Options{OutputLimit: &limit})
		b.refresh(t, q, fmt.Sprintf("q%d", i), Options{SourceTaskSize: 2})
		b.refresh(t, u, fmt.Sprintf("u%d", i), Options{})
	}
	mem.AssertSize(t, 0)
}

func TestEmptySourceAndFilteredItems(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, []article{})
	id := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})
	p, res := b.refresh(t, id, "j1", Options{})
	if p.Mode != ModeFull || len(p.Items) != 0 {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 1, ViewVersion: 2})
	eqRows(t, "view", b.rows(t, id), []string{})
	if p := b.plan(t, id, "j2", Options{}); p.Mode != ModeNoOp {
		t.Fatalf("plan %+v", p)
	}
	// An item whose rows are all filtered out stages nothing.
	b.insert(t, src, article{1, "Un", "fr", "x"}, article{2, "Deux", "fr", "y"})
	b.insert(t, src, article{3, "Three", "en", "z"})
	p = b.plan(t, id, "j3", Options{SourceTaskSize: 2})
	results := b.expandAll(t, p)
	if len(results) != 2 || len(results[0].Fragments) != 0 || results[0].RowsRead != 2 || results[1].RowsWritten != 1 {
		t.Fatalf("results %+v", results)
	}
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 3, ViewVersion: 3, RowsAdded: 1})
	eqRows(t, "view", b.rows(t, id), []string{"1:0|3|three"})
}

func TestRestoreAndRecreatedSourceAreFull(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0, frag1)
	id := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})
	b.refresh(t, id, "j1", Options{})
	if _, _, err := src.Delete(b.ctx, "id = 1"); err != nil {
		t.Fatal(err)
	}
	b.refresh(t, id, "j2", Options{})
	eqRows(t, "view after delete", b.rows(t, id), []string{"0:2|3|gamma", "0:3|4|delta", "1:0|5|eps", "1:1|6|zeta"})

	// Restoring version 2 brings back the row fragment 0's deletion file
	// hid: the view is rebuilt so it stays in row address order.
	if _, err := src.Restore(b.ctx, 2); err != nil {
		t.Fatal(err)
	}
	p, res := b.refresh(t, id, "j3", Options{})
	if p.Mode != ModeFull || p.Reason != "rows deleted from the source came back (a restore)" {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 4, ViewVersion: 4, RowsAdded: 5, RowsRemoved: 4})
	eqRows(t, "view after restore", b.rows(t, id), []string{"0:0|1|alpha", "0:2|3|gamma", "0:3|4|delta", "1:0|5|eps", "1:1|6|zeta"})

	// A source dropped and created again restarts its fragment ids.
	if err := b.cat.DropTable(b.ctx, srcID); err != nil {
		t.Fatal(err)
	}
	b.source(t, []article{{9, "Nine", "en", "n"}}, []article{{10, "Ten", "en", "t"}})
	p, res = b.refresh(t, id, "j4", Options{})
	if p.Mode != ModeFull || p.Reason != "the source table was created again" {
		t.Fatalf("plan %+v", p)
	}
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 5, RowsAdded: 2, RowsRemoved: 5})
	eqRows(t, "view after re-creation", b.rows(t, id), []string{"0:0|9|nine", "1:0|10|ten"})
}

// TestSourceRecreatedDuringRefresh: a source dropped and created again
// between plan and commit makes the commit fail instead of recording the
// new source's fragments under the old one's lineage.
func TestSourceRecreatedDuringRefresh(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	p := b.plan(t, id, "job-recreate", Options{})
	results := b.expandAll(t, p)
	if err := b.cat.DropTable(b.ctx, srcID); err != nil {
		t.Fatal(err)
	}
	b.source(t, frag0, frag1)
	_, err := b.e.Commit(b.ctx, p, results)
	if errs.CodeOf(err) != errs.CodeTableNotFound || !strings.Contains(err.Error(), "dropped and created again") {
		t.Fatalf("commit after the source was recreated: %v", err)
	}
	if m := b.manifest(t, id); m.Version != 1 {
		t.Fatalf("view moved to v%d", m.Version)
	}
}
