package duck

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func testReader(t *testing.T, n int) array.RecordReader {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "title", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append("T" + strings.Repeat("x", i%3))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

func openDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestQueryOverArrow(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	rdr, err := db.Query(context.Background(), map[string]array.RecordReader{"docs$articles": testReader(t, 10)},
		`SELECT id, lower(title) AS title FROM "docs$articles" WHERE id >= 5`)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range recs {
		n += r.NumRows()
		if r.Schema().Field(1).Type.ID() != arrow.STRING && r.Schema().Field(1).Type.ID() != arrow.STRING_VIEW {
			t.Errorf("title type %s", r.Schema().Field(1).Type)
		}
		r.Release()
	}
	if n != 5 {
		t.Fatalf("got %d rows, want 5", n)
	}
}

func TestExternalAccessIsOff(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	dir := t.TempDir()
	secret := dir + "/secret.csv"
	if err := os.WriteFile(secret, []byte("a\nsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT * FROM read_csv('" + secret + "')",
		"SELECT * FROM '" + secret + "'",
		"SET enable_external_access=true",
		"SET lock_configuration=false",
		"ATTACH '" + dir + "/x.db'",
		"COPY (SELECT 1) TO '" + dir + "/out.csv'",
		"INSTALL httpfs",
	} {
		rdr, err := db.Query(context.Background(), nil, q)
		if err == nil {
			recs, cerr := Collect(rdr)
			for _, r := range recs {
				r.Release()
			}
			if cerr == nil {
				t.Errorf("%q succeeded", q)
			}
			continue
		}
		var se *SQLError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v is not a SQLError", q, err)
		}
	}
	if _, err := os.Stat(dir + "/out.csv"); err == nil {
		t.Error("COPY wrote a file")
	}
}

func TestCheckExpressionText(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"name'x' = 'y'", "id > 0", "title = 'a)b'", `"we""ird" IS NULL`, "(a OR b) AND c", "x IN (1, 2)", "a - b > 1"} {
		if err := CheckExpressionText(ok); err != nil {
			t.Errorf("CheckExpressionText(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{
		"id > 0) UNION SELECT * FROM read_csv('/etc/passwd') --",
		"id > 0; DROP TABLE x",
		"((id > 0)",
		"'unterminated",
		"id > 0 /* x */",
		"$$)$$",
		`E'\'' = 'x'), false) OR true --'`,
		"e'x'",
	} {
		if err := CheckExpressionText(bad); err == nil {
			t.Errorf("CheckExpressionText(%q) accepted", bad)
		}
	}
}
