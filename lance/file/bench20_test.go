package file

import (
	"bytes"
	"context"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/lance/schema"
)

// bench20Data is 20000 rows of ints, strings, lists and 768-dim vectors.
func bench20Data(b *testing.B) (arrow.RecordBatch, []byte) {
	rec := selectColumns20(allTypes20(20000, 768), "i32", "f64", "s", "li", "st", "v768")
	return rec, writeFile20(b, []arrow.RecordBatch{rec}, 0)
}

func BenchmarkWrite20(b *testing.B) {
	rec, data := bench20Data(b)
	defer rec.Release()
	fields, err := schema.FromArrow(rec.Schema())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, fields, WriterOptions{Version: V2_0, Schema: rec.Schema()})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead20(b *testing.B) {
	rec, data := bench20Data(b)
	defer rec.Release()
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := r.Read(context.Background(), nil, 0, r.NumRows())
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
}

func BenchmarkTake20(b *testing.B) {
	rec, data := bench20Data(b)
	defer rec.Release()
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	rows := make([]uint64, 100)
	for i := range rows {
		rows[i] = uint64(rng.Intn(int(r.NumRows())))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := r.Take(context.Background(), nil, rows)
		if err != nil {
			b.Fatal(err)
		}
		got.Release()
	}
}
