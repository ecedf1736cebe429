package file

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	textcorpus "github.com/mvq-dev/mvq/internal/corpus"
)

// TestWriter21SharedFSSTLanceDB writes three files with one FSSTTables:
// the second, of text like the first's, reuses the first's tables (no
// training) and comes out within 3% of the size it has with tables of its
// own (the reuse rule allows 2% of the page's input bytes over the ratio
// the table had on its own page, about 6% of compressed prose); the third, of other text (hex), trains its own. LanceDB and the Go
// reader read every file as written.
func TestWriter21SharedFSSTLanceDB(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "body", Type: arrow.BinaryTypes.String},                  // full-zip pages
		{Name: "title", Type: arrow.BinaryTypes.String, Nullable: true}, // mini-block pages
	}, nil)
	rng := rand.New(rand.NewSource(7))
	hex := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[rng.Intn(16)]
		}
		return string(b)
	}
	batch := func(first, n int, text func(i int) (string, string)) arrow.RecordBatch {
		body, title := array.NewStringBuilder(memory.DefaultAllocator), array.NewStringBuilder(memory.DefaultAllocator)
		defer body.Release()
		defer title.Release()
		for i := first; i < first+n; i++ {
			b, ti := text(i)
			body.Append(b)
			if i%9 == 4 {
				title.AppendNull()
			} else {
				title.Append(ti)
			}
		}
		return array.NewRecordBatch(s, []arrow.Array{body.NewArray(), title.NewArray()}, int64(n))
	}
	prose := func(i int) (string, string) { return textcorpus.Doc(i, 2048), textcorpus.Doc(i+1_000_000, 60) }
	hexText := func(i int) (string, string) { return hex(1500), hex(40) }
	a, b, c := batch(0, 1000, prose), batch(1000, 1000, prose), batch(0, 1000, hexText)

	shared := NewFSSTTables()
	root := t.TempDir()
	fileA := writeTestDataset(t, root, "a", []arrow.RecordBatch{a}, WriterOptions{FSST: shared})
	if n := shared.Reused(); n != 0 {
		t.Fatalf("first file: %d pages reused a table, want 0", n)
	}
	fileB := writeTestDataset(t, root, "b", []arrow.RecordBatch{b}, WriterOptions{FSST: shared})
	reusedB := shared.Reused()
	if reusedB != 2 {
		t.Fatalf("second file of like text: %d pages reused a table, want 2 (both columns)", reusedB)
	}
	own := writeTestDataset(t, t.TempDir(), "own", []arrow.RecordBatch{b}, WriterOptions{})
	if float64(len(fileB)) > 1.03*float64(len(own)) {
		t.Fatalf("second file with the shared tables is %d bytes, %d with its own: more than 3%% larger", len(fileB), len(own))
	}
	fileC := writeTestDataset(t, root, "c", []arrow.RecordBatch{c}, WriterOptions{FSST: shared})
	if n := shared.Reused(); n != reusedB {
		t.Fatalf("third file of hex text: %d pages reused a table trained on prose, want none", n-reusedB)
	}
	ownC := writeTestDataset(t, t.TempDir(), "ownc", []arrow.RecordBatch{c}, WriterOptions{})
	if len(fileC) != len(ownC) {
		t.Fatalf("third file with retrained tables: %d bytes, %d with tables of its own", len(fileC), len(ownC))
	}
	for name, f := range map[string]struct {
		file []byte
		rec  arrow.RecordBatch
	}{"a": {fileA, a}, "b": {fileB, b}, "c": {fileC, c}} {
		t.Run(fmt.Sprint(name), func(t *testing.T) {
			assertOracleEqual(t, root, name, []arrow.RecordBatch{f.rec})
			assertReaderEqual(t, f.file, []arrow.RecordBatch{f.rec})
		})
	}
}

// TestSharedFSSTConcurrentWriters: writers on several goroutines share one
// FSSTTables (a worker's concurrent work items); every file reads back as
// written. Run with -race to check the sharing.
func TestSharedFSSTConcurrentWriters(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	shared := NewFSSTTables()
	const writers = 4
	files := make([][]byte, writers)
	recs := make([]arrow.RecordBatch, writers)
	errc := make(chan error, writers)
	for w := range writers {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range 300 {
			b.Append(textcorpus.Doc(w*1000+i, 1024))
		}
		recs[w] = array.NewRecordBatch(s, []arrow.Array{b.NewArray()}, 300)
		b.Release()
	}
	fields := testFields(t, s)
	for w := range writers {
		go func() {
			var buf bytes.Buffer
			fw, err := NewWriter(&buf, fields, WriterOptions{FSST: shared, PageSize: 64 << 10})
			if err == nil {
				err = fw.Write(recs[w])
			}
			if err == nil {
				_, err = fw.Close()
			}
			files[w] = buf.Bytes()
			errc <- err
		}()
	}
	for range writers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if shared.Reused() == 0 {
		t.Fatal("no page reused a shared table")
	}
	for w := range writers {
		assertReaderEqual(t, files[w], []arrow.RecordBatch{recs[w]})
	}
}
