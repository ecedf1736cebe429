package file

import (
	"bytes"
	"context"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// codesDocs writes n documents of 0.5 to 3 KB (words, some of them
// multi-byte; one null and one empty) as a Lance 2.1 file and opens it
// with KeepFSST.
func codesDocs(t *testing.T, n int) (*Reader, []byte) {
	return codesDocsWith(t, n, WriterOptions{})
}

func codesDocsWith(t *testing.T, n int, opts WriterOptions) (*Reader, []byte) {
	t.Helper()
	rng := rand.New(rand.NewSource(3))
	words := strings.Fields("the lance format stores columns in pages of values compressed with fsst symbol tables a refresh chunks documents into overlapping windows für grüße")
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := 0; i < n; i++ {
		switch i {
		case 5:
			b.AppendNull()
			continue
		case 6:
			b.Append("")
			continue
		}
		var sb strings.Builder
		for sb.Len() < 500+rng.Intn(2500) {
			sb.WriteString(words[rng.Intn(len(words))])
			sb.WriteByte(" .\n"[rng.Intn(3)])
		}
		b.Append(sb.String())
	}
	col := b.NewArray()
	defer col.Release()
	s := arrow.NewSchema([]arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rec := array.NewRecordBatch(s, []arrow.Array{col}, int64(n))
	defer rec.Release()
	file := writeTestDataset(t, t.TempDir(), "docs", []arrow.RecordBatch{rec}, opts)
	r, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	r.KeepFSST()
	return r, file
}

// windows cuts s into windows of about size bytes overlapping by about
// overlap, at rune starts: substrings of s, as a chunker's are.
func windows(s string, size, overlap int) []string {
	var out []string
	for a := 0; a < len(s); {
		b := min(a+size, len(s))
		for b < len(s) && !utf8.RuneStart(s[b]) {
			b++
		}
		out = append(out, s[a:b])
		if b == len(s) {
			break
		}
		a = max(b-overlap, a+1)
		for a < len(s) && !utf8.RuneStart(s[a]) {
			a++
		}
	}
	return out
}

// TestCodeCutterChunksReadByLanceDB: chunks of documents read with
// KeepFSST get their codes cut from the documents', the writer writes
// those codes (no compression of its own), and LanceDB reads exactly the
// chunks back.
func TestCodeCutterChunksReadByLanceDB(t *testing.T) {
	t.Run("one page", func(t *testing.T) { testCodeCutterChunks(t, WriterOptions{}) })
	// Pages of 64 KiB with one shared table: the rows read span pages,
	// whose codes are joined.
	t.Run("pages sharing a table", func(t *testing.T) {
		testCodeCutterChunks(t, WriterOptions{PageSize: 64 << 10, FSST: NewFSSTTables()})
	})
}

func testCodeCutterChunks(t *testing.T, opts WriterOptions) {
	r, _ := codesDocsWith(t, 300, opts)
	// Rows 10 to 250: the array starts inside the page, as a work item's
	// range does.
	in, err := r.Read(context.Background(), []int{0}, 10, 250)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	docs := in.Column(0).(*array.String)
	schema := arrow.NewSchema([]arrow.Field{{Name: "chunk", Type: arrow.BinaryTypes.String}}, nil)
	var recs []arrow.RecordBatch
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	cut := NewCodeCutter(docs)
	if cut == nil {
		t.Fatal("no codes came with the documents")
	}
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	defer sb.Release()
	flush := func() {
		arr := sb.NewArray()
		defer arr.Release()
		if !cut.Attach(arr) {
			t.Fatal("Attach: the chunks got no codes")
		}
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{arr}, int64(arr.Len())))
	}
	for i := 0; i < docs.Len(); i++ {
		if docs.IsNull(i) {
			continue
		}
		doc := docs.Value(i)
		cut.Value(i, doc)
		for _, c := range windows(doc, 300, 40) {
			sb.Append(c)
			cut.Cut(c)
		}
		if i == docs.Len()/2 {
			flush() // two arrays with one table in a page
		}
	}
	flush()
	before := PrecodedPages()
	dir := t.TempDir()
	file := writeTestDataset(t, dir, "chunks", recs, WriterOptions{})
	if PrecodedPages() == before {
		t.Fatal("the writer compressed the chunks again instead of writing their codes")
	}
	assertReaderEqual(t, file, recs)
	assertOracleEqual(t, dir, "chunks", recs)
}

// TestCodeCutterRefusesWhatItCannotCut: a chunk that is not a substring of
// its document, or an array read without KeepFSST, gets no codes, and a
// page that mixes such an array with one that has codes is compressed as
// usual (and reads back right).
func TestCodeCutterRefusesWhatItCannotCut(t *testing.T) {
	r, file := codesDocs(t, 40)
	in, err := r.Read(context.Background(), []int{0}, 0, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	docs := in.Column(0).(*array.String)
	cut := NewCodeCutter(docs)
	build := func(copyChunk bool) arrow.Array {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		defer sb.Release()
		for i := 0; i < docs.Len(); i++ {
			if docs.IsNull(i) || docs.Value(i) == "" {
				continue
			}
			doc := docs.Value(i)
			cut.Value(i, doc)
			c := doc[:len(doc)/2]
			if copyChunk {
				c = strings.Clone(c)
			}
			sb.Append(c)
			cut.Cut(c)
		}
		return sb.NewArray()
	}
	copied := build(true)
	defer copied.Release()
	if cut.Attach(copied) {
		t.Error("a copy of a chunk got codes")
	}
	good := build(false)
	defer good.Release()
	if !cut.Attach(good) {
		t.Fatal("substrings got no codes")
	}
	// Dropped codes are gone for every slice of the array.
	if NewCodeCutter(array.NewSlice(docs, 1, 3)) == nil {
		t.Fatal("a slice of the documents came without codes")
	}
	DropCodes(docs)
	if NewCodeCutter(array.NewSlice(docs, 1, 3)) != nil {
		t.Error("codes came with a slice after DropCodes")
	}
	// Without KeepFSST no codes come with the documents.
	plain, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	pin, err := plain.Read(context.Background(), []int{0}, 0, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Release()
	if NewCodeCutter(pin.Column(0)) != nil {
		t.Error("codes came with an array read without KeepFSST")
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "chunk", Type: arrow.BinaryTypes.String}}, nil)
	recs := []arrow.RecordBatch{
		array.NewRecordBatch(schema, []arrow.Array{good}, int64(good.Len())),
		array.NewRecordBatch(schema, []arrow.Array{copied}, int64(copied.Len())),
	}
	defer recs[0].Release()
	defer recs[1].Release()
	before := PrecodedPages()
	dir := t.TempDir()
	out := writeTestDataset(t, dir, "mixed", recs, WriterOptions{})
	if PrecodedPages() != before {
		t.Error("a page mixing arrays with and without codes was written from codes")
	}
	assertReaderEqual(t, out, recs)
}
