package table

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// Explain returns DuckDB's plan for query q (EXPLAIN), or with analyze
// runs it and returns the plan with what each operator did (EXPLAIN
// ANALYZE). The plan is of the SQL Query runs for q, filter or not: the
// user's filter is checked as Query checks it; only the engine adds the
// EXPLAIN.
func (t *Table) Explain(ctx context.Context, q QueryOptions, analyze bool) (string, error) {
	m, schema, err := t.LoadSchema(ctx, q.Version)
	if err != nil {
		return "", err
	}
	if _, _, err := ProjectSchema(schema, q.Columns, q.RowAddr); err != nil {
		return "", err
	}
	f := q
	if f.Filter == "" {
		f.Filter = "true"
	}
	query, err := t.filterSQL(ctx, schema, f)
	if err != nil {
		return "", err
	}
	scan, err := t.Scan(ctx, m, ScanOptions{RowAddr: q.RowAddr})
	if err != nil {
		return "", err
	}
	defer scan.Release()
	plan, err := t.c.sql.Explain(ctx, map[string]array.RecordReader{viewName: scan}, query, analyze)
	if err != nil {
		return "", sqlErr("filter", err)
	}
	return plan, nil
}
