package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// These tests run jobs through the real refresh engine over a file://
// warehouse in t.TempDir(): a chunker view ("docs$chunks") cuts the body
// of each source row ("docs$articles") into chunks of 4 characters.

var (
	duckOnce sync.Once
	duckDB   *duck.DB
	duckErr  error
)

func testDuck(t testing.TB) *duck.DB {
	t.Helper()
	duckOnce.Do(func() { duckDB, duckErr = duck.Open(duck.Options{Threads: 1}) })
	if duckErr != nil {
		t.Fatal(duckErr)
	}
	return duckDB
}

// warehouse is a real catalog with the source table and the chunker view.
type warehouse struct {
	cat  *table.Catalog
	eng  *refresh.Engine
	src  *table.Table
	view []string
	next int64 // next source row id
}

var (
	srcID         = []string{"docs", "articles"}
	articleSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String},
	}, nil)
)

// body of source row id: 10 characters, so 3 chunks ("0007", "xxxx", "yy").
func body(id int64) string { return fmt.Sprintf("%04dxxxxyy", id) }

func newWarehouse(t testing.TB, rows int) *warehouse {
	t.Helper()
	ctx := context.Background()
	wh, err := table.OpenWarehouse(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	w := &warehouse{cat: table.NewCatalog(wh, testDuck(t), table.Options{Indexes: index.Maintenance()}), view: []string{"docs", "chunks"}}
	w.eng = refresh.NewEngine(w.cat)
	if err := w.cat.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		t.Fatal(err)
	}
	w.src, _, err = w.cat.CreateTable(ctx, srcID, articleSchema, w.batch(t, rows), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := `{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":4,"chunk_overlap":0}`
	sum := sha256.Sum256([]byte(spec))
	_, err = w.eng.CreateView(ctx, w.view, refresh.CreateRequest{
		Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`,
		UDTFSpec: &refresh.UDTFEntry{Kind: "chunker", UDTF: base64.StdEncoding.EncodeToString([]byte(spec)),
			UDTFSha: hex.EncodeToString(sum[:]), UDTFName: "fixed", UDTFVersion: "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// batch makes the next n source rows.
func (w *warehouse) batch(t testing.TB, n int) array.RecordReader {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, articleSchema)
	defer b.Release()
	for range n {
		w.next++
		b.Field(0).(*array.Int64Builder).Append(w.next)
		b.Field(1).(*array.StringBuilder).Append(body(w.next))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(articleSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// insert appends n source rows as a new source fragment.
func (w *warehouse) insert(t testing.TB, n int) {
	t.Helper()
	if _, _, err := w.src.Insert(context.Background(), w.batch(t, n), "append"); err != nil {
		t.Fatal(err)
	}
}

// want is the view's exact content after refreshing source rows 1..upTo,
// inserted as fragments of the given sizes: "frag:offset|chunk#|id|chunk".
func want(fragSizes ...int) []string {
	var out []string
	id := int64(0)
	for f, n := range fragSizes {
		for o := range n {
			id++
			b := body(id)
			for k, c := range []string{b[:4], b[4:8], b[8:]} {
				out = append(out, fmt.Sprintf("%d:%d|%d|%d|%s", f, o, k, id, c))
			}
		}
	}
	return out
}

// rows renders the view's latest version in table order.
func (w *warehouse) rows(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	tb, err := w.cat.OpenTable(ctx, w.view)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := tb.Query(ctx, table.QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			var parts []string
			for _, c := range r.Columns() {
				switch c := c.(type) {
				case *array.Uint64:
					f, o := table.SplitRowAddress(c.Value(i))
					parts = append(parts, fmt.Sprintf("%d:%d", f, o))
				case *array.String:
					parts = append(parts, c.Value(i))
				default:
					parts = append(parts, c.ValueStr(i))
				}
			}
			out = append(out, strings.Join(parts, "|"))
		}
		r.Release()
	}
	return out
}

func (w *warehouse) version(t *testing.T) uint64 {
	t.Helper()
	tb, err := w.cat.OpenTable(context.Background(), w.view)
	if err != nil {
		t.Fatal(err)
	}
	vf, err := tb.LatestVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vf.Version
}

// staged counts a job's staged files in the view folder.
func (w *warehouse) staged(t *testing.T, jobID string) int {
	t.Helper()
	tb, err := w.cat.OpenTable(context.Background(), w.view)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := w.cat.Warehouse().List(context.Background(), tb.Key("data/_staging-"+jobID+"-"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func eqRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %d rows %q\n want %d rows %q", what, len(got), got, len(want), want)
	}
}

func TestRefreshOutputLimitSkipsLaterItems(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 10)
	b := setup(t, w.eng)
	b.startServer(t)
	limit := int64(7) // 3 chunks a row: rows 1-3 give 9 chunks
	j, err := b.client.Submit(context.Background(), w.view, refresh.Options{SourceTaskSize: 2, Concurrency: 1, OutputLimit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateDone)
	if j.Result.RowsAdded != 7 || j.Progress.WorkItemsDone != 5 {
		t.Fatalf("job %+v result %+v", j.Progress, j.Result)
	}
	// With one item at a time, items 0 and 1 (rows 1-4) reach the limit;
	// items 2-4 are skipped without expanding.
	for i, wantCalls := range []int{1, 1, 0, 0, 0} {
		if n := b.eng.calls(j.ID, i); n != wantCalls {
			t.Fatalf("item %d expanded %d times, want %d", i, n, wantCalls)
		}
	}
	eqRows(t, "view", w.rows(t), want(10)[:7])
}
