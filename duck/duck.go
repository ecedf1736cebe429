// Package duck runs user SQL (predicates, update expressions, view queries)
// in an embedded DuckDB over Arrow record streams. The database is
// in-memory with external access disabled and its configuration locked, so
// SQL can reach nothing but the rows it is given: read_csv('/etc/passwd'),
// ATTACH, COPY, INSTALL and SET all fail.
package duck

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// DB is a pool of DuckDB connections. Safe for concurrent use.
type DB struct {
	db *sql.DB
	// catalogMu serialises view registration and removal: DuckDB fails
	// concurrent arrow_scan view creation on one database (a catalog write
	// conflict). Queries themselves run concurrently.
	catalogMu sync.Mutex
	seq       atomic.Uint64
}

// Options tune the engine.
type Options struct {
	// Threads per query (default: GOMAXPROCS).
	Threads int
	// MemoryLimit, e.g. "2GB" (default: DuckDB's 80% of RAM).
	MemoryLimit string
}

// Open starts an in-memory DuckDB locked down for untrusted SQL.
func Open(opts Options) (*DB, error) {
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	settings := []string{
		fmt.Sprintf("SET threads=%d", opts.Threads),
		"SET autoinstall_known_extensions=false",
		"SET autoload_known_extensions=false",
		"SET enable_external_access=false",
		// arrow_scan over streams exported from Go accepts pushed-down
		// filters and projections and then ignores them: rows come back
		// unfiltered and columns shifted (or a crash). Keep both above the
		// scan; TestProjectionOnly and TestProjectionAndFilter guard this.
		"SET disabled_optimizers='filter_pushdown,unused_columns'",
	}
	if opts.MemoryLimit != "" {
		settings = append(settings, fmt.Sprintf("SET memory_limit='%s'", strings.ReplaceAll(opts.MemoryLimit, "'", "")))
	}
	settings = append(settings, "SET lock_configuration=true")
	var once sync.Once
	var initErr error
	connector, err := duckdb.NewConnector("", func(execer driver.ExecerContext) error {
		// Settings are database-wide; apply them once, on the first
		// connection, before anything else can run.
		once.Do(func() {
			for _, s := range settings {
				if _, err := execer.ExecContext(context.Background(), s, nil); err != nil {
					initErr = fmt.Errorf("duckdb %q: %w", s, err)
					return
				}
			}
		})
		return initErr
	})
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxIdleConns(runtime.GOMAXPROCS(0) * 2)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return &DB{db: db}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// SQLError is an error DuckDB raised for the user's SQL (syntax, binder,
// conversion, permission). Callers turn it into a 400.
type SQLError struct{ Err error }

func (e *SQLError) Error() string { return e.Err.Error() }
func (e *SQLError) Unwrap() error { return e.Err }

// Query runs query with each input visible under its name (quote names
// with special characters in the SQL, e.g. "docs$articles"). Each input
// stream is read at most once. The returned reader must be Released; it
// holds a connection until then.
//
// DuckDB's Arrow scan registers a view in the database-wide catalog, not a
// per-connection one, so concurrent queries would see (and free) each
// other's inputs. Each input is therefore registered under a unique name
// and the query is prefixed with CTEs that give it the name the SQL uses.
func (d *DB) Query(ctx context.Context, inputs map[string]array.RecordReader, query string) (array.RecordReader, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var out array.RecordReader
	var views []string
	var releases []func()
	cleanup := func() {
		d.dropViews(conn, views)
		for _, r := range releases {
			r()
		}
		conn.Close()
	}
	err = conn.Raw(func(dc any) error {
		ar, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
		if err != nil {
			return err
		}
		ctes, err := d.register(ar, inputs, &views, &releases)
		if err != nil {
			return err
		}
		rr, err := ar.QueryContext(ctx, withCTEs(ctes, query))
		if err != nil {
			return &SQLError{Err: cleanErr(err)}
		}
		out = rr
		return nil
	})
	if err != nil {
		cleanup()
		return nil, err
	}
	return &connReader{RecordReader: out, cleanup: cleanup}, nil
}

// register registers each input under a unique view name and returns the
// CTEs that alias them. Registration is serialised: concurrent catalog
// writes on one database conflict.
func (d *DB) register(ar *duckdb.Arrow, inputs map[string]array.RecordReader, views *[]string, releases *[]func()) ([]string, error) {
	d.catalogMu.Lock()
	defer d.catalogMu.Unlock()
	ctes := make([]string, 0, len(inputs))
	for name, rdr := range inputs {
		unique := fmt.Sprintf("__mvq_in_%d", d.seq.Add(1))
		rel, err := ar.RegisterView(rdr, unique)
		if err != nil {
			return nil, fmt.Errorf("register %q: %w", name, err)
		}
		*views = append(*views, unique)
		*releases = append(*releases, rel)
		ctes = append(ctes, fmt.Sprintf("%s AS (SELECT * FROM %s)", QuoteIdent(name), unique))
	}
	return ctes, nil
}

// withCTEs prefixes query with common table expressions, merging them into
// a WITH clause the query already has.
func withCTEs(ctes []string, query string) string {
	if len(ctes) == 0 {
		return query
	}
	q := strings.TrimSpace(query)
	head := strings.ToUpper(q[:min(len(q), 15)])
	switch {
	case strings.HasPrefix(head, "WITH RECURSIVE") && len(q) > 14 && isSpace(q[14]):
		return "WITH RECURSIVE " + strings.Join(ctes, ", ") + ", " + q[15:]
	case strings.HasPrefix(head, "WITH") && len(q) > 4 && isSpace(q[4]):
		return "WITH " + strings.Join(ctes, ", ") + ", " + q[5:]
	}
	return "WITH " + strings.Join(ctes, ", ") + " " + q
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// dropViews removes registered input views from the shared catalog.
func (d *DB) dropViews(conn *sql.Conn, views []string) {
	if len(views) == 0 {
		return
	}
	d.catalogMu.Lock()
	defer d.catalogMu.Unlock()
	for _, v := range views {
		_, _ = conn.ExecContext(context.Background(), "DROP VIEW IF EXISTS "+v)
	}
}

// Exec runs a statement with no inputs (used by tests and health checks).
func (d *DB) Exec(ctx context.Context, stmt string) error {
	_, err := d.db.ExecContext(ctx, stmt)
	if err != nil {
		return &SQLError{Err: cleanErr(err)}
	}
	return nil
}

func cleanErr(err error) error {
	var de *duckdb.Error
	if errors.As(err, &de) {
		return errors.New(strings.TrimSpace(de.Msg))
	}
	return err
}

type connReader struct {
	array.RecordReader
	once    sync.Once
	cleanup func()
}

func (c *connReader) Next() bool {
	ok := c.RecordReader.Next()
	if !ok {
		if err := c.RecordReader.Err(); err != nil {
			return false
		}
	}
	return ok
}

func (c *connReader) Err() error {
	if err := c.RecordReader.Err(); err != nil {
		return &SQLError{Err: cleanErr(err)}
	}
	return nil
}

func (c *connReader) Release() {
	c.once.Do(func() {
		c.RecordReader.Release()
		c.cleanup()
	})
}

// Collect reads every record of rdr (retained) and releases rdr.
func Collect(rdr array.RecordReader) ([]arrow.RecordBatch, error) {
	defer rdr.Release()
	var out []arrow.RecordBatch
	for rdr.Next() {
		r := rdr.RecordBatch()
		r.Retain()
		out = append(out, r)
	}
	if err := rdr.Err(); err != nil {
		for _, r := range out {
			r.Release()
		}
		return nil, err
	}
	return out, nil
}

// QuoteIdent quotes an SQL identifier.
func QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// QuoteString quotes an SQL string literal.
func QuoteString(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
