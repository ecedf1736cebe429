package refresh

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/internal/corpus"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	lancefile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table"
)

// corpusTable creates docs$corpus: docs documents of about 2 KB (id,
// body).
func corpusTable(t *testing.T, b *bundle, docs int) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := range docs {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.StringBuilder).Append(corpus.Doc(i, 2048))
	}
	rec := rb.NewRecordBatch()
	rb.Release()
	rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	rec.Release()
	if _, _, err := b.cat.CreateTable(b.ctx, []string{"docs", "corpus"}, schema, rdr, "", nil); err != nil {
		t.Fatal(err)
	}
}

// corpusChunks is what the chunker of spec makes of each document of
// corpusTable.
func corpusChunks(t *testing.T, spec string, docs int) [][]string {
	t.Helper()
	cs, err := chunker.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chunker.New(cs)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, docs)
	for i := range docs {
		out[i] = ch.Chunk(corpus.Doc(i, 2048), nil)
	}
	return out
}

// TestWorkItemRunAgainNeverReplacesFiles: the work items of a worker
// share the view's FSST tables (item 1 trains no table item 0 trained),
// so an item's bytes depend on what ran before it; a run again of an item
// (a redelivered duplicate) therefore writes files of its own names and
// never replaces the files of the first run, whose recorded sizes and
// bytes stay as they were, whichever result the commit takes. The view
// then holds every chunk.
func TestWorkItemRunAgainNeverReplacesFiles(t *testing.T) {
	b := setup(t, table.Options{})
	const docs = 1200
	corpusTable(t, b, docs)
	spec := `{"chunker":"recursive","input_column":"body","output_column":"chunk","chunk_size":512,"chunk_overlap":64}`
	// body || '': DuckDB computes the column, so the chunks come without
	// the source's FSST codes (which they would be written with, whatever
	// ran before) and the items compress them with the shared tables.
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body || '' AS body FROM "docs$corpus"`, UDTFSpec: chunkerEntry(spec)})
	p := b.plan(t, id, "j1", Options{SourceTaskSize: docs / 2, MaxRowsPerFragment: 1500})
	if len(p.Items) != 2 {
		t.Fatalf("%d work items, want 2", len(p.Items))
	}
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wh := b.cat.Warehouse()
	files := func(r ItemResult) map[string][]byte {
		out := map[string][]byte{}
		for _, f := range r.Fragments {
			data, err := wh.Read(b.ctx, v.Table.Key(f.Path))
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) != f.Bytes {
				t.Fatalf("%s has %d bytes, its result says %d", f.Path, len(data), f.Bytes)
			}
			out[f.Path] = data
		}
		return out
	}
	expand := func(e *Engine, item int) ItemResult {
		r, err := e.Expand(b.ctx, p, item)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Item 0 in one worker; then, in another, item 1 first and item 0
	// again.
	first := expand(b.e, 0)
	if len(first.Fragments) < 2 {
		t.Fatalf("item 0 wrote %d files, want at least 2", len(first.Fragments))
	}
	was := files(first)
	other := NewEngine(b.cat)
	item1 := expand(other, 1)
	ov, err := other.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	shared := other.fsstTables(ov)
	reusedBefore := shared.Reused()
	again := expand(other, 0)
	if shared.Reused() == reusedBefore {
		t.Fatal("item 0 run after item 1 in one worker reused none of the view's FSST tables")
	}
	now := files(again)
	for path, data := range was {
		if _, clash := now[path]; clash {
			t.Fatalf("the run again wrote %s, a file of the first run", path)
		}
		got, err := wh.Read(b.ctx, v.Table.Key(path))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s changed after item 0 ran again (%v)", path, err)
		}
	}
	if _, err := b.e.Commit(b.ctx, p, []ItemResult{again, item1}); err != nil {
		t.Fatal(err)
	}
	var want int
	for _, cs := range corpusChunks(t, spec, docs) {
		want += len(cs)
	}
	if got := len(b.rows(t, id)); got != want {
		t.Fatalf("view has %d rows, the chunker makes %d", got, want)
	}
}

// TestChunkerViewWrittenFromSourceCodes: a chunker view over a Lance
// source is written with the chunks' FSST codes cut from the documents'
// (the writer compresses nothing again), and LanceDB reads every chunk of
// every document back exactly.
func TestChunkerViewWrittenFromSourceCodes(t *testing.T) {
	o := oracle.Need(t)
	b := setup(t, table.Options{})
	const docs = 900
	corpusTable(t, b, docs)
	spec := `{"chunker":"recursive","input_column":"body","output_column":"chunk","chunk_size":512,"chunk_overlap":64}`
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$corpus"`, UDTFSpec: chunkerEntry(spec)})
	before := lancefile.PrecodedPages()
	b.refresh(t, id, "j1", Options{SourceTaskSize: 300})
	if lancefile.PrecodedPages() == before {
		t.Fatal("the view's chunks were compressed again instead of written with codes cut from the source's")
	}
	var want []string
	for i, cs := range corpusChunks(t, spec, docs) {
		for k, c := range cs {
			want = append(want, fmt.Sprintf("%d|%d|%s", i, k, c))
		}
	}
	view, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tbl := o.Read(t, localDir(t, view), oracle.ReadOpts{Columns: []string{"id", ChunkIndexColumn, "chunk"}})
	defer tbl.Release()
	var got []string
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	for tr.Next() {
		r := tr.RecordBatch()
		for i := 0; i < int(r.NumRows()); i++ {
			got = append(got, fmt.Sprintf("%s|%s|%s", r.Column(0).ValueStr(i), r.Column(1).ValueStr(i), r.Column(2).(*array.String).Value(i)))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(got) != len(want) {
		t.Fatalf("LanceDB reads %d chunks, the chunker makes %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("LanceDB reads chunk %q, the chunker makes %q", got[i], want[i])
		}
	}
}
