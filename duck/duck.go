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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"

	"github.com/mvq-dev/mvq/internal/lru"
)

// DB runs user SQL in isolated in-memory DuckDB databases ("sessions").
// A session never serves two different query texts: DuckDB registers
// Arrow inputs as views in a database-wide catalog, and whatever one query
// might leave behind (a macro, a table, an attachment, a setting) must not
// reach another. A session that ran a query text to its end cleanly may
// be kept idle for a while and serve the very same text again (the next
// work item of a refresh, the next fragment of an update): every text is
// checked to be one SELECT, which cannot create catalog objects or change
// settings, and whatever state a SELECT can touch (a random seed) could
// only have been left by that same text, so no other SQL, and no other
// tenant, can reach a query through it. Fresh sessions are opened ahead
// in the background, so the cost of opening one (about 10 ms) is mostly
// off the query's path. Safe for concurrent use.
type DB struct {
	settings []string
	parser   *sql.DB       // parses user SQL (never runs it)
	system   systemNames   // catalog views and functions user SQL must not name
	fresh    chan *sql.DB  // opened, never used
	slots    chan struct{} // one per query running
	timeout  time.Duration
	memory   int64 // each session's memory_limit from MemoryBudget; 0: none
	maxIdle  int   // idle sessions kept at most
	shareKey func(context.Context) string
	share    int                         // sessions one share key holds at most
	shareMu  sync.Mutex                  // guards shares
	shares   map[string]*share           // by key, while the key holds or waits for a session
	verdicts *lru.Cache[string, verdict] // CheckSelect's answers by SQL text (newVerdictCache)
	mu       sync.Mutex
	idle     []idleSession // used sessions kept for their query text, oldest first
	waiting  atomic.Int64  // queries waiting for a slot
	refused  atomic.Int64  // unix nanos of the last BusyError
	opened   atomic.Int64  // sessions opened, for tests
	reused   atomic.Int64  // idle sessions taken again, for tests
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
	// MemoryLimit per session, e.g. "2GB" (default: DuckDB's 80% of RAM,
	// or MemoryBudget's share). Set at most one of the two.
	MemoryLimit string
	// MemoryBudget bounds, in bytes, the memory of every session that may
	// run at once, together (MVQ_QUERY_MEMORY): each session's
	// memory_limit is MemoryBudget/Sessions, so the queries running at
	// once cannot together take more than the budget, whatever they do.
	// When that share would be under MinSessionMemory, fewer sessions run
	// at once (at least one), each with MinSessionMemory or the whole
	// budget. 0: no budget. A query past its share fails with a
	// *SQLError (out of memory), its session only.
	MemoryBudget int64
	// Sessions bounds the queries running at once (default 2×GOMAXPROCS,
	// at least 4); more wait for a free session, as long as their context
	// allows and at most the queue wait WithQueueWait puts on it.
	Sessions int
	// IdleSessions bounds the used sessions kept idle, each for the one
	// query text it ran (default max(32, 2×Sessions); about 3 MB each):
	// many views with the same query text (one per tenant over the same
	// kind of table, a chain of small refreshes) then skip opening a
	// database per query.
	IdleSessions int
	// ShareKey, when set, names whose query a context carries (the API:
	// the authenticated principal); "" is nobody's. One key's queries hold
	// at most Share sessions at once, so one caller cannot take every
	// session from the others: its further queries wait for one of its own
	// to end (within the queue wait, then a *BusyError), while other keys
	// still find sessions.
	ShareKey func(context.Context) string
	// Share bounds the sessions one ShareKey holds at once (default
	// ceil(Sessions/2); at least 1, at most Sessions).
	Share int
	// QueryTimeout bounds each query, from the start of its execution to
	// the release of its reader (default DefaultQueryTimeout; negative:
	// none). Past it DuckDB is interrupted and the query fails with a
	// *TimeoutError.
	QueryTimeout time.Duration
}

// MinSessionMemory is the smallest share of Options.MemoryBudget a session
// gets: below it, fewer sessions run at once rather than each failing on
// ordinary queries.
const MinSessionMemory = 128 << 20

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
	if opts.MemoryBudget < 0 || (opts.MemoryBudget > 0 && opts.MemoryLimit != "") {
		return nil, fmt.Errorf("duck: set MemoryBudget (> 0) or MemoryLimit, not both")
	}
	var sessionMemory int64
	if opts.MemoryBudget > 0 {
		opts.Sessions, sessionMemory = shareBudget(opts.MemoryBudget, opts.Sessions)
		opts.MemoryLimit = fmt.Sprintf("%dKiB", sessionMemory>>10)
	}
	if opts.IdleSessions <= 0 {
		opts.IdleSessions = max(32, 2*opts.Sessions)
	}
	if opts.Share <= 0 {
		opts.Share = (opts.Sessions + 1) / 2
	}
	opts.Share = min(opts.Share, opts.Sessions)
	settings := []string{
		fmt.Sprintf("SET threads=%d", opts.Threads),
		"SET autoinstall_known_extensions=false",
		"SET autoload_known_extensions=false",
		// No spilling: an in-memory database would otherwise write what
		// does not fit its memory_limit to a .tmp folder in the working
		// directory, unbounded; past its limit a query fails instead.
		"SET temp_directory=''",
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
	system, err := loadSystemNames(context.Background(), parser)
	if err != nil {
		parser.Close()
		return nil, err
	}
	d := &DB{
		settings: settings, parser: parser, system: system, timeout: opts.QueryTimeout, maxIdle: opts.IdleSessions, memory: sessionMemory,
		shareKey: opts.ShareKey, share: opts.Share, shares: map[string]*share{},
		fresh: make(chan *sql.DB, opts.Sessions), slots: make(chan struct{}, opts.Sessions), verdicts: newVerdictCache(),
	}
	s, err := d.open()
	if err != nil {
		parser.Close()
		return nil, err
	}
	d.fresh <- s
	return d, nil
}

// shareBudget divides budget bytes over at most sessions sessions, none
// with less than MinSessionMemory (unless the budget itself is less):
// how many sessions may run at once and each one's memory_limit (whole
// KiB, as DuckDB is told).
func shareBudget(budget int64, sessions int) (int, int64) {
	if n := budget / MinSessionMemory; int64(sessions) > n {
		sessions = int(max(1, n))
	}
	return sessions, budget / int64(sessions) >> 10 << 10
}

// Sessions is how many queries may run at once.
func (d *DB) Sessions() int { return cap(d.slots) }

// SessionMemory is each session's memory_limit in bytes under
// Options.MemoryBudget (0: no budget).
func (d *DB) SessionMemory() int64 { return d.memory }

// An idle session ran key to its end and may run key again, and nothing
// else, until idleTTL passes. At most Options.IdleSessions are kept, the
// most recently used (an idle session holds about 3 MB): enough for a few
// texts each run in parallel, as the matching and the rewrite of an update
// are, and for the texts of many small views refreshed in turn.
type idleSession struct {
	key   string
	db    *sql.DB
	since time.Time
}

const idleTTL = 30 * time.Second

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

// BusyError says no session freed up within the queue wait: every
// session was busy, or (Share > 0) the caller's share of them was.
type BusyError struct {
	Sessions int
	Share    int // the caller's share when that was what stayed full
	Waited   time.Duration
}

func (e *BusyError) Error() string {
	if e.Share > 0 {
		return fmt.Sprintf("slow down: your queries already hold %d of the %d SQL sessions (one caller's share) and none ended within %s; retry later", e.Share, e.Sessions, e.Waited.Round(time.Millisecond))
	}
	return fmt.Sprintf("slow down: all %d SQL sessions stayed busy for %s; retry later", e.Sessions, e.Waited.Round(time.Millisecond))
}

// A share counts the sessions one share key holds (tokens, up to
// DB.share); refs counts the queries holding or waiting for a token.
type share struct {
	tokens chan struct{}
	refs   int
}

// ticket is what a query holds of a share; release gives it back.
type ticket struct {
	key string
	sh  *share
}

// takeShare waits (as acquire waits for a slot) for a token of ctx's share
// key; a zero ticket when there is no key or the share is no bound.
func (d *DB) takeShare(ctx context.Context, expired <-chan time.Time, wait time.Duration) (ticket, error) {
	if d.shareKey == nil || d.share >= cap(d.slots) {
		return ticket{}, nil
	}
	key := d.shareKey(ctx)
	if key == "" {
		return ticket{}, nil
	}
	d.shareMu.Lock()
	sh := d.shares[key]
	if sh == nil {
		sh = &share{tokens: make(chan struct{}, d.share)}
		d.shares[key] = sh
	}
	sh.refs++
	d.shareMu.Unlock()
	t := ticket{key, sh}
	select {
	case sh.tokens <- struct{}{}:
		return t, nil
	default:
	}
	select {
	case sh.tokens <- struct{}{}:
		return t, nil
	case <-expired:
		d.dropShare(t, false)
		return ticket{}, &BusyError{Sessions: cap(d.slots), Share: d.share, Waited: wait}
	case <-ctx.Done():
		d.dropShare(t, false)
		return ticket{}, ctx.Err()
	}
}

// dropShare gives back t's token (held) and its reference.
func (d *DB) dropShare(t ticket, held bool) {
	if t.sh == nil {
		return
	}
	if held {
		<-t.sh.tokens
	}
	d.shareMu.Lock()
	defer d.shareMu.Unlock()
	if t.sh.refs--; t.sh.refs == 0 {
		delete(d.shares, t.key)
	}
}

// RetryAfter is how long a client should wait before retrying.
func (e *BusyError) RetryAfter() time.Duration { return max(time.Second, e.Waited) }

// TimeoutError says a query ran past the query deadline.
type TimeoutError struct{ Limit time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("query ran longer than %s (MVQ_QUERY_TIMEOUT) and was interrupted; select fewer rows or a simpler expression", e.Limit)
}

// acquire takes a slot (waiting as WithQueueWait and ctx allow) and a
// session for query text key: an idle one that ran exactly key, else a
// fresh one (fresh true), opening one when none is ready.
//
// With a share key on ctx (Options.ShareKey) it first takes a token of
// that key's share, so the key never holds more than its share of the
// slots; one queue wait bounds both waits.
func (d *DB) acquire(ctx context.Context, key string) (s *sql.DB, fresh bool, t ticket, err error) {
	var expired <-chan time.Time
	wait, bounded := ctx.Value(queueWaitKey{}).(time.Duration)
	if bounded {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expired = timer.C
	}
	if t, err = d.takeShare(ctx, expired, wait); err != nil {
		return nil, false, t, err
	}
	select {
	case d.slots <- struct{}{}:
	default:
		d.waiting.Add(1)
		defer d.waiting.Add(-1)
		select {
		case d.slots <- struct{}{}:
		case <-expired:
			d.refused.Store(time.Now().UnixNano())
			d.dropShare(t, true)
			return nil, false, ticket{}, &BusyError{Sessions: cap(d.slots), Waited: wait}
		case <-ctx.Done():
			d.dropShare(t, true)
			return nil, false, ticket{}, ctx.Err()
		}
	}
	if s := d.takeIdle(key); s != nil {
		return s, false, t, nil
	}
	select {
	case s := <-d.fresh:
		return s, true, t, nil
	default:
	}
	s, err = d.open()
	if err != nil {
		<-d.slots
		d.dropShare(t, true)
		return nil, false, ticket{}, err
	}
	return s, true, t, nil
}

// takeIdle removes and returns an idle session that ran key, or nil; it
// closes the sessions idle past idleTTL.
func (d *DB) takeIdle(key string) *sql.DB {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	var stale []*sql.DB
	for len(d.idle) > 0 && now.Sub(d.idle[0].since) > idleTTL {
		stale = append(stale, d.idle[0].db)
		d.idle = d.idle[1:]
	}
	d.closeAll(stale)
	for i := len(d.idle) - 1; i >= 0; i-- {
		if d.idle[i].key == key {
			s := d.idle[i].db
			d.idle = append(d.idle[:i], d.idle[i+1:]...)
			d.reused.Add(1)
			return s
		}
	}
	return nil
}

// closeAll closes sessions in the background.
func (d *DB) closeAll(ss []*sql.DB) {
	if len(ss) == 0 {
		return
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for _, s := range ss {
			s.Close()
		}
	}()
}

// release frees the slot of session s, which ran query text key. A
// session that ran key cleanly to its end (keep) is kept idle for key;
// any other is closed. When s came fresh, a fresh one is opened in the
// background to take its place.
func (d *DB) release(s *sql.DB, key string, keep, fresh bool, t ticket) {
	<-d.slots
	d.dropShare(t, true)
	if keep && !d.closed.Load() {
		d.mu.Lock()
		d.idle = append(d.idle, idleSession{key: key, db: s, since: time.Now()})
		var evicted []*sql.DB
		for len(d.idle) > d.maxIdle {
			evicted = append(evicted, d.idle[0].db)
			d.idle = d.idle[1:]
		}
		d.mu.Unlock()
		d.closeAll(evicted)
		s = nil
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		if s != nil {
			s.Close()
		}
		if !fresh || d.closed.Load() || len(d.fresh) >= cap(d.fresh) {
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

// Settle waits until the sessions being opened or closed in the
// background (after a query) are. For tests and benchmarks: call it only
// when no query runs or can start (a query's end adds background work,
// which must not race the wait). A benchmark settles before it measures,
// so that work left by what it set up is not counted in what it measures.
func (d *DB) Settle() { d.bg.Wait() }

// SessionsOpened is how many sessions the engine has opened so far.
func (d *DB) SessionsOpened() int64 { return d.opened.Load() }

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
	d.mu.Lock()
	for _, s := range d.idle {
		s.db.Close()
	}
	d.idle = nil
	d.mu.Unlock()
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
// for the Arrow scan). The generated names follow the input names' order,
// so the same query over the same input names is the same text: its
// check is answered from the cache and an idle session that ran it may
// run it again.
func (d *DB) Query(ctx context.Context, inputs map[string]array.RecordReader, query string) (array.RecordReader, error) {
	return d.query(ctx, inputs, query, "")
}

// query is Query that runs prefix+query (prefix is "" or the engine's own
// EXPLAIN [ANALYZE]: the user's query is checked as it is written).
func (d *DB) query(ctx context.Context, inputs map[string]array.RecordReader, query, prefix string) (array.RecordReader, error) {
	type input struct {
		unique string
		rdr    array.RecordReader
	}
	names := make([]string, 0, len(inputs))
	for name := range inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	ins := make([]input, 0, len(inputs))
	ctes := make([]string, 0, len(inputs))
	for i, name := range names {
		unique := fmt.Sprintf("__mvq_in_%d", i)
		ins = append(ins, input{unique, inputs[name]})
		ctes = append(ctes, fmt.Sprintf("%s AS (SELECT * FROM %s)", QuoteIdent(name), unique))
	}
	full := withCTEs(ctes, query)
	if _, err := d.CheckSelect(ctx, full); err != nil {
		return nil, err
	}
	full = prefix + full
	sess, fresh, tk, err := d.acquire(ctx, full)
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
		d.release(sess, full, false, fresh, tk)
		return nil, d.queryErr(ctx, qctx, err)
	}
	var out array.RecordReader
	var views []string
	var releases []func()
	// cleanup gives the session up; clean says the query ran to its end
	// without an error, so the session may serve the same text again.
	cleanup := func(clean bool) {
		if d.beforeRelease != nil {
			d.beforeRelease(conn)
		}
		// Dropping the views first makes DuckDB let go of the exported
		// streams before they are freed; a session whose views are not
		// all gone is not kept.
		for _, v := range views {
			if _, err := conn.ExecContext(context.Background(), "DROP VIEW IF EXISTS "+v); err != nil {
				clean = false
			}
		}
		for _, r := range releases {
			r()
		}
		conn.Close()
		clean = clean && qctx.Err() == nil
		cancel()
		d.release(sess, full, clean, fresh, tk)
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
		cleanup(false)
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
	if isOutOfMemory(err) {
		share := "its memory share"
		if d.memory > 0 {
			share = fmt.Sprintf("its %d MiB share of MVQ_QUERY_MEMORY", d.memory>>20)
		}
		return &SQLError{Err: fmt.Errorf("out of memory: the query needed more than %s; select fewer rows or a simpler expression", share)}
	}
	return &SQLError{Err: cleanErr(err)}
}

// isOutOfMemory reports whether DuckDB failed a query for its memory
// limit (its error may come as a DuckDB error or through the Arrow stream
// as text).
func isOutOfMemory(err error) bool {
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypeOutOfMemory {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "Out of Memory Error")
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
	cleanup func(clean bool)
	err     func(error) error
	done    bool // read to the end without an error
}

func (c *connReader) Next() bool {
	ok := c.RecordReader.Next()
	if !ok {
		if err := c.RecordReader.Err(); err != nil {
			return false
		}
		c.done = true
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
		c.cleanup(c.done)
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
