package refresh

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/internal/corpus"
	"github.com/mvq-dev/mvq/table"
)

// TestWorkItemRunAgainWritesSameBytes: a work item whose chunk text
// fills several files (sharing FSST tables among them) writes the very
// same bytes when it runs again, whatever ran before it in the worker, as
// a redelivered duplicate must: it may replace a staged file after its
// size was recorded. The view then holds every chunk.
func TestWorkItemRunAgainWritesSameBytes(t *testing.T) {
	b := setup(t, table.Options{})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "body", Type: arrow.BinaryTypes.String},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	const docs = 1200
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
	spec := `{"chunker":"recursive","input_column":"body","output_column":"chunk","chunk_size":512,"chunk_overlap":64}`
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$corpus"`, UDTFSpec: chunkerEntry(spec)})
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
	// Item 0 alone in one worker; then, in another, item 1 first and item
	// 0 again: item 0's bytes may not depend on what ran before it.
	first := expand(b.e, 0)
	if len(first.Fragments) < 2 {
		t.Fatalf("item 0 wrote %d files, want at least 2", len(first.Fragments))
	}
	was := files(first)
	other := NewEngine(b.cat)
	item1 := expand(other, 1)
	again := expand(other, 0)
	now := files(again)
	for path, data := range was {
		if !bytes.Equal(now[path], data) {
			t.Fatalf("%s: %d bytes the first time, %d when item 0 ran again after item 1, or other bytes", path, len(data), len(now[path]))
		}
	}
	if _, err := b.e.Commit(b.ctx, p, []ItemResult{again, item1}); err != nil {
		t.Fatal(err)
	}
	cs, err := chunker.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chunker.New(cs)
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for i := range docs {
		want += len(ch.Chunk(corpus.Doc(i, 2048), nil))
	}
	if got := len(b.rows(t, id)); got != want {
		t.Fatalf("view has %d rows, the chunker makes %d", got, want)
	}
}
