// Package oracle drives LanceDB (the real client, @lancedb/lancedb pinned in
// lance/oracle/package.json) from Go tests through lance/oracle/oracle.mjs,
// so that the Lance package is checked against what LanceDB writes and reads
// rather than against itself.
//
// Need skips a test when node or the installed client is missing (run
// `npm ci` in lance/oracle, or `make test`, which does it); with CI=true it
// fails the test instead. Every method fails the test on error; the *Err
// variants return the error for tests that expect LanceDB to refuse.
//
// Data crosses as Arrow IPC: Write hands LanceDB an IPC file that goes to its
// native core byte for byte, and Read/Search get back an IPC stream the
// oracle joins byte for byte from the core's batches, so no type passes
// through the JavaScript Arrow library (apache-arrow 18.1.0) on the way.
// WriteViaJS takes the public JavaScript path instead (the JS library decodes
// the batch and re-encodes it), which changes some types; see WriteViaJS.
package lanceoracle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ClientVersion is the @lancedb/lancedb release the oracle pins.
const ClientVersion = "0.31.0"

// CommandTimeout bounds one oracle command.
const CommandTimeout = 5 * time.Minute

// Oracle runs oracle.mjs with node.
type Oracle struct {
	node   string
	script string
}

// At most this many node processes run at once across the test binary, so
// parallel tests do not swamp a small machine.
var slots = make(chan struct{}, 2)

var seq atomic.Int64

// Dir is the folder of oracle.mjs and its package.json, found from this
// source file's location.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("oracle: cannot locate source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "lance", "oracle"), nil
}

var (
	findOnce sync.Once
	found    *Oracle
	findErr  error
)

func find() (*Oracle, error) {
	findOnce.Do(func() {
		dir, err := Dir()
		if err != nil {
			findErr = err
			return
		}
		node, err := exec.LookPath("node")
		if err != nil {
			findErr = errors.New("node not found in PATH (apt-get install nodejs npm)")
			return
		}
		pkg := filepath.Join(dir, "node_modules", "@lancedb", "lancedb", "package.json")
		b, err := os.ReadFile(pkg)
		if err != nil {
			findErr = fmt.Errorf("LanceDB not installed: run `npm ci` in %s (or make test)", dir)
			return
		}
		var meta struct{ Version string }
		if err := json.Unmarshal(b, &meta); err != nil || meta.Version != ClientVersion {
			findErr = fmt.Errorf("%s has @lancedb/lancedb %q, want %s: run `npm ci` in %s", pkg, meta.Version, ClientVersion, dir)
			return
		}
		found = &Oracle{node: node, script: filepath.Join(dir, "oracle.mjs")}
	})
	return found, findErr
}

// Need returns the oracle, or skips the test when node or LanceDB is not
// installed; when the CI environment variable is "true" it fails instead.
func Need(t testing.TB) *Oracle {
	t.Helper()
	o, err := find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("LanceDB oracle required under CI: %v", err)
		}
		t.Skipf("LanceDB oracle unavailable: %v", err)
	}
	return o
}

// Run runs one oracle command and returns its standard output; the error
// carries its standard error.
func (o *Oracle) Run(args ...string) (string, error) { return o.RunScript(o.script, args...) }

// RunScript runs another script of the oracle's folder (a file name, or
// a path) with node, as Run runs oracle.mjs.
func (o *Oracle) RunScript(script string, args ...string) (string, error) {
	if !filepath.IsAbs(script) {
		script = filepath.Join(filepath.Dir(o.script), script)
	}
	slots <- struct{}{}
	defer func() { <-slots }()
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.node, append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// LanceDB logs warnings (e.g. "No existing dataset") to stderr; keep
	// them out unless a command fails.
	cmd.Env = append(os.Environ(), "LANCEDB_LOG=error", "RUST_LOG=error")
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("oracle %s: timed out after %v", args[0], CommandTimeout)
		}
		return "", fmt.Errorf("oracle %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (o *Oracle) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := o.Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tempFile(t testing.TB, ext string) string {
	return filepath.Join(t.TempDir(), fmt.Sprintf("oracle-%d%s", seq.Add(1), ext))
}

func writeIPC(t testing.TB, rec arrow.RecordBatch, stream bool) string {
	t.Helper()
	var buf bytes.Buffer
	var err error
	if stream {
		w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err = w.Write(rec); err == nil {
			err = w.Close()
		}
	} else {
		var w *ipc.FileWriter
		w, err = ipc.NewFileWriter(&buf, ipc.WithSchema(rec.Schema()))
		if err == nil {
			if err = w.Write(rec); err == nil {
				err = w.Close()
			}
		}
	}
	if err != nil {
		t.Fatalf("oracle: encode IPC: %v", err)
	}
	ext := ".arrow"
	if stream {
		ext = ".arrows"
	}
	path := tempFile(t, ext)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadStream reads an Arrow IPC stream file into a table (the caller
// releases it).
func ReadStream(path string) (arrow.Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := ipc.NewReader(f, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer r.Release()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return array.NewTableFromRecords(r.Schema(), recs), nil
}

func writeArgs(dir, in, version, mode string) []string {
	args := []string{"write", dir, in}
	if version != "" {
		args = append(args, "--version", version)
	}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	return args
}

// Write has LanceDB write rec into the dataset dir (an absolute path ending
// in .lance). version is the data storage version of a new dataset ("2.0",
// "2.1"; "" for LanceDB's default); mode is "create" (the default when ""),
// "append" or "overwrite". The batch reaches LanceDB's core unchanged.
func (o *Oracle) Write(t testing.TB, dir string, rec arrow.RecordBatch, version, mode string) {
	t.Helper()
	o.must(t, writeArgs(dir, writeIPC(t, rec, false), version, mode)...)
}

// WriteOpts are the settings of WriteWith.
type WriteOpts struct {
	Version string            // data storage version of a new dataset ("2.0", "2.1")
	Mode    string            // "create" (default), "append", "overwrite"
	Options map[string]string // LanceDB storage options, e.g. new_table_enable_v2_manifest_paths=false
}

// WriteWith is Write with LanceDB storage options.
func (o *Oracle) WriteWith(t testing.TB, dir string, rec arrow.RecordBatch, opts WriteOpts) {
	t.Helper()
	args := writeArgs(dir, writeIPC(t, rec, false), opts.Version, opts.Mode)
	keys := make([]string, 0, len(opts.Options))
	for k := range opts.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--option", k+"="+opts.Options[k])
	}
	o.must(t, args...)
}

// WriteErr is Write returning LanceDB's error instead of failing the test.
func (o *Oracle) WriteErr(t testing.TB, dir string, rec arrow.RecordBatch, version, mode string) error {
	t.Helper()
	_, err := o.Run(writeArgs(dir, writeIPC(t, rec, false), version, mode)...)
	return err
}

// WriteViaJS writes like Write but through LanceDB's public JavaScript API:
// the JavaScript Arrow library (apache-arrow 18.1.0) decodes the batch and
// encodes it again before LanceDB sees it. TestJSArrowPaths checks every type
// of its sample both ways (WriteViaJS, ReadOpts.ViaJS): int8-64, uint8-64,
// float32/64, bool, utf8, large_utf8, binary, large_binary,
// fixed_size_binary, date32/64, timestamps (s/us/ns, with and without zone),
// decimal128, list, fixed_size_list<float32>, struct, dictionary<int32,utf8>
// all come back unchanged, nulls included. The care needed is elsewhere: the
// data must be built with the apache-arrow instance LanceDB itself loads (the
// CommonJS build; oracle.mjs uses createRequire for it). Tables from the ES
// module build fail LanceDB's sanitizer ("Table and inner RecordBatch schemas
// must be equivalent"), which also rebuilds types by id and refuses
// large_utf8 ("Unrecognized type id in schema: 20").
func (o *Oracle) WriteViaJS(t testing.TB, dir string, rec arrow.RecordBatch, version, mode string) error {
	t.Helper()
	_, err := o.Run(writeArgs(dir, writeIPC(t, rec, true), version, mode)...)
	return err
}

// ReadOpts selects what Read returns. Zero values mean: every column, every
// row, the latest version, no row ids.
type ReadOpts struct {
	Columns []string
	Where   string // SQL filter
	Limit   int
	At      uint64 // a version to read instead of the latest
	RowID   bool   // add LanceDB's _rowid column
	// ViaJS reads through the public toArrow() path: the JavaScript Arrow
	// library decodes the result and encodes it again.
	ViaJS bool
}

func readArgs(dir, out string, opts ReadOpts) []string {
	args := []string{"read", dir, out}
	if len(opts.Columns) > 0 {
		args = append(args, "--columns", strings.Join(opts.Columns, ","))
	}
	if opts.Where != "" {
		args = append(args, "--where", opts.Where)
	}
	if opts.Limit > 0 {
		args = append(args, "--limit", strconv.Itoa(opts.Limit))
	}
	if opts.At > 0 {
		args = append(args, "--at", strconv.FormatUint(opts.At, 10))
	}
	if opts.RowID {
		args = append(args, "--row-id")
	}
	if opts.ViaJS {
		args = append(args, "--js")
	}
	return args
}

// Read returns what LanceDB's query returns for the dataset, in its order.
// The caller releases the table.
func (o *Oracle) Read(t testing.TB, dir string, opts ReadOpts) arrow.Table {
	t.Helper()
	tbl, err := o.ReadErr(t, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// ReadErr is Read returning LanceDB's error instead of failing the test.
func (o *Oracle) ReadErr(t testing.TB, dir string, opts ReadOpts) (arrow.Table, error) {
	t.Helper()
	out := tempFile(t, ".arrows")
	if _, err := o.Run(readArgs(dir, out, opts)...); err != nil {
		return nil, err
	}
	return ReadStream(out)
}

// Count returns LanceDB's countRows, filtered by the SQL where when not "".
func (o *Oracle) Count(t testing.TB, dir, where string) int64 {
	t.Helper()
	return o.CountAt(t, dir, where, 0)
}

// CountAt is Count at a given version (0: the latest).
func (o *Oracle) CountAt(t testing.TB, dir, where string, version uint64) int64 {
	t.Helper()
	args := []string{"count", dir}
	if where != "" {
		args = append(args, "--where", where)
	}
	if version > 0 {
		args = append(args, "--at", strconv.FormatUint(version, 10))
	}
	out := o.must(t, args...)
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("oracle count: %q: %v", out, err)
	}
	return n
}

// Update sets columns to SQL expressions (column name -> expression) in the
// rows where matches (every row when where is "").
func (o *Oracle) Update(t testing.TB, dir, where string, set map[string]string) {
	t.Helper()
	if len(set) == 0 {
		t.Fatal("oracle update: nothing to set")
	}
	args := []string{"update", dir}
	if where != "" {
		args = append(args, "--where", where)
	}
	cols := make([]string, 0, len(set))
	for c := range set {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		args = append(args, "--set", c+"="+set[c])
	}
	o.must(t, args...)
}

// Delete deletes the rows where matches.
func (o *Oracle) Delete(t testing.TB, dir, where string) {
	t.Helper()
	o.must(t, "delete", dir, "--where", where)
}

// SearchOpts describes a vector search.
type SearchOpts struct {
	Column   string // the vector column ("" lets LanceDB pick)
	Vector   []float32
	K        int    // 10 when 0
	Distance string // "l2" (default), "cosine", "dot"
	Where    string
	Columns  []string
}

// Search returns LanceDB's nearest neighbours with their _distance column.
// The caller releases the table.
func (o *Oracle) Search(t testing.TB, dir string, opts SearchOpts) arrow.Table {
	t.Helper()
	vec, err := json.Marshal(opts.Vector)
	if err != nil {
		t.Fatal(err)
	}
	out := tempFile(t, ".arrows")
	args := []string{"search", dir, out, "--vector", string(vec)}
	if opts.Column != "" {
		args = append(args, "--column", opts.Column)
	}
	if opts.K > 0 {
		args = append(args, "--k", strconv.Itoa(opts.K))
	}
	if opts.Distance != "" {
		args = append(args, "--distance", opts.Distance)
	}
	if opts.Where != "" {
		args = append(args, "--where", opts.Where)
	}
	if len(opts.Columns) > 0 {
		args = append(args, "--columns", strings.Join(opts.Columns, ","))
	}
	o.must(t, args...)
	tbl, err := ReadStream(out)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// Version is one entry of LanceDB's listVersions.
type Version struct {
	Version   uint64            `json:"version"`
	Timestamp time.Time         `json:"timestamp"`
	Metadata  map[string]string `json:"metadata"`
}

// Versions returns LanceDB's listVersions for the dataset, oldest first.
func (o *Oracle) Versions(t testing.TB, dir string) []Version {
	t.Helper()
	out := o.must(t, "versions", dir)
	var vs []Version
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("oracle versions: %q: %v", out, err)
	}
	return vs
}

// AddColumns adds columns computed by SQL expressions (name -> expression);
// LanceDB writes a new data file per fragment (a Merge transaction).
func (o *Oracle) AddColumns(t testing.TB, dir string, cols map[string]string) {
	t.Helper()
	o.must(t, withSets([]string{"add-columns", dir}, cols)...)
}

// withSets appends --set name=value for each entry of sets, by name.
func withSets(args []string, sets map[string]string) []string {
	names := make([]string, 0, len(sets))
	for c := range sets {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		args = append(args, "--set", c+"="+sets[c])
	}
	return args
}

// AlterColumns gives columns new data types (path -> int64, float64,
// int32 or float32): LanceDB writes each cast column as a new data file
// per fragment under a new field id.
func (o *Oracle) AlterColumns(t testing.TB, dir string, types map[string]string) {
	t.Helper()
	o.must(t, withSets([]string{"alter-columns", dir}, types)...)
}

// RenameColumn has LanceDB rename column from to to.
func (o *Oracle) RenameColumn(t testing.TB, dir, from, to string) {
	t.Helper()
	o.must(t, "alter-columns", dir, "--set", from+"=rename:"+to)
}

// AddNullColumn adds a nullable column of type typ (int64, float64 or
// utf8) without data: no data file holds it, every row reads null.
func (o *Oracle) AddNullColumn(t testing.TB, dir, name, typ string) {
	t.Helper()
	o.must(t, "add-columns", dir, "--field", name+"="+typ)
}

// DropColumns drops columns (a Project transaction).
func (o *Oracle) DropColumns(t testing.TB, dir string, cols ...string) {
	t.Helper()
	o.must(t, "drop-columns", dir, "--columns", strings.Join(cols, ","))
}

// Held is a LanceDB write prepared against the version LanceDB opened,
// performed when Finish is called.
type Held struct {
	// Version is the version LanceDB opened (its transaction's read version).
	Version uint64
	cmd     *exec.Cmd
	stdin   interface{ Close() error }
	stderr  *bytes.Buffer
	release func()
	cancel  context.CancelFunc
}

// HeldAppend is the Held of StartAppend.
type HeldAppend = Held

// StartAppend starts a LanceDB append of rec to dir that opens the dataset
// and then waits: it returns once LanceDB has opened it. The test may then
// commit other versions; Finish lets LanceDB commit its append (which must
// rebase on them) and waits for it.
func (o *Oracle) StartAppend(t testing.TB, dir string, rec arrow.RecordBatch) *Held {
	t.Helper()
	return o.startHeld(t, "write", dir, writeIPC(t, rec, false), "--mode", "append", "--hold")
}

// StartDelete is StartAppend for a delete of the rows where matches.
func (o *Oracle) StartDelete(t testing.TB, dir, where string) *Held {
	t.Helper()
	return o.startHeld(t, "delete", dir, "--where", where, "--hold")
}

func (o *Oracle) startHeld(t testing.TB, args ...string) *Held {
	t.Helper()
	slots <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	h := &Held{stderr: &bytes.Buffer{}, release: func() { <-slots }, cancel: cancel}
	h.cmd = exec.CommandContext(ctx, o.node, append([]string{o.script}, args...)...)
	h.cmd.Env = append(os.Environ(), "LANCEDB_LOG=error", "RUST_LOG=error")
	h.cmd.Stderr = h.stderr
	stdin, err := h.cmd.StdinPipe()
	if err != nil {
		h.done()
		t.Fatal(err)
	}
	h.stdin = stdin
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		h.done()
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		h.done()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
			h.done()
		}
	})
	var line []byte
	buf := make([]byte, 1)
	for {
		n, err := stdout.Read(buf)
		if n == 1 && buf[0] == '\n' {
			break
		}
		if n == 1 {
			line = append(line, buf[0])
		}
		if err != nil {
			t.Fatalf("oracle held %s: %v: %s", args[0], err, h.stderr.String())
		}
	}
	v, ok := strings.CutPrefix(string(line), "opened ")
	if !ok {
		t.Fatalf("oracle held %s: got %q", args[0], line)
	}
	if h.Version, err = strconv.ParseUint(v, 10, 64); err != nil {
		t.Fatalf("oracle held %s: got %q", args[0], line)
	}
	return h
}

func (h *Held) done() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
	h.cancel()
}

// Finish lets the write commit and returns LanceDB's error, if any.
func (h *Held) Finish() error {
	defer h.done()
	if err := h.stdin.Close(); err != nil {
		return err
	}
	if err := h.cmd.Wait(); err != nil {
		return fmt.Errorf("oracle held write: %w: %s", err, strings.TrimSpace(h.stderr.String()))
	}
	return nil
}

// CreateIndex has LanceDB index a column: kind is "btree" (the default when
// ""), "bitmap" or "ivf_pq" (2 partitions, 2 sub-vectors).
func (o *Oracle) CreateIndex(t testing.TB, dir, column, kind string) {
	t.Helper()
	args := []string{"create-index", dir, "--column", column}
	if kind != "" {
		args = append(args, "--type", kind)
	}
	o.must(t, args...)
}

// IndexInfo is one index as LanceDB lists it, with its statistics.
type IndexInfo struct {
	Name      string   `json:"name"`
	IndexType string   `json:"indexType"`
	Columns   []string `json:"columns"`
	Stats     struct {
		NumIndexedRows   int64 `json:"numIndexedRows"`
		NumUnindexedRows int64 `json:"numUnindexedRows"`
	} `json:"stats"`
}

// Indices is LanceDB's listIndices of the dataset in dir.
func (o *Oracle) Indices(t testing.TB, dir string) []IndexInfo {
	t.Helper()
	var out []IndexInfo
	if err := json.Unmarshal([]byte(o.must(t, "indices", dir)), &out); err != nil {
		t.Fatalf("oracle indices: %v", err)
	}
	return out
}

// Clone has LanceDB make dir a shallow clone of the dataset source (version
// at, or the latest when 0): a manifest whose files live under source,
// named through base paths.
func (o *Oracle) Clone(t testing.TB, dir, source string, at uint64) {
	t.Helper()
	args := []string{"clone", dir, source}
	if at > 0 {
		args = append(args, "--at", strconv.FormatUint(at, 10))
	}
	o.must(t, args...)
}

// Optimize has LanceDB compact the dataset (a Rewrite transaction that
// materializes deletions); old versions stay.
func (o *Oracle) Optimize(t testing.TB, dir string) {
	t.Helper()
	o.must(t, "optimize", dir)
}

// OptimizeCleanup is Optimize that also removes, as LanceDB's cleanup
// does, every file older than now that the latest version does not
// reference (unverified ones included).
func (o *Oracle) OptimizeCleanup(t testing.TB, dir string) {
	t.Helper()
	o.must(t, "optimize", dir, "--cleanup")
}
