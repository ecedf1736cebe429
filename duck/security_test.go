package duck

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// collectOne runs q over the test input "docs$articles" and returns the
// first column of the first row as a string.
func collectOne(t *testing.T, db *DB, q string) (string, error) {
	t.Helper()
	rdr, err := db.Query(context.Background(), map[string]array.RecordReader{"docs$articles": testReader(t, 10)}, q)
	if err != nil {
		return "", err
	}
	recs, err := Collect(rdr)
	if err != nil {
		return "", err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if len(recs) == 0 || recs[0].NumRows() == 0 {
		return "", nil
	}
	return strings.Clone(recs[0].Column(0).ValueStr(0)), nil // the value aliases the buffer
}

// TestStatementSmugglingRefused: whatever the text hides after a comment,
// in a string or behind a ';', DuckDB's own parse decides and anything but
// one SELECT is refused before a session runs it.
func TestStatementSmugglingRefused(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	const src = `SELECT * FROM "docs$articles"`
	for _, q := range []string{
		src + " --x\r; CREATE OR REPLACE MACRO lower(x) AS 'pwned'; SELECT 7 AS id",
		src + " --x\r\nCREATE MACRO lower(x) AS 'pwned'",
		src + " /* ; */ ; CREATE TABLE x AS SELECT 1",
		src + "; SELECT 1",
		"CREATE TABLE x(a INT)",
		"CREATE MACRO lower(x) AS 'pwned'",
		"ATTACH ':memory:' AS m",
		"USE system",
		"PRAGMA enable_profiling",
		"SET threads=1",
		"SET VARIABLE x = 1",
		"RESET threads",
		"CALL enable_logging()",
		"LOAD httpfs",
		"INSTALL httpfs",
		"EXPORT DATABASE 'x'",
		"COPY (SELECT 1) TO 'x.csv'",
		"CHECKPOINT",
		"DETACH memory",
		"CREATE SCHEMA s",
		"CREATE TYPE e AS ENUM ('a')",
		"PIVOT \"docs$articles\" ON title USING count(*)",
		"EXPLAIN " + src,
		"BEGIN TRANSACTION",
		"PREPARE p AS SELECT 1",
		"SELECT * FROM query('CREATE MACRO lower(x) AS 1')",
		"SELECT * FROM query_table('docs$articles')",
		"SELECT * FROM json_execute_serialized_sql('{}')",
		"SELECT getvariable('x')",
		"SELECT * FROM enable_logging()",
		"SELECT * FROM checkpoint()",
		"SELECT * FROM arrow_scan(0, 0, 0)",
		"SELECT * FROM duckdb_settings()",
		"SELECT (SELECT count(*) FROM QUERY('SELECT 1'))",
		src + " WHERE id IN (SELECT * FROM main.query('SELECT 1'))",
	} {
		_, err := collectOne(t, db, q)
		if !isSQLError(err) {
			t.Errorf("%q: %v, want a SQLError", q, err)
		}
	}
	// Text that only looks dangerous is one SELECT and runs.
	for q, want := range map[string]string{
		`SELECT '; CREATE TABLE x(a INT);' AS s`:                  "; CREATE TABLE x(a INT);",
		`SELECT '--' || 'x' AS s FROM "docs$articles" LIMIT 1 --`: "--x",
		"SELECT count(*) FROM range(3) /* ; DROP */;":             "3",
		`SELECT lower('ABC')`:                                     "abc",
	} {
		got, err := collectOne(t, db, q)
		if err != nil || got != want {
			t.Errorf("%q = %q, %v; want %q", q, got, err, want)
		}
	}
	if v, err := collectOne(t, db, "SELECT lower('ABC')"); v != "abc" || err != nil {
		t.Fatalf("lower after the attempts = %q %v", v, err)
	}
}

func TestCheckExpression(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := context.Background()
	for _, ok := range []string{"id > 0", "title = 'a)b'", "x IN (1, 2)", "lower(lang) = 'en'",
		"id IN (SELECT id FROM t WHERE id > 2)", "CASE WHEN a THEN 1 ELSE 2 END", "a -\r\n 1 > 0"} {
		if err := db.CheckExpression(ctx, ok); err != nil {
			t.Errorf("CheckExpression(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{
		"1 FROM t",
		"a, b",
		"1 UNION SELECT 2",
		"1 LIMIT 1",
		"1 ORDER BY 1",
		"a AS b",
		"1 WHERE true",
		"1 GROUP BY 1",
		"getvariable('x') = 1",
		"(SELECT count(*) FROM query('SELECT 1')) > 0",
		"id > 0 --\r) OR (true",
		"id > 0; SELECT 1",
		"",
	} {
		err := db.CheckExpression(ctx, bad)
		if !isSQLError(err) {
			t.Errorf("CheckExpression(%q) = %v, want a SQLError", bad, err)
		}
	}
}

// sessionState is what a session holds beyond its defaults.
func sessionState(t *testing.T, c *sql.Conn) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, q := range map[string]string{
		"macros":    "SELECT count(*) FROM duckdb_functions() WHERE NOT internal",
		"tables":    "SELECT count(*) FROM duckdb_tables()",
		"views":     "SELECT count(*) FROM duckdb_views() WHERE NOT internal AND view_name NOT LIKE '__mvq_in_%'",
		"databases": "SELECT count(*) FROM duckdb_databases() WHERE NOT internal",
		"schemas":   "SELECT count(*) FROM duckdb_schemas() WHERE NOT internal",
		"types":     "SELECT count(*) FROM duckdb_types() WHERE NOT internal",
		"variables": "SELECT count(*) FROM duckdb_variables()",
		"sequences": "SELECT count(*) FROM duckdb_sequences()",
		"lowered":   "SELECT CASE WHEN lower('A') = 'a' THEN 0 ELSE 1 END",
	} {
		var n int
		if err := c.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		out[name] = n
	}
	return out
}

// TestSessionCarriesNothing: even if a query managed to run statements
// (simulated here by running them on its session after the query, past
// every check), the next query gets a session with none of it.
func TestSessionCarriesNothing(t *testing.T) {
	db, err := Open(Options{Threads: 1, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	var states []map[string]int
	evil := []string{
		"CREATE OR REPLACE MACRO lower(x) AS 'pwned'",
		"CREATE TABLE stash AS SELECT 42 AS v",
		"CREATE VIEW v AS SELECT 1",
		"ATTACH ':memory:' AS extra",
		"CREATE SCHEMA s",
		"CREATE TYPE mood AS ENUM ('a')",
		"CREATE SEQUENCE seq",
		"SET VARIABLE secret = 'x'",
	}
	db.beforeRelease = func(c *sql.Conn) {
		mu.Lock()
		defer mu.Unlock()
		if len(states) == 0 {
			for _, s := range evil {
				if _, err := c.ExecContext(context.Background(), s); err != nil {
					t.Errorf("%s: %v", s, err)
				}
			}
		}
		states = append(states, sessionState(t, c))
	}
	opened := db.opened.Load()
	if _, err := collectOne(t, db, `SELECT id FROM "docs$articles"`); err != nil {
		t.Fatal(err)
	}
	got, err := collectOne(t, db, `SELECT lower(title) FROM "docs$articles"`)
	if err != nil || got != "t" {
		t.Fatalf("second query = %q, %v; want t (the macro must be gone)", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 2 {
		t.Fatalf("saw %d sessions", len(states))
	}
	if states[0]["macros"] == 0 || states[0]["tables"] == 0 || states[0]["lowered"] == 0 {
		t.Fatalf("the evil statements did not take: %v", states[0])
	}
	for k, v := range states[1] {
		if v != 0 && k != "databases" {
			t.Errorf("second session has %s = %d", k, v)
		}
	}
	if states[1]["databases"] != 1 { // memory only
		t.Errorf("second session has %d databases", states[1]["databases"])
	}
	if n := db.opened.Load() - opened; n < 1 {
		t.Errorf("no session opened for the second query (%d)", n)
	}
}

func TestQueryDeadline(t *testing.T) {
	t.Parallel()
	db, err := Open(Options{Threads: 1, QueryTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	_, err = collectOne(t, db, "SELECT sum(hash(a.range * b.range)) FROM range(100000000) a, range(100000) b")
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a TimeoutError", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("interrupted after %s", el)
	}
	if !strings.Contains(err.Error(), "MVQ_QUERY_TIMEOUT") {
		t.Errorf("message %q does not name the setting", err)
	}
	// The engine still serves queries.
	if v, err := collectOne(t, db, "SELECT 1"); v != "1" || err != nil {
		t.Fatalf("after the timeout: %q %v", v, err)
	}
}

func TestBusyAndSaturated(t *testing.T) {
	t.Parallel()
	db, err := Open(Options{Threads: 1, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	held, err := db.Query(ctx, map[string]array.RecordReader{"t": testReader(t, 10)}, "SELECT * FROM t")
	if err != nil {
		t.Fatal(err)
	}
	if sat, _ := db.Saturated(); sat {
		t.Fatal("saturated with no one waiting")
	}
	_, err = db.Query(WithQueueWait(ctx, 50*time.Millisecond), nil, "SELECT 1")
	var be *BusyError
	if !errors.As(err, &be) || be.RetryAfter() < time.Second {
		t.Fatalf("err = %v, want a BusyError", err)
	}
	if sat, why := db.Saturated(); !sat || !strings.Contains(why, "busy") {
		t.Fatalf("Saturated = %v %q after a refusal", sat, why)
	}
	held.Release()
	if sat, _ := db.Saturated(); sat {
		t.Fatal("saturated with a free session")
	}
	if v, err := collectOne(t, db, "SELECT 2"); v != "2" || err != nil {
		t.Fatalf("after release: %q %v", v, err)
	}
}

// TestSessionKeptOnlyForItsText: a session that ran a query text to its
// end serves that same text again (the next work item, the next
// fragment), never another text; a session whose query failed or was not
// read to the end is closed. State planted in a session (past every
// check, as in TestSessionCarriesNothing) never reaches a different text.
func TestSessionKeptOnlyForItsText(t *testing.T) {
	db, err := Open(Options{Threads: 1, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const same = `SELECT lower(title) FROM "docs$articles"`
	planted := false
	db.beforeRelease = func(c *sql.Conn) {
		if !planted {
			planted = true
			if _, err := c.ExecContext(context.Background(), "CREATE OR REPLACE MACRO lower(x) AS 'pwned'"); err != nil {
				t.Error(err)
			}
		}
	}
	if got, err := collectOne(t, db, same); err != nil || got != "t" {
		t.Fatalf("first run = %q, %v", got, err)
	}
	reused := db.reused.Load()
	// Another text, even one that differs only in case, gets a clean
	// session: the macro planted after the first query is not there.
	if got, err := collectOne(t, db, strings.Replace(same, "FROM", "from", 1)); err != nil || got != "t" {
		t.Fatalf("other text = %q, %v; want t", got, err)
	}
	if db.reused.Load() != reused {
		t.Fatal("a session kept for one text served another")
	}
	// The same text again takes its idle session.
	for range 3 {
		if _, err := collectOne(t, db, `SELECT id FROM "docs$articles"`); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.reused.Load() - reused; n != 2 {
		t.Fatalf("three runs of one text reused %d sessions, want 2", n)
	}
	// A query that fails at run time (a bad cast) leaves no session behind.
	const bad = `SELECT CAST(title AS INTEGER) FROM "docs$articles"`
	for range 2 {
		if _, err := collectOne(t, db, bad); !isSQLError(err) {
			t.Fatalf("bad cast: %v", err)
		}
	}
	// Nor does a reader released before its end.
	const big = "SELECT * FROM range(1000000)"
	for range 2 {
		rdr, err := db.Query(context.Background(), nil, big)
		if err != nil {
			t.Fatal(err)
		}
		if !rdr.Next() {
			t.Fatal(rdr.Err())
		}
		rdr.Release()
	}
	if n := db.reused.Load() - reused; n != 2 {
		t.Fatalf("failed or unfinished queries left sessions to reuse (%d reuses)", n)
	}
}

// TestVerdictsCached: the check of a text is DuckDB's parse once; the
// same text is answered from the cache, refusals included.
func TestVerdictsCached(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := context.Background()
	a, err := db.CheckSelect(ctx, "SELECT 1 AS x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.CheckSelect(ctx, "SELECT 1 AS x")
	if err != nil || a != b {
		t.Fatalf("second check: %p %p %v; want the cached statement", a, b, err)
	}
	for range 2 {
		if _, err := db.CheckSelect(ctx, "SELECT 1; DROP TABLE x"); !isSQLError(err) {
			t.Fatalf("two statements: %v", err)
		}
		if _, err := db.CheckSelect(ctx, "SELECT query('SELECT 1')"); !isSQLError(err) {
			t.Fatalf("query(): %v", err)
		}
	}
	// A canceled context is no verdict on the text.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.CheckSelect(cctx, "SELECT 2 AS y"); err == nil || isSQLError(err) {
		t.Fatalf("canceled check: %v", err)
	}
	if _, err := db.CheckSelect(ctx, "SELECT 2 AS y"); err != nil {
		t.Fatalf("after a canceled check: %v", err)
	}
}

// TestSystemCatalogsRefused: the catalog views and the functions that
// read settings are no way around the function deny-list: each is a
// SQLError before a session runs it, as a view query and inside a
// filter expression, whatever its spelling. A user's own CTE of the same
// name, and functions that compute from their arguments, still run.
func TestSystemCatalogsRefused(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := context.Background()
	for _, q := range []string{
		"SELECT setting FROM pg_catalog.pg_settings WHERE name = 'temp_directory'",
		"SELECT setting FROM pg_settings",
		"SELECT count(*) FROM pg_proc",
		"SELECT * FROM PG_CATALOG.PG_PROC",
		"SELECT * FROM system.pg_catalog.pg_settings",
		"SELECT * FROM information_schema.tables",
		"SELECT * FROM information_schema.schemata",
		"SELECT * FROM duckdb_databases",
		`SELECT * FROM "duckdb_databases"`,
		"SELECT * FROM main.duckdb_tables",
		"SELECT * FROM system.main.duckdb_views",
		"SELECT * FROM sqlite_master",
		"SELECT * FROM pragma_database_list",
		"SELECT * FROM duckdb_settings()",
		"SELECT * FROM pragma_show('x')",
		"SELECT current_setting('temp_directory')",
		"SELECT CURRENT_SETTING('memory_limit')::INT",
		"SELECT current_setting('threads') FROM \"docs$articles\"",
		"SELECT current_schemas(true)",
		"SELECT current_database()",
		"SELECT current_query()",
		"SELECT pg_catalog.current_setting('threads')",
		"SELECT pg_get_viewdef(1)",
		"SELECT has_table_privilege('x', 'select')",
		"SELECT system.main.lower('A')",
		"SELECT * FROM (SHOW databases)",
		"SELECT * FROM (DESCRIBE SELECT 1)",
		"SELECT * FROM (SUMMARIZE SELECT 1)",
		// A CTE of the name in a subquery does not cover a reference
		// outside it.
		"SELECT * FROM (WITH pg_settings AS (SELECT 1) SELECT 1) x, pg_settings",
		`SELECT id FROM "docs$articles" WHERE (SELECT count(*) FROM duckdb_databases) > 0`,
	} {
		if _, err := collectOne(t, db, q); !isSQLError(err) || !strings.Contains(err.Error(), "not allowed in user SQL") {
			t.Errorf("%q: %v, want a SQLError refusing it", q, err)
		}
	}
	for _, expr := range []string{
		"(SELECT setting FROM pg_settings LIMIT 1)::INT > 0",
		"current_setting('temp_directory')::INT > 0",
		"(SELECT count(*) FROM information_schema.columns) > 0",
	} {
		if err := db.CheckExpression(ctx, expr); !isSQLError(err) {
			t.Errorf("CheckExpression(%q) = %v, want a SQLError", expr, err)
		}
	}
	for q, want := range map[string]string{
		"WITH pg_settings AS (SELECT 7 AS setting) SELECT setting FROM pg_settings": "7",
		"SELECT pg_typeof(1)":                         "integer",
		"SELECT current_date IS NOT NULL":             "true",
		`SELECT count(*) FROM "docs$articles"`:        "10",
		"SELECT user FROM (SELECT 'u' AS user)":       "u",
		`SELECT "columns" FROM (SELECT 3 AS columns)`: "3",
	} {
		if got, err := collectOne(t, db, q); err != nil || got != want {
			t.Errorf("%q = %q, %v; want %q", q, got, err, want)
		}
	}
}
