package duck

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// Explain returns DuckDB's plan of query over inputs (as Query takes
// them): EXPLAIN, or with analyze EXPLAIN ANALYZE, which runs the query and
// reports what each operator did. The query is checked as Query checks it
// (one SELECT, no refused function); only the engine adds the EXPLAIN.
func (d *DB) Explain(ctx context.Context, inputs map[string]array.RecordReader, query string, analyze bool) (string, error) {
	prefix := "EXPLAIN "
	if analyze {
		prefix = "EXPLAIN ANALYZE "
	}
	rdr, err := d.query(ctx, inputs, query, prefix)
	if err != nil {
		return "", err
	}
	defer rdr.Release()
	var b strings.Builder
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			// Columns: explain_key, explain_value.
			if rec.NumCols() < 2 {
				continue
			}
			if s, ok := rec.Column(int(rec.NumCols()) - 1).(*array.String); ok {
				b.WriteString(s.Value(i))
				b.WriteString("\n")
			}
		}
	}
	return b.String(), rdr.Err()
}
