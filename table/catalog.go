package table

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/lru"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/table/internal/warehouse"
)

// Options tune how tables are written.
type Options struct {
	// MaxRowsPerFragment caps the rows of one data file written by create,
	// insert, update and delete. Default 131072.
	MaxRowsPerFragment int
	// RowGroupRows is the Parquet row group size. Default 65536.
	RowGroupRows int
	// Mem allocates Arrow buffers. Default memory.DefaultAllocator.
	Mem memory.Allocator
	// TxnTimeout is how long a batch transaction may take from its record
	// to its decision; past it, others recover it (txn.go). Default 30s.
	TxnTimeout time.Duration
	// SealGrace is how long a move waits after sealing a table before it
	// removes the source's manifests; a commit puts within half of it of
	// its listing, else lists again (seal.go). Default 1s.
	SealGrace time.Duration
	// StepHook, when set, is called at each named step of a batch commit
	// ("record", "marker-K", "manifest-K", "decided") and of a table move
	// ("move-started", "move-sealed", "move-copied"), on the committing
	// goroutine. Tests use it to act between steps or to pause a process
	// there and kill it; nil (production) skips it.
	StepHook func(step string)
	// DecodedCacheBytes bounds the catalog's cache of values decoded from
	// files that never change (index files, a fragment's vectors).
	// Default 3 GiB.
	DecodedCacheBytes int64
	// Indexes connects the catalog to the tables' indexes: whoever builds
	// the catalog passes index.Maintenance(). Without it reads scan and
	// commits leave indexes as they are, and creating an index is refused.
	Indexes Indexes
	// Format is the storage format of tables created and data files
	// written: FormatLance (Lance manifests and data files, which LanceDB
	// opens) or FormatParquet (JSON manifests and Parquet files, only mvq
	// reads them). Default FormatLance. An
	// existing table keeps the manifest format it has; every format is
	// read whatever this says.
	Format string
}

// Table formats (Options.Format).
const (
	FormatParquet = "parquet"
	FormatLance   = "lance"
)

func (o Options) withDefaults() Options {
	if o.MaxRowsPerFragment <= 0 {
		o.MaxRowsPerFragment = 131072
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 65536
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	if o.TxnTimeout <= 0 {
		o.TxnTimeout = 30 * time.Second
	}
	if o.SealGrace <= 0 {
		o.SealGrace = time.Second
	}
	if o.Format != FormatParquet {
		o.Format = FormatLance
	}
	if o.DecodedCacheBytes <= 0 {
		o.DecodedCacheBytes = 3 << 30
	}
	return o
}

// Catalog is the directory catalog over a warehouse: namespaces are folders
// holding a _namespace.json marker, a table is a folder name.lance/ with
// data/ and _versions/.
type Catalog struct {
	wh   *Warehouse
	sql  *duck.DB
	opts Options
	hook atomic.Pointer[CommitHook]
	// idents caches identities of latest versions (resolve_cache.go).
	idents  *lru.Cache[string, identityEntry]
	decoded *lru.Cache[string, any]
	// listed keeps the versions judged from a kept listing of a
	// _versions/ folder (latest.go).
	listed *lru.Cache[warehouse.Listed, []VersionFile]
	wiring wiring // Options.Indexes and the hooks installed with Use (wiring.go)
}

// CommitHook is told of every version this process commits to a table
// (insert, update, delete, restore, version create, overwrite, a view's
// refresh, a compaction): id, and the manifest committed. It runs after
// the commit, synchronously, with a context that is not cancelled with
// the request; it must not fail the commit, so it returns nothing (the
// hook logs its own errors). Auto-refresh is built on it.
type CommitHook func(ctx context.Context, id []string, m *Manifest)

// OnCommit installs fn as the catalog's commit hook (nil removes it); it
// replaces any earlier one.
func (c *Catalog) OnCommit(fn CommitHook) {
	if fn == nil {
		c.hook.Store(nil)
		return
	}
	c.hook.Store(&fn)
}

// committed runs the commit hook, if any.
func (c *Catalog) committed(ctx context.Context, id []string, m *Manifest) {
	c.maintainIndexes(ctx, c.handle(id), m)
	if h := c.hook.Load(); h != nil && m != nil {
		(*h)(context.WithoutCancel(ctx), append([]string(nil), id...), m)
	}
}

// NewCatalog returns a catalog over wh that evaluates SQL with db.
func NewCatalog(wh *Warehouse, db *duck.DB, opts Options) *Catalog {
	opts = opts.withDefaults()
	c := &Catalog{wh: wh, sql: db, opts: opts, decoded: lru.New[string, any](opts.DecodedCacheBytes),
		idents: lru.New[string, identityEntry](identsBytes), listed: lru.New[warehouse.Listed, []VersionFile](listedBytes)}
	c.UseIndexes(opts.Indexes)
	return c
}

// DecodedCache is the catalog's cache of values decoded from files that
// never change, keyed by the caller (a warehouse key, or one derived from
// a data file), bounded by Options.DecodedCacheBytes. Callers keep their
// keys apart and store one type per key.
func (c *Catalog) DecodedCache() *lru.Cache[string, any] { return c.decoded }

// SQL returns the catalog's SQL engine.
func (c *Catalog) SQL() *duck.DB { return c.sql }

// Warehouse returns the catalog's warehouse.
func (c *Catalog) Warehouse() *Warehouse { return c.wh }

// Options returns the catalog's effective options.
func (c *Catalog) Options() Options { return c.opts }

const namespaceMarker = "_namespace.json"

type namespaceDoc struct {
	Properties map[string]string `json:"properties,omitempty"`
}

// CreateNamespace creates ns under its parent. mode is "create" (default;
// an existing namespace is an error), "exist_ok" or "overwrite" (replaces
// the properties). The root always exists.
func (c *Catalog) CreateNamespace(ctx context.Context, ns []string, mode string, props map[string]string) error {
	if len(ns) == 0 {
		if strings.EqualFold(mode, "exist_ok") || strings.EqualFold(mode, "existok") {
			return nil
		}
		return errs.Errorf(errs.CodeNamespaceAlreadyExists, "the root namespace always exists")
	}
	if err := c.requireNamespace(ctx, ns[:len(ns)-1]); err != nil {
		return err
	}
	doc, _ := json.Marshal(namespaceDoc{Properties: props})
	key := namespaceKey(ns) + namespaceMarker
	switch strings.ToLower(mode) {
	case "", "create":
		err := c.wh.PutIfNotExists(ctx, key, doc)
		if errors.Is(err, ErrExists) {
			return errs.Errorf(errs.CodeNamespaceAlreadyExists, "namespace %s already exists", JoinID(ns))
		}
		return err
	case "exist_ok", "existok":
		err := c.wh.PutIfNotExists(ctx, key, doc)
		if errors.Is(err, ErrExists) {
			return nil
		}
		return err
	case "overwrite":
		return c.wh.Write(ctx, key, doc)
	default:
		return errs.Errorf(errs.CodeInvalidInput, "mode %q: want create, exist_ok or overwrite", mode)
	}
}

// NamespaceExists reports whether ns exists (the root always does).
func (c *Catalog) NamespaceExists(ctx context.Context, ns []string) (bool, error) {
	if len(ns) == 0 {
		return true, nil
	}
	return c.wh.Exists(ctx, namespaceKey(ns)+namespaceMarker)
}

func (c *Catalog) requireNamespace(ctx context.Context, ns []string) error {
	ok, err := c.NamespaceExists(ctx, ns)
	if err != nil {
		return err
	}
	if !ok {
		return errs.Errorf(errs.CodeNamespaceNotFound, "namespace %s not found", JoinID(ns))
	}
	return nil
}

// DescribeNamespace returns the properties of ns.
func (c *Catalog) DescribeNamespace(ctx context.Context, ns []string) (map[string]string, error) {
	if len(ns) == 0 {
		return map[string]string{}, nil
	}
	b, err := c.wh.Read(ctx, namespaceKey(ns)+namespaceMarker)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.Errorf(errs.CodeNamespaceNotFound, "namespace %s not found", JoinID(ns))
	}
	if err != nil {
		return nil, err
	}
	var doc namespaceDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "namespace marker is corrupt", Err: err}
	}
	if doc.Properties == nil {
		doc.Properties = map[string]string{}
	}
	return doc.Properties, nil
}

// children lists the child namespaces and tables of ns, sorted by name.
func (c *Catalog) children(ctx context.Context, ns []string) (namespaces, tables []string, err error) {
	entries, err := c.wh.List(ctx, namespaceKey(ns))
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDir {
			continue
		}
		if name, ok := strings.CutSuffix(e.Name, tableSuffix); ok {
			child := append(append([]string{}, ns...), name)
			if ok, _ := c.tableExists(ctx, child); ok {
				tables = append(tables, name)
			}
			continue
		}
		child := append(append([]string{}, ns...), e.Name)
		if ok, _ := c.NamespaceExists(ctx, child); ok {
			namespaces = append(namespaces, e.Name)
		}
	}
	sort.Strings(namespaces)
	sort.Strings(tables)
	return namespaces, tables, nil
}

// Page cuts a sorted name list after pageToken (the last name of the
// previous page) to at most limit names (0: no limit) and returns the next
// token ("" at the end).
func Page(names []string, pageToken string, limit int) ([]string, string) {
	start := 0
	if pageToken != "" {
		start = sort.SearchStrings(names, pageToken)
		if start < len(names) && names[start] == pageToken {
			start++
		}
	}
	names = names[start:]
	if limit > 0 && len(names) > limit {
		return names[:limit], names[limit-1]
	}
	if names == nil {
		names = []string{} // an empty page is [] in JSON, never null
	}
	return names, ""
}

// ListNamespaces lists the child namespaces of ns.
func (c *Catalog) ListNamespaces(ctx context.Context, ns []string) ([]string, error) {
	if err := c.requireNamespace(ctx, ns); err != nil {
		return nil, err
	}
	names, _, err := c.children(ctx, ns)
	return names, err
}

// ListTables lists the tables (and views) directly in ns.
func (c *Catalog) ListTables(ctx context.Context, ns []string) ([]string, error) {
	if err := c.requireNamespace(ctx, ns); err != nil {
		return nil, err
	}
	_, tables, err := c.children(ctx, ns)
	return tables, err
}

// DropNamespace removes ns. behavior "restrict" (default) refuses a
// namespace with children; "cascade" removes everything under it. mode
// "fail" (default) makes a missing namespace an error, "skip" does not.
func (c *Catalog) DropNamespace(ctx context.Context, ns []string, mode, behavior string) error {
	if len(ns) == 0 {
		return errs.Errorf(errs.CodeInvalidInput, "the root namespace cannot be dropped")
	}
	switch strings.ToLower(mode) {
	case "", "fail", "skip":
	default:
		return errs.Errorf(errs.CodeInvalidInput, "mode %q: want fail or skip", mode)
	}
	ok, err := c.NamespaceExists(ctx, ns)
	if err != nil {
		return err
	}
	if !ok {
		if strings.EqualFold(mode, "skip") {
			return nil
		}
		return errs.Errorf(errs.CodeNamespaceNotFound, "namespace %s not found", JoinID(ns))
	}
	switch strings.ToLower(behavior) {
	case "", "restrict":
		nss, tables, err := c.children(ctx, ns)
		if err != nil {
			return err
		}
		if len(nss)+len(tables) > 0 {
			return errs.Errorf(errs.CodeNamespaceNotEmpty, "namespace %s is not empty (%d namespaces, %d tables); use behavior=cascade", JoinID(ns), len(nss), len(tables))
		}
		if err := c.wh.Delete(ctx, namespaceKey(ns)+namespaceMarker); err != nil {
			return err
		}
		return c.wh.DeletePrefix(ctx, namespaceKey(ns))
	case "cascade":
		// Remove the marker first so the namespace disappears at once.
		if err := c.wh.Delete(ctx, namespaceKey(ns)+namespaceMarker); err != nil {
			return err
		}
		return c.wh.DeletePrefix(ctx, namespaceKey(ns))
	default:
		return errs.Errorf(errs.CodeInvalidInput, "behavior %q: want restrict or cascade", behavior)
	}
}
