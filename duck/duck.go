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

// DB is a pool of isolated in-memory DuckDB databases ("sessions"). A
// query has a session to itself: DuckDB registers Arrow inputs as views in
// a database-wide catalog, so two queries sharing a database could read
// (and drain) each other's inputs by name. Safe for concurrent use.
type DB struct {
	settings []string
	idle     chan *sql.DB  // sessions not in use
	slots    chan struct{} // one per session opened
	seq      atomic.Uint64
}

// Options tune the engine.
type Options struct {
	// Threads per query (default: GOMAXPROCS).
	Threads int
	// MemoryLimit per session, e.g. "2GB" (default: DuckDB's 80% of RAM).
	MemoryLimit string
	// Sessions bounds the queries running at once (default 2×GOMAXPROCS,
	// at least 4); more wait for a free session.
	Sessions int
}

// Open prepares the pool and opens one session to check the settings.
func Open(opts Options) (*DB, error) {
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	if opts.Sessions <= 0 {
		opts.Sessions = max(4, 2*runtime.GOMAXPROCS(0))
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
	d := &DB{settings: settings, idle: make(chan *sql.DB, opts.Sessions), slots: make(chan struct{}, opts.Sessions)}
	s, err := d.acquire(context.Background())
	if err != nil {
		return nil, err
	}
	d.release(s)
	return d, nil
}

// open starts one locked-down in-memory database with a single connection.
func (d *DB) open() (*sql.DB, error) {
	connector, err := duckdb.NewConnector("", func(execer driver.ExecerContext) error {
		for _, s := range d.settings {
			if _, err := execer.ExecContext(context.Background(), s, nil); err != nil {
				return fmt.Errorf("duckdb %q: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// acquire takes an idle session, opens a new one while under the bound,
// or waits for one to be released.
func (d *DB) acquire(ctx context.Context) (*sql.DB, error) {
	select {
	case s := <-d.idle:
		return s, nil
	default:
	}
	select {
	case s := <-d.idle:
		return s, nil
	case d.slots <- struct{}{}:
		s, err := d.open()
		if err != nil {
			<-d.slots
			return nil, err
		}
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *DB) release(s *sql.DB) { d.idle <- s }

// Close closes the idle sessions; call it when no query runs.
func (d *DB) Close() error {
	for {
		select {
		case s := <-d.idle:
			s.Close()
			<-d.slots
		default:
			return nil
		}
	}
}

// SQLError is an error DuckDB raised for the user's SQL (syntax, binder,
// conversion, permission). Callers turn it into a 400.
type SQLError struct{ Err error }

func (e *SQLError) Error() string { return e.Err.Error() }
func (e *SQLError) Unwrap() error { return e.Err }

// Query runs query with each input visible under its name (quote names
// with special characters in the SQL, e.g. "docs$articles"). Each input
// stream is read at most once. The returned reader must be Released; it
// holds a session until then (so a slow reader delays other queries once
// all sessions are taken).
//
// Each input is registered as a view under a generated name in the
// query's own session and the query is prefixed with CTEs that give it the
// name the SQL uses (a name such as "docs$articles" is no valid view name
// for the Arrow scan). The views are dropped on Release.
func (d *DB) Query(ctx context.Context, inputs map[string]array.RecordReader, query string) (array.RecordReader, error) {
	sess, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := sess.Conn(ctx)
	if err != nil {
		d.release(sess)
		return nil, err
	}
	var out array.RecordReader
	var views []string
	var releases []func()
	cleanup := func() {
		for _, v := range views {
			_, _ = conn.ExecContext(context.Background(), "DROP VIEW IF EXISTS "+v)
		}
		for _, r := range releases {
			r()
		}
		conn.Close()
		d.release(sess)
	}
	err = conn.Raw(func(dc any) error {
		ar, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
		if err != nil {
			return err
		}
		ctes := make([]string, 0, len(inputs))
		for name, rdr := range inputs {
			unique := fmt.Sprintf("__mvq_in_%d", d.seq.Add(1))
			rel, err := ar.RegisterView(rdr, unique)
			if err != nil {
				return fmt.Errorf("register %q: %w", name, err)
			}
			views = append(views, unique)
			releases = append(releases, rel)
			ctes = append(ctes, fmt.Sprintf("%s AS (SELECT * FROM %s)", QuoteIdent(name), unique))
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

// Exec runs a statement with no inputs (used by tests and health checks).
func (d *DB) Exec(ctx context.Context, stmt string) error {
	sess, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer d.release(sess)
	if _, err := sess.ExecContext(ctx, stmt); err != nil {
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
