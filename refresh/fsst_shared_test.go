package refresh

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/internal/corpus"
	"github.com/mvq-dev/mvq/table"
)

// TestWorkItemsShareFSSTTables: the work items of a chunker refresh write
// their chunk text with one trained FSST table (the first item's) instead
// of training one per file, and the view holds every chunk.
func TestWorkItemsShareFSSTTables(t *testing.T) {
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
	p, res := b.refresh(t, id, "j1", Options{SourceTaskSize: 300})
	if len(p.Items) != 4 {
		t.Fatalf("%d work items, want 4", len(p.Items))
	}
	v, err := b.e.View(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.e.fsstTables(v).Reused(); n < 3 {
		t.Fatalf("%d chunk pages reused the first item's FSST table, want at least 3 (items 2-4)", n)
	}
	var want int64
	cs, err := chunker.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chunker.New(cs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range docs {
		want += int64(len(ch.Chunk(corpus.Doc(i, 2048), nil)))
	}
	if got := int64(len(b.rows(t, id))); res.RowsAdded != want || got != want {
		t.Fatalf("view has %d rows (the refresh added %d), the chunker makes %d", got, res.RowsAdded, want)
	}
}
