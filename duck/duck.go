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
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
)

// DB runs user SQL in isolated in-memory DuckDB databases ("sessions").
// A session serves one query and is then closed: DuckDB registers Arrow
// inputs as views in a database-wide catalog, and whatever one query
// might leave behind (a macro, a table, an attachment, a setting) must not
// reach the next. Fresh sessions are opened ahead in the background, so
// the cost of opening one (about 10 ms) is mostly off the query's path.
// Safe for concurrent use.
type DB struct {
	settings []string
	parser   *sql.DB       // parses user SQL (never runs it)
	fresh    chan *sql.DB  // opened, never used
	slots    chan struct{} // one per query running
	seq      atomic.Uint64
	timeout  time.Duration
	waiting  atomic.Int64 // queries waiting for a slot
	refused  atomic.Int64 // unix nanos of the last BusyError
	opened   atomic.Int64 // sessions opened, for tests
	closed   atomic.Bool
	bg       sync.WaitGroup
	// beforeRelease, when set (tests), runs on a session's connection
	// after its query, before the session is given up.
	beforeRelease func(*sql.Conn)
}

// Options tune the engine.
type Options struct {
	// Threads per query (default: GOMAXPROCS).
	Threads int
	// MemoryLimit per session, e.g. "2GB" (default: DuckDB's 80% of RAM).
	MemoryLimit string
	// Sessions bounds the queries running at once (default 2×GOMAXPROCS,
	// at least 4); more wait for a free session, as long as their context
	// allows and at most the queue wait WithQueueWait puts on it.
	Sessions int
	// QueryTimeout bounds each query, from the start of its execution to
	// the release of its reader (default DefaultQueryTimeout; negative:
	// none). Past it DuckDB is interrupted and the query fails with a
	// *TimeoutError.
	QueryTimeout time.Duration
}

// DefaultQueryTimeout is the query deadline unless configured.
const DefaultQueryTimeout = 60 * time.Second

// MaxSQLBytes bounds user SQL text.
const MaxSQLBytes = 1 << 16

// Open prepares the engine and opens one session to check the settings.
func Open(opts Options) (*DB, error) {
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	if opts.Sessions <= 0 {
		opts.Sessions = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if opts.QueryTimeout == 0 {
		opts.QueryTimeout = DefaultQueryTimeout
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
	parser, err := openParser(settings, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	d := &DB{
		settings: settings, parser: parser, timeout: opts.QueryTimeout,
		fresh: make(chan *sql.DB, opts.Sessions), slots: make(chan struct{}, opts.Sessions),
	}
	s, err := d.open()
	if err != nil {
		parser.Close()
		return nil, err
	}
	d.fresh <- s
	return d, nil
}

// openLocked opens an in-memory database whose first connection applies
// settings (global ones, ending with lock_configuration).
func openLocked(settings []string) (*sql.DB, error) {
	var once atomic.Bool
	connector, err := duckdb.NewConnector("", func(execer driver.ExecerContext) error {
		if once.Swap(true) {
			return nil
		}
		for _, s := range settings {
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
	db.SetConnMaxLifetime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// open starts one locked-down in-memory database with a single connection.
func (d *DB) open() (*sql.DB, error) {
	db, err := openLocked(d.settings)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	d.opened.Add(1)
	return db, nil
}

type queueWaitKey struct{}

// WithQueueWait bounds how long queries under ctx wait for a session:
// past wait, Query fails with a *BusyError instead of queueing (the API
// answers 503). Without it a query waits as long as ctx allows.
func WithQueueWait(ctx context.Context, wait time.Duration) context.Context {
	return context.WithValue(ctx, queueWaitKey{}, wait)
}

// BusyError says no session freed up within the queue wait.
type BusyError struct {
	Sessions int
	Waited   time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("slow down: all %d SQL sessions stayed busy for %s; retry later", e.Sessions, e.Waited.Round(time.Millisecond))
}

// RetryAfter is how long a client should wait before retrying.
func (e *BusyError) RetryAfter() time.Duration { return max(time.Second, e.Waited) }

// TimeoutError says a query ran past the query deadline.
type TimeoutError struct{ Limit time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("query ran longer than %s (MVQ_QUERY_TIMEOUT) and was interrupted; select fewer rows or a simpler expression", e.Limit)
}

// acquire takes a slot (waiting as WithQueueWait and ctx allow) and a
// fresh session, opening one when none is ready.
func (d *DB) acquire(ctx context.Context) (*sql.DB, error) {
	select {
	case d.slots <- struct{}{}:
	default:
		d.waiting.Add(1)
		defer d.waiting.Add(-1)
		var expired <-chan time.Time
		wait, bounded := ctx.Value(queueWaitKey{}).(time.Duration)
		if bounded {
			t := time.NewTimer(wait)
			defer t.Stop()
			expired = t.C
		}
		select {
		case d.slots <- struct{}{}:
		case <-expired:
			d.refused.Store(time.Now().UnixNano())
			return nil, &BusyError{Sessions: cap(d.slots), Waited: wait}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case s := <-d.fresh:
		return s, nil
	default:
	}
	s, err := d.open()
	if err != nil {
		<-d.slots
		return nil, err
	}
	return s, nil
}

// release closes a used session, frees its slot and opens a fresh one in
// the background to take its place.
func (d *DB) release(s *sql.DB) {
	<-d.slots
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		s.Close()
		if d.closed.Load() || len(d.fresh) >= cap(d.fresh) {
			return
		}
		ns, err := d.open()
		if err != nil {
			return // acquire opens one when it needs it and reports the error
		}
		select {
		case d.fresh <- ns:
		default:
			ns.Close()
		}
	}()
}

// Saturated reports whether queries are being turned away or kept waiting
// because every session is busy, with a reason for /readyz.
func (d *DB) Saturated() (bool, string) {
	busy := len(d.slots) >= cap(d.slots)
	recent := time.Since(time.Unix(0, d.refused.Load())) < 5*time.Second
	if busy && (d.waiting.Load() > 0 || recent) {
		return true, fmt.Sprintf("all %d SQL sessions busy, %d queries waiting", cap(d.slots), d.waiting.Load())
	}
	return false, ""
}

// Close closes the engine; call it when no query runs.
func (d *DB) Close() error {
	d.closed.Store(true)
	d.bg.Wait()
	for {
		select {
		case s := <-d.fresh:
			s.Close()
		default:
			return d.parser.Close()
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
// holds a session until then, so callers that hand rows to a slow consumer
// should drain it first (see Spool).
//
// The query must be one SELECT statement that calls no refused function
// (CheckSelect); anything else is a *SQLError before a session is taken.
// It runs under the query deadline (a *TimeoutError past it); when no
// session frees up within the context's queue wait it fails with a
// *BusyError.
//
// Each input is registered as a view under a generated name in the
// query's own session and the query is prefixed with CTEs that give it the
// name the SQL uses (a name such as "docs$articles" is no valid view name
// for the Arrow scan).
func (d *DB) Query(ctx context.Context, inputs map[string]array.RecordReader, query string) (array.RecordReader, error) {
	type input struct {
		unique string
		rdr    array.RecordReader
	}
	ins := make([]input, 0, len(inputs))
	ctes := make([]string, 0, len(inputs))
	for name, rdr := range inputs {
		unique := fmt.Sprintf("__mvq_in_%d", d.seq.Add(1))
		ins = append(ins, input{unique, rdr})
		ctes = append(ctes, fmt.Sprintf("%s AS (SELECT * FROM %s)", QuoteIdent(name), unique))
	}
	full := withCTEs(ctes, query)
	if _, err := d.CheckSelect(ctx, full); err != nil {
		return nil, err
	}
	sess, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	qctx, cancel := ctx, context.CancelFunc(func() {})
	if d.timeout > 0 {
		qctx, cancel = context.WithTimeout(ctx, d.timeout)
	}
	conn, err := sess.Conn(qctx)
	if err != nil {
		cancel()
		d.release(sess)
		return nil, d.queryErr(ctx, qctx, err)
	}
	var out array.RecordReader
	var views []string
	var releases []func()
	cleanup := func() {
		if d.beforeRelease != nil {
			d.beforeRelease(conn)
		}
		// The session is closed anyway; dropping the views first makes
		// DuckDB let go of the exported streams before they are freed.
		for _, v := range views {
			_, _ = conn.ExecContext(context.Background(), "DROP VIEW IF EXISTS "+v)
		}
		for _, r := range releases {
			r()
		}
		conn.Close()
		cancel()
		d.release(sess)
	}
	err = conn.Raw(func(dc any) error {
		ar, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
		if err != nil {
			return err
		}
		for _, in := range ins {
			rel, err := ar.RegisterView(in.rdr, in.unique)
			if err != nil {
				return fmt.Errorf("register input: %w", err)
			}
			views = append(views, in.unique)
			releases = append(releases, rel)
		}
		rr, err := ar.QueryContext(qctx, full)
		if err != nil {
			return d.queryErr(ctx, qctx, err)
		}
		out = rr
		return nil
	})
	if err != nil {
		cleanup()
		return nil, err
	}
	return &connReader{RecordReader: out, cleanup: cleanup, err: func(err error) error { return d.queryErr(ctx, qctx, err) }}, nil
}

// queryErr names why a query failed: past the deadline, the caller gave
// up, or DuckDB refused the SQL.
func (d *DB) queryErr(ctx, qctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{Limit: d.timeout}
	}
	return &SQLError{Err: cleanErr(err)}
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
	err     func(error) error
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
		return c.err(err)
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
