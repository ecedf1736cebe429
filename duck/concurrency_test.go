package duck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestConcurrentQueries: many goroutines register views of the same name
// and query at once; each sees only its own rows.
func TestConcurrentQueries(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	var wg sync.WaitGroup
	for g := 1; g <= 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdr, err := db.Query(context.Background(), map[string]array.RecordReader{"t": testReader(t, g)}, "SELECT count(*) FROM t WHERE id >= 0")
			if err != nil {
				t.Error(err)
				return
			}
			recs, err := Collect(rdr)
			if err != nil {
				t.Error(err)
				return
			}
			if n := recs[0].Column(0).(interface{ Value(int) int64 }).Value(0); n != int64(g) {
				t.Errorf("goroutine %d counted %d", g, n)
			}
			recs[0].Release()
		}()
	}
	wg.Wait()
}

// TestProjectionAndFilter guards against pushdown into the Arrow scan:
// selecting a later column must return that column's values.
func TestProjectionAndFilter(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	rdr, err := db.Query(context.Background(), map[string]array.RecordReader{"t": testReader(t, 6)}, "SELECT title, id FROM t WHERE id > 3 AND id < 100")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].NumRows() != 2 {
		t.Fatalf("got %v", recs)
	}
	if s := recs[0].Column(0).(*array.String).Value(0); s != "Tx" {
		t.Fatalf("title of id 4 = %q", s)
	}
	if id := recs[0].Column(1).(*array.Int64).Value(1); id != 5 {
		t.Fatalf("id = %d", id)
	}
	recs[0].Release()
}

func TestProjectionOnly(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	rdr, err := db.Query(context.Background(), map[string]array.RecordReader{"t": testReader(t, 6)}, "SELECT title FROM t")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	if s := recs[0].Column(0).(*array.String).Value(1); s != "Tx" {
		t.Fatalf("title of row 1 = %q", s)
	}
	recs[0].Release()
}

// TestQueriesCannotSeeEachOther: a query cannot name, list or drain the
// inputs of a query running at the same time.
func TestQueriesCannotSeeEachOther(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := context.Background()
	// Query A holds its input unread.
	a, err := db.Query(ctx, map[string]array.RecordReader{"t": testReader(t, 1000)}, "SELECT count(*) AS n FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	// Listing the catalog is refused outright; each query has its own
	// database anyway.
	if _, err := db.Query(ctx, map[string]array.RecordReader{"t": testReader(t, 1)},
		"SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '__mvq_in_%'"); !isSQLError(err) {
		t.Fatalf("listing views: %v, want a SQLError", err)
	}
	// Inputs are named __mvq_in_0, __mvq_in_1, … in every session.
	for i := range 3 {
		rdr, err := db.Query(ctx, nil, fmt.Sprintf("SELECT count(*) FROM __mvq_in_%d", i))
		if err == nil {
			if recs, err := Collect(rdr); err == nil {
				t.Fatalf("read input %d of another query: %v", i, recs)
			}
		}
	}
	recs, err := Collect(a)
	if err != nil || recs[0].Column(0).(*array.Int64).Value(0) != 1000 {
		t.Fatalf("query A lost rows: %v %v", recs, err)
	}
}

func isSQLError(err error) bool {
	var se *SQLError
	return errors.As(err, &se)
}
