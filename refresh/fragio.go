package refresh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	lancefile "github.com/mvq-dev/mvq/lance/file"
	"github.com/mvq-dev/mvq/table"
)

// Staged files live in the view's data/ folder under names derived from
// the job, so Discard finds a job's files by prefix:
//
//	data/_staging-{job}-{item}-{k}-{run}.EXT  output k of a run of a work item (EXT: the catalog's DataExt)
//	data/_staging-{job}-c{n}-{k}.EXT          a view fragment Commit rewrote
//	data/_staging-{job}-b{frag}-{k}.EXT       checkpoint k of a backfill of fragment frag
//
// Each run of a work item names its files with a run token of its own
// ("r" and 8 hex digits), so a run never replaces a file another run wrote: a
// redelivered duplicate of an item whose result was recorded, or even
// committed, writes beside it, and its files are orphans unless its
// result is the one the commit takes. The bytes of an item's files may
// then depend on what ran before it in the worker (its FSST tables are
// the view's, shared by the items of the process). A commit's and a
// backfill's retried step overwrites its own output, which it writes the
// same every time. Item files of jobs from before run tokens have none.
func stagingPrefix(jobID string) string { return "data/_staging-" + jobID + "-" }

// StagedJob reports whether name, a file name under data/, is a file a job
// staged (see stagingPrefix), and the id of that job. The janitor keeps
// the staged files of unfinished jobs by it; this package alone knows the
// naming scheme.
func StagedJob(name string) (jobID string, ok bool) {
	rest, ok := strings.CutPrefix(name, "_staging-")
	// Job ids are UUIDs (36 characters); staged names go on with "-".
	if !ok || len(rest) < 37 || rest[36] != '-' {
		return "", false
	}
	return rest[:36], true
}

// StagedItem is StagedJob for the output of a work item: the job and the
// item's index, ok false for any other name (a commit's or a backfill's
// file, or not staged at all).
func StagedItem(name string) (jobID string, index int, ok bool) {
	jobID, ok = StagedJob(name)
	if !ok {
		return "", 0, false
	}
	index, ok = stagedItem(name[len("_staging-")+len(jobID)+1:])
	return jobID, index, ok
}

// stagedItem is the item index of rest, what follows a job's staging
// prefix, when rest names an item's output ({item}-{k}.parquet).
func stagedItem(rest string) (int, bool) {
	if !stagedName.MatchString(rest) || rest[0] == 'c' || rest[0] == 'b' {
		return 0, false
	}
	i, err := strconv.Atoi(rest[:strings.IndexByte(rest, '-')])
	return i, err == nil
}

func itemPrefix(jobID string, index int) string {
	return stagingPrefix(jobID) + strconv.Itoa(index) + "-"
}

func commitPrefix(jobID string, n int) string {
	return stagingPrefix(jobID) + "c" + strconv.Itoa(n) + "-"
}

// stagedName matches what follows a job's staging prefix: a job id that
// extends another ("a" and "a-1") cannot match the shorter one's files.
var stagedName = regexp.MustCompile(`^[cb]?[0-9]+-[0-9]+(-r[0-9a-f]{8})?\.(parquet|lance)$`)

// itemFileName matches what follows an item's prefix: the file's number
// and its run's token (none for a job from before tokens).
var itemFileName = regexp.MustCompile(`^[0-9]+(-r[0-9a-f]{8})?\.(parquet|lance)$`)

// runToken is a new work item run's token for its file names: "r" and 8
// hex digits (the letter keeps a token from reading as an item number
// under a job id that extends another).
func runToken() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "r" + hex.EncodeToString(b[:])
}

// defaultWholeFileBytes is Engine.wholeFileBytes.
const defaultWholeFileBytes = 4 << 20

// readRows reads rows [start, end) of data file f of t, restricted to the
// given top-level fields (nil: all). Only the row groups holding the rows
// are read, and pages before start are skipped.
func (e *Engine) readRows(ctx context.Context, t *table.Table, f table.Fragment, start, end int64, fields []int) ([]arrow.RecordBatch, error) {
	if end <= start {
		return nil, nil
	}
	whole := e.wholeFileBytes
	if whole == 0 {
		whole = 1 // 0 asks for ranged reads, OpenFragment's 0 for its default
	}
	r, err := t.OpenFragment(ctx, f, table.FragmentReadOptions{WholeFileBytes: whole, Buffered: true, Label: table.JoinID(t.ID()) + " ", Mem: e.mem, KeepFSST: true})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadRange(ctx, fields, start, end, min(end-start, 1<<14))
}

// fragWriter writes records as files prefix{k}.parquet of at most max
// rows each, in order, and records the fragments (and, when the schema
// has __source_row_id, their source spans).
type fragWriter struct {
	e      *Engine
	t      *table.Table
	schema *arrow.Schema
	prefix string
	max    int64
	addr   int // column of __source_row_id (0); -1: no spans
	noDict []string
	// run, for a work item's writer, is "-" and its run token, put after
	// each file's number (a file no other run replaces); "" for a writer
	// whose retries rewrite their own files.
	run string
	// fsst shares trained FSST tables among the files and pages written
	// with it: the view's, for a work item (its items in this process
	// train a column once); the writer's own, for a writer that may
	// rewrite a file and must write the same bytes again.
	fsst *lancefile.FSSTTables
	// deferSync leaves the files unsynced until sync: a work item gives
	// up its CPU token before it waits on the disk.
	deferSync bool

	pending     []arrow.RecordBatch
	pendingRows int64
	frags       []table.Fragment
	spans       []Span
}

// newFragWriter returns a writer of files prefix{k}.{parquet,lance} of view v's
// table; for row-wise kinds it records each file's source span.
func (e *Engine) newFragWriter(v *View, prefix string, maxRows int) *fragWriter {
	w := &fragWriter{e: e, t: v.Table, schema: v.Schema, prefix: prefix, max: int64(maxRows), addr: -1, fsst: lancefile.NewFSSTTables()}
	w.setKind(v)
	return w
}

// newItemWriter is newFragWriter for a run of a work item: files
// prefix{k}-{run}.EXT, compressed with the view's shared FSST tables.
func (e *Engine) newItemWriter(v *View, prefix string, maxRows int) *fragWriter {
	w := &fragWriter{e: e, t: v.Table, schema: v.Schema, prefix: prefix, max: int64(maxRows), addr: -1, fsst: e.fsstTables(v), run: "-" + runToken()}
	w.setKind(v)
	return w
}

func (w *fragWriter) setKind(v *View) {
	if traitsOf(v.Def.Kind).RowWise {
		w.addr = 0
	}
	if nd, ok := v.Binding.(noDictionary); ok {
		w.noDict = nd.NoDictionary()
	}
}

// write queues rec (which the writer retains slices of), conformed to the
// writer's schema, and writes every file it fills.
func (w *fragWriter) write(ctx context.Context, rec arrow.RecordBatch) error {
	if !rec.Schema().Equal(w.schema) {
		// Same columns, other metadata (rows read back from Parquet).
		c, err := table.Conform(ctx, rec, w.schema, w.e.mem)
		if err != nil {
			return err
		}
		defer c.Release()
		rec = c
	}
	for off := int64(0); off < rec.NumRows(); {
		n := min(rec.NumRows()-off, w.max-w.pendingRows)
		w.pending = append(w.pending, rec.NewSlice(off, off+n))
		w.pendingRows += n
		off += n
		if w.pendingRows == w.max {
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// close writes the last, partial file.
func (w *fragWriter) close(ctx context.Context) error {
	if w.pendingRows == 0 {
		return nil
	}
	return w.flush(ctx)
}

// sync makes the files written so far durable (for deferSync).
func (w *fragWriter) sync(ctx context.Context) error {
	if !w.deferSync || len(w.frags) == 0 {
		return nil
	}
	rels := make([]string, len(w.frags))
	for i, f := range w.frags {
		rels[i] = f.Path
	}
	if w.e.syncHook != nil {
		w.e.syncHook(rels)
	}
	// The worker does not read its output back: its pages leave the
	// page cache once on disk.
	if err := w.t.SyncFilesDropBehind(ctx, rels); err != nil {
		return fmt.Errorf("sync %s: %w", table.JoinID(w.t.ID()), err)
	}
	return nil
}

// release drops queued records (after an error).
func (w *fragWriter) release() {
	for _, r := range w.pending {
		r.Release()
	}
	w.pending, w.pendingRows = nil, 0
}

func (w *fragWriter) flush(ctx context.Context) error {
	defer w.release()
	rel := w.prefix + strconv.Itoa(len(w.frags)) + w.run + w.t.Catalog().DataExt()
	f, err := w.e.writeFile(ctx, w.t, rel, w.schema, w.pending, table.FileOptions{NoDict: w.noDict, FSST: w.fsst, DeferSync: w.deferSync})
	if err != nil {
		return err
	}
	w.frags = append(w.frags, f)
	if w.addr >= 0 {
		first := w.pending[0].Column(w.addr).(*array.Uint64)
		lastRec := w.pending[len(w.pending)-1]
		last := lastRec.Column(w.addr).(*array.Uint64)
		w.spans = append(w.spans, Span{Lo: uint32(first.Value(0) >> 32), Hi: uint32(last.Value(last.Len()-1) >> 32)})
	}
	return nil
}

// writeFile writes recs as the data file rel of t (replacing it if
// present: a retried commit or backfill step rewrites its own files) and returns its
// fragment, ID unassigned. In a Parquet file the columns o.NoDict (chunk
// text, all but unique) skip the dictionary encoding Parquet would try
// first and then abandon; a Lance file shares FSST tables through o.FSST.
func (e *Engine) writeFile(ctx context.Context, t *table.Table, rel string, schema *arrow.Schema, recs []arrow.RecordBatch, o table.FileOptions) (table.Fragment, error) {
	f, err := t.WriteFileWith(ctx, rel, schema, recs, o)
	if err != nil {
		return table.Fragment{}, fmt.Errorf("write %s %s: %w", table.JoinID(t.ID()), rel, err)
	}
	return f, nil
}

// fsstTablesBytes bounds the FSST tables kept for views: a trained table
// holds about 200 KB of lookups, and a view's entry is counted as 256 KiB
// per text column of its schema.
const fsstTablesBytes = 16 << 20

// fsstTables is the shared FSST tables of view v's files in its current
// schema: the work items of a refresh (and later refreshes) in this
// process compress a text column with one trained table instead of
// training one per item (lance/file.FSSTTables retrains for values the
// table does markedly worse on).
func (e *Engine) fsstTables(v *View) *lancefile.FSSTTables {
	key := table.JoinID(v.Table.ID()) + "\x00" + v.Schema.String()
	if t, ok := e.fssts.Get(key); ok {
		return t
	}
	e.fssts.Put(key, lancefile.NewFSSTTables(), int64(max(1, textLeaves(v.Schema.Fields())))<<18)
	if t, ok := e.fssts.Get(key); ok {
		return t // the first Put's, when two raced
	}
	// Too wide for the cache, or evicted at once: the writer's own.
	return lancefile.NewFSSTTables()
}

// textLeaves counts the string and binary leaves of fields, the columns
// FSST compresses.
func textLeaves(fields []arrow.Field) int {
	n := 0
	for _, f := range fields {
		switch t := f.Type.(type) {
		case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
			n++
		case *arrow.StructType:
			n += textLeaves(t.Fields())
		case arrow.ListLikeType:
			n += textLeaves([]arrow.Field{t.ElemField()})
		}
	}
	return n
}
