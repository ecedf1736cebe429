// Package warehouse is the object store under a catalog: file://, mem://,
// s3:// and gs:// roots, with the atomic put-if-not-exists the commit
// protocol rests on.
package warehouse

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // gs://
	"gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob" // s3://
	"gocloud.dev/gcerrors"
)

// Default is the warehouse root used when MVQ_WAREHOUSE is unset.
const Default = "file://./warehouse"

// ErrExists is returned by PutIfNotExists when the key is already taken.
var ErrExists = errors.New("object already exists")

// Warehouse is the root of every namespace, table and view. All keys are
// slash-separated and relative to the root.
type Warehouse struct {
	uri    string
	bucket *blob.Bucket
	// dir is the absolute root directory for file:// warehouses, where
	// put-if-not-exists uses link(2) (fileblob's IfNotExist is a
	// check-then-rename and is not atomic across processes).
	dir string
	// lists counts List calls (tests check hot paths make none).
	lists atomic.Int64
	// dirs keeps listings of unchanged folders (dircache.go); nil on
	// other stores and file systems not known to be local.
	dirs *dirCache
}

// Open opens a warehouse root: file://path (relative paths are
// resolved against the working directory; the directory is created),
// mem:// (process-local, for tests and dev), s3://bucket/prefix and
// gs://bucket/prefix (through gocloud.dev/blob, credentials from the
// environment).
func Open(ctx context.Context, uri string) (*Warehouse, error) {
	if uri == "" {
		uri = Default
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return nil, fmt.Errorf("warehouse %q: want scheme://path (file, mem, s3, gs)", uri)
	}
	switch scheme {
	case "file":
		p := rest
		if q := strings.IndexByte(p, '?'); q >= 0 {
			p = p[:q]
		}
		if p == "" {
			return nil, fmt.Errorf("warehouse %q: empty path", uri)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("warehouse %q: %w", uri, err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("warehouse %q: %w", uri, err)
		}
		b, err := fileblob.OpenBucket(abs, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
		if err != nil {
			return nil, fmt.Errorf("warehouse %q: %w", uri, err)
		}
		return &Warehouse{uri: "file://" + abs, bucket: b, dir: abs, dirs: newDirCache(abs)}, nil
	case "mem":
		return &Warehouse{uri: uri, bucket: memblob.OpenBucket(nil)}, nil
	case "s3", "gs":
		u, err := url.Parse(uri)
		if err != nil {
			return nil, fmt.Errorf("warehouse %q: %w", uri, err)
		}
		prefix := strings.Trim(u.Path, "/")
		u.Path = ""
		b, err := blob.OpenBucket(ctx, u.String())
		if err != nil {
			return nil, fmt.Errorf("warehouse %q: %w", uri, err)
		}
		if prefix != "" {
			b = blob.PrefixedBucket(b, prefix+"/")
		}
		return &Warehouse{uri: uri, bucket: b}, nil
	default:
		return nil, fmt.Errorf("warehouse %q: unsupported scheme %q (want file, mem, s3 or gs)", uri, scheme)
	}
}

// URI is the warehouse root as opened (file:// paths made absolute).
func (w *Warehouse) URI() string { return w.uri }

// Close releases the bucket.
func (w *Warehouse) Close() error { return w.bucket.Close() }

// Root is the URI of the warehouse root as clients address objects in
// it: URI without the query of an s3:// or gs:// warehouse (its endpoint,
// region and addressing are how mvq reaches the store, not part of an
// object's name; a Lance client gets them as storage options).
func (w *Warehouse) Root() string {
	root := w.uri
	if strings.HasPrefix(root, "s3://") || strings.HasPrefix(root, "gs://") {
		root, _, _ = strings.Cut(root, "?")
	}
	return strings.TrimRight(root, "/")
}

// Location returns the full URI of key (under Root).
func (w *Warehouse) Location(key string) string {
	return w.Root() + "/" + key
}

// Read returns the whole object; a missing key wraps os.ErrNotExist.
func (w *Warehouse) Read(ctx context.Context, key string) ([]byte, error) {
	if p, ok := w.plainPath(key); ok {
		// A file:// key that names its file as it is (no escaping):
		// one open and read, where fileblob stats the file, looks for
		// its attributes sidecar and opens it.
		b, err := os.ReadFile(p)
		if errors.Is(err, syscall.EISDIR) {
			err = fmt.Errorf("%w: %v", os.ErrNotExist, err) // fileblob's answer for a folder
		}
		if err != nil {
			return nil, w.Rel(err)
		}
		return b, nil
	}
	b, err := w.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, w.Rel(notExist(err))
	}
	return b, nil
}

// Open opens an object for random access reads.
func (w *Warehouse) Open(ctx context.Context, key string) (*blob.Reader, error) {
	r, err := w.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, w.Rel(notExist(err))
	}
	return r, nil
}

// Write stores an object; readers see either nothing or all of it.
func (w *Warehouse) Write(ctx context.Context, key string, data []byte) error {
	return w.Rel(w.bucket.WriteAll(ctx, key, data, nil))
}

// WriteFrom streams an object from fn; the object appears only when fn
// returns nil, durable.
func (w *Warehouse) WriteFrom(ctx context.Context, key string, fn func(io.Writer) error) error {
	if err := w.WriteFromUnsynced(ctx, key, fn); err != nil {
		return err
	}
	return w.Sync([]string{key})
}

// WriteFromUnsynced is WriteFrom that leaves a file:// object unsynced:
// the caller makes it durable with Sync before anything names it. A
// writer that holds scarce CPU while it encodes syncs after it gives the
// CPU up (a sync waits on the disk).
func (w *Warehouse) WriteFromUnsynced(ctx context.Context, key string, fn func(io.Writer) error) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wr, err := w.bucket.NewWriter(cctx, key, nil)
	if err != nil {
		return w.Rel(err)
	}
	if err := fn(wr); err != nil {
		cancel() // abort: the object is not created
		_ = wr.Close()
		return w.Rel(err)
	}
	return w.Rel(wr.Close())
}

// Sync makes the file:// objects keys, written with WriteFromUnsynced,
// durable: their content and their names (fileblob renames a temporary
// file into place and syncs neither), each file, then each folder holding
// them once. A data file must be on disk before a manifest naming it is,
// and the manifest is synced before it is linked (linkIfNotExists).
// Object stores are durable when the PUT returns: nothing to do.
func (w *Warehouse) Sync(keys []string) error { return w.sync(keys, false) }

// SyncDropBehind is Sync that then drops the files' pages from the
// kernel's page cache (they are clean once synced): for output its writer
// does not read back, such as a work item's files. Kept, those pages
// would crowd out pages a reader wants (the source being read), and each
// new file would take pages the kernel has not handed out for a while;
// dropped, the next files reuse them. On a 40k-document chunker refresh
// this took the worker's system CPU from about 0.13 to 0.08 seconds.
// Where the kernel cannot drop pages (not Linux, tmpfs) it is Sync.
func (w *Warehouse) SyncDropBehind(keys []string) error { return w.sync(keys, true) }

func (w *Warehouse) sync(keys []string, drop bool) error {
	if w.dir == "" {
		return nil
	}
	dirs := map[string]bool{}
	for _, key := range keys {
		final := filepath.Join(w.dir, filepath.FromSlash(key))
		if err := syncFile(final, drop); err != nil {
			return w.Rel(err)
		}
		dirs[filepath.Dir(final)] = true
	}
	for dir := range dirs {
		if err := syncFile(dir, false); err != nil {
			return w.Rel(err)
		}
	}
	return nil
}

// syncFile fsyncs a file or a directory; drop then drops the file's
// cached pages.
func syncFile(path string, drop bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if err == nil && drop {
		dropCached(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// PutIfNotExists creates key with data unless it exists; exactly one of any
// number of concurrent callers, in any number of processes, succeeds. The
// others get ErrExists. Readers never see a partial object.
func (w *Warehouse) PutIfNotExists(ctx context.Context, key string, data []byte) error {
	if w.dir != "" {
		return w.Rel(w.linkIfNotExists(key, data))
	}
	err := w.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{IfNotExist: true})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return ErrExists
	}
	return w.Rel(err)
}

// linkIfNotExists writes data to a temporary file beside the target and
// hard-links it into place: link(2) fails with EEXIST atomically.
func (w *Warehouse) linkIfNotExists(key string, data []byte) error {
	final := filepath.Join(w.dir, filepath.FromSlash(key))
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The temporary file lives outside the listed folders (a listing that
	// sees it could trip over it vanishing) but on the same filesystem.
	tmpDir := filepath.Join(w.dir, ".mvq-tmp")
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(tmpDir, filepath.Base(final)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return ErrExists
		}
		return err
	}
	// The new name itself, so a commit that answered success survives a
	// power loss.
	return syncFile(dir, false)
}

// ErrNoConditionalWrites is returned by CheckConditionalWrites for a
// store that accepts a second create-if-absent of the same key: on such a
// store two writers can both commit the same table version, so mvq
// refuses to run on it.
var ErrNoConditionalWrites = errors.New("the store does not honour conditional writes (PUT with If-None-Match: *): a second create of an existing object succeeded, so concurrent commits could overwrite each other")

// probeDir holds CheckConditionalWrites' objects; hidden from listings.
const probeDir = ".mvq-probe/"

// CheckConditionalWrites proves that PutIfNotExists is atomic here: it
// creates a fresh probe object twice and wants the second create refused.
// file:// (link(2)) and mem:// are checked by construction and return nil
// at once; object stores are probed (one small object, deleted after). It
// returns ErrNoConditionalWrites (wrapped with the warehouse URI) when the
// store ignores the condition, or the store's error when it cannot be
// reached.
func (w *Warehouse) CheckConditionalWrites(ctx context.Context) error {
	if w.dir != "" || strings.HasPrefix(w.uri, "mem://") {
		return nil
	}
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	key := probeDir + hex.EncodeToString(nonce[:])
	defer w.Delete(context.WithoutCancel(ctx), key)
	if err := w.PutIfNotExists(ctx, key, []byte("1")); err != nil {
		return fmt.Errorf("warehouse %s: conditional-write probe: %w", w.uri, err)
	}
	switch err := w.PutIfNotExists(ctx, key, []byte("2")); {
	case errors.Is(err, ErrExists):
		return nil
	case err == nil:
		return fmt.Errorf("warehouse %s: %w", w.uri, ErrNoConditionalWrites)
	default:
		return fmt.Errorf("warehouse %s: conditional-write probe: %w", w.uri, err)
	}
}

// Exists reports whether key exists.
func (w *Warehouse) Exists(ctx context.Context, key string) (bool, error) {
	ok, err := w.bucket.Exists(ctx, key)
	return ok, w.Rel(err)
}

// Size returns the size of an object.
func (w *Warehouse) Size(ctx context.Context, key string) (int64, error) {
	a, err := w.bucket.Attributes(ctx, key)
	if err != nil {
		return 0, w.Rel(notExist(err))
	}
	return a.Size, nil
}

// Delete removes key; a missing key is not an error.
func (w *Warehouse) Delete(ctx context.Context, key string) error {
	err := w.bucket.Delete(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil
	}
	return w.Rel(err)
}

// Entry is one item of a listing: a child object or a child "directory".
type Entry struct {
	Name    string // base name, without trailing slash
	IsDir   bool
	Size    int64
	ModTime time.Time
	MD5     []byte // content hash as listed, when the store has one (S3 ETag)
}

// List returns the direct children of prefix (a key ending in "/", or ""),
// sorted by name. Hidden entries (starting with ".") are skipped.
func (w *Warehouse) List(ctx context.Context, prefix string) ([]Entry, error) {
	for attempt := 0; ; attempt++ {
		out, err := w.list(ctx, prefix)
		// A local folder's listing stats each file it read: one removed
		// in between is not an error of the listing; list again.
		if err != nil && (gcerrors.Code(err) == gcerrors.NotFound || errors.Is(err, os.ErrNotExist)) && attempt < 5 {
			continue
		}
		return out, err
	}
}

func (w *Warehouse) list(ctx context.Context, prefix string) ([]Entry, error) {
	w.lists.Add(1)
	it := w.bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var out []Entry
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, w.Rel(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/")
		if name == "" || strings.HasPrefix(name, ".") {
			continue
		}
		out = append(out, Entry{Name: name, IsDir: obj.IsDir, Size: obj.Size, ModTime: obj.ModTime, MD5: obj.MD5})
	}
	return out, nil
}

// DeletePrefix removes every object under prefix.
func (w *Warehouse) DeletePrefix(ctx context.Context, prefix string) error {
	it := w.bucket.List(&blob.ListOptions{Prefix: prefix})
	for restarts := 0; ; {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		// A local folder's listing stats each file: one a writer removed
		// meanwhile (a temporary file renamed) restarts the listing.
		if err != nil && (gcerrors.Code(err) == gcerrors.NotFound || errors.Is(err, os.ErrNotExist)) && restarts < 5 {
			restarts++
			it = w.bucket.List(&blob.ListOptions{Prefix: prefix})
			continue
		}
		if err != nil {
			return w.Rel(err)
		}
		if err := w.Delete(ctx, obj.Key); err != nil && !errors.Is(err, os.ErrNotExist) && gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
	}
	if w.dir != "" {
		_ = os.RemoveAll(filepath.Join(w.dir, filepath.FromSlash(strings.TrimSuffix(prefix, "/"))))
	}
	return nil
}

// relErr is an error from the store with the warehouse root cut out of
// its message, so what users see names warehouse-relative keys, never the
// server's directories; errors.Is and errors.As see the cause.
type relErr struct {
	msg string
	err error
}

func (e *relErr) Error() string { return e.msg }
func (e *relErr) Unwrap() error { return e.err }

// Rel returns err with every mention of the warehouse root removed from
// its message (err itself when there is none; nil for nil).
func (w *Warehouse) Rel(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := msg
	for _, root := range w.roots() {
		out = strings.ReplaceAll(out, root, "")
	}
	if out == msg {
		return err
	}
	return &relErr{msg: out, err: err}
}

// roots are the spellings of the warehouse root in store errors, longest
// first.
func (w *Warehouse) roots() []string {
	uri := strings.TrimRight(w.uri, "/")
	out := []string{uri + "/", uri}
	if len(w.dir) > 1 {
		out = append(out, w.dir+string(filepath.Separator), w.dir)
	}
	return out
}

// plainPath is the file of key in a file:// warehouse when fileblob
// would store key under that very name: no escaped characters (control
// characters, "//", "../", a trailing "/"), not its sidecar suffix, and
// inside the root.
func (w *Warehouse) plainPath(key string) (string, bool) {
	if w.dir == "" || key == "" || key[0] == '/' || key[len(key)-1] == '/' ||
		strings.Contains(key, "//") || strings.Contains(key, "../") || strings.HasSuffix(key, ".attrs") {
		return "", false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 32 || key[i] == '\\' {
			return "", false
		}
	}
	p := w.Path(key)
	if !strings.HasPrefix(p, w.dir+string(filepath.Separator)) {
		return "", false
	}
	return p, true
}

func notExist(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %v", os.ErrNotExist, err)
	}
	return err
}
