package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// Compactor rewrites a table or view that has many small fragments into
// fewer, larger ones in a new version, preserving its content; it decides
// itself whether id needs it and reports whether it wrote a version.
type Compactor interface {
	Compact(ctx context.Context, id []string) (bool, error)
}

// JanitorConfig configures a Janitor.
type JanitorConfig struct {
	// Interval between passes; default 10m. Env MVQ_JANITOR_INTERVAL.
	Interval time.Duration
	// OrphanGrace: unreferenced data files younger than this are kept (a
	// writer may be about to commit them); default 1h. Staged files of a
	// PENDING or RUNNING job are kept whatever their age. Env
	// MVQ_ORPHAN_GRACE.
	OrphanGrace time.Duration
	// Catalog is walked for orphan cleanup and compaction; nil: the
	// janitor only trims job indexes.
	Catalog *table.Catalog
	// Compactor compacts tables and views; nil: no compaction.
	Compactor Compactor
}

func (c *JanitorConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = 10 * time.Minute
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = time.Hour
	}
}

// janitorLockTTL bounds how long a janitor that died mid-pass keeps others
// out; a live one extends it after each table.
const janitorLockTTL = 2 * time.Minute

// Janitor keeps state from growing without bound. Each pass, done by one
// worker at a time across the deployment (a Redis lock):
//
//   - job indexes (mvq:jobs, mvq:view:*:jobs) lose the entries of jobs
//     created more than JobRetention plus a day ago (the records expired);
//   - every table and view loses the data files no version references
//     that are older than OrphanGrace, except staged files of unfinished
//     jobs — what killed writers, cancelled or lost refreshes (also after a
//     Redis data loss, when no job claims them any more) left behind;
//   - every table, and every view with no unfinished job, is offered to
//     the Compactor.
//   - batch transactions whose writer died are completed or aborted
//     (table.Catalog.RecoverTransactions).
type Janitor struct {
	st   *store
	id   string
	cfg  JanitorConfig
	log  *slog.Logger
	loop loop
}

// JanitorResult counts what one pass did.
type JanitorResult struct {
	Ran            bool  // false: another worker held the lock
	IndexTrimmed   int64 // index entries removed
	Tables         int   // tables and views visited
	OrphansRemoved int
	OrphanBytes    int64
	Compacted      int
}

// NewJanitor returns a janitor over the job records in rdb; worker names
// its lock holder.
func NewJanitor(rdb redis.UniversalClient, worker string, cfg JanitorConfig, log *slog.Logger) *Janitor {
	return newJanitor(&store{rdb: rdb}, worker, cfg, log)
}

func newJanitor(st *store, id string, cfg JanitorConfig, log *slog.Logger) *Janitor {
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	return &Janitor{st: st, id: id, cfg: cfg, log: log}
}

// Start runs a pass now and then every Interval until Stop.
func (j *Janitor) Start(ctx context.Context) error {
	return j.loop.start(ctx, func(ctx context.Context) {
		every(ctx, j.cfg.Interval, func(ctx context.Context) {
			res, err := j.Pass(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				j.log.Warn("jobs: janitor pass failed", "worker", j.id, "err", err)
			case res.Ran:
				j.log.Info("jobs: janitor pass", "tables", res.Tables, "orphans_removed", res.OrphansRemoved,
					"orphan_bytes", res.OrphanBytes, "compacted", res.Compacted, "index_trimmed", res.IndexTrimmed)
			}
		})
	})
}

// Stop ends the passes (a pass under way stops at its next step).
func (j *Janitor) Stop(ctx context.Context) error { return j.loop.stop(ctx) }

// Pass runs one pass unless another janitor holds the lock.
func (j *Janitor) Pass(ctx context.Context) (JanitorResult, error) {
	var res JanitorResult
	ok, err := j.st.lock(ctx, "janitor", j.id, janitorLockTTL)
	if err != nil || !ok {
		return res, err
	}
	defer j.st.unlock(context.WithoutCancel(ctx), "janitor", j.id)
	res.Ran = true
	var errList []error
	n, err := j.trimIndexes(ctx, time.Now())
	res.IndexTrimmed = n
	errList = append(errList, err)
	if j.cfg.Catalog != nil {
		// Batch transactions whose writer died: completed or aborted.
		_, err := j.cfg.Catalog.RecoverTransactions(ctx, 0)
		errList = append(errList, err, j.walk(ctx, nil, &res))
	}
	return res, errors.Join(errList...)
}

// trimIndexes drops index entries of jobs created more than a day past
// the retention ago (ids are UUIDv7, so their text sorts by creation
// time). Records expire on their own; List skips entries whose record is
// gone.
func (j *Janitor) trimIndexes(ctx context.Context, now time.Time) (int64, error) {
	ms := now.Add(-JobRetention - 24*time.Hour).UnixMilli()
	bound := fmt.Sprintf("(%08x-%04x", uint64(ms)>>16, uint64(ms)&0xffff)
	return j.st.trimJobIndexes(ctx, bound)
}

// walk visits every table under ns, depth first.
func (j *Janitor) walk(ctx context.Context, ns []string, res *JanitorResult) error {
	cat := j.cfg.Catalog
	tables, err := cat.ListTables(ctx, ns)
	if err != nil {
		return err
	}
	var errList []error
	for _, name := range tables {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ok, err := j.st.extend(ctx, "janitor", j.id, janitorLockTTL); err != nil || !ok {
			return errors.Join(err, errors.New("jobs: janitor lost its lock"))
		}
		id := append(append([]string{}, ns...), name)
		res.Tables++
		// Compaction reads and rewrites user rows: a panic on one table
		// is that table's error, not the worker's end.
		if _, err := protect(func() (struct{}, error) { return struct{}{}, j.table(ctx, id, res) }); err != nil {
			errList = append(errList, fmt.Errorf("%s: %w", table.JoinID(id), err))
		}
	}
	children, err := cat.ListNamespaces(ctx, ns)
	if err != nil {
		return errors.Join(append(errList, err)...)
	}
	for _, c := range children {
		errList = append(errList, j.walk(ctx, append(append([]string{}, ns...), c), res))
	}
	return errors.Join(errList...)
}

// table cleans and compacts one table or view.
func (j *Janitor) table(ctx context.Context, id []string, res *JanitorResult) error {
	t, err := j.cfg.Catalog.OpenTable(ctx, id)
	if errs.CodeOf(err) == errs.CodeTableNotFound {
		return nil // dropped meanwhile
	}
	if err != nil {
		return err
	}
	var keepErr error
	cr, err := t.CleanupOrphansKeep(ctx, j.cfg.OrphanGrace, func(name string) bool {
		keep, err := j.stagedLive(ctx, name)
		if err != nil {
			keepErr = err
			return true // unsure: keep
		}
		return keep
	})
	res.OrphansRemoved += cr.Removed
	res.OrphanBytes += cr.Bytes
	if err != nil || keepErr != nil {
		return errors.Join(err, keepErr)
	}
	if j.cfg.Compactor == nil {
		return nil
	}
	// A view with an unfinished refresh is left alone: its job planned
	// against the current version.
	if n, err := j.st.viewQueueLen(ctx, id); err != nil {
		return err
	} else if n > 0 {
		return nil
	}
	ok, err := j.cfg.Compactor.Compact(ctx, id)
	if ok {
		res.Compacted++
	}
	return err
}

// stagedLive reports whether name (under data/) is a staged file to keep:
// one of a PENDING or RUNNING job (data/_staging-{job id}-…), or a
// checkpoint: the output of a finished item of a FAILED or CANCELLED job
// whose item results are still recorded (CheckpointRetention), which a
// later refresh may reuse.
func (j *Janitor) stagedLive(ctx context.Context, name string) (bool, error) {
	id, ok := refresh.StagedJob(name)
	if !ok {
		return false, nil
	}
	st, err := j.st.state(ctx, id)
	if err != nil {
		return false, redisErr("read job state", err)
	}
	switch st {
	case StatePending, StateRunning:
		return true, nil
	case StateFailed, StateCancelled:
		_, item, ok := refresh.StagedItem(name)
		if !ok {
			return false, nil
		}
		return j.st.itemDone(ctx, id, item)
	}
	return false, nil
}

// TableCompactor is the Compactor over the catalog's own compaction
// (table.Catalog.Compact): runs of adjacent small fragments are merged in
// place in a new version, keeping content, row order and, for views, the
// lineage that incremental refreshes rely on.
type TableCompactor struct {
	Catalog *table.Catalog
	Options table.CompactOptions
}

// Compact compacts id when it has enough small fragments.
func (c TableCompactor) Compact(ctx context.Context, id []string) (bool, error) {
	res, err := c.Catalog.Compact(ctx, id, c.Options)
	return res.Version != 0, err
}
