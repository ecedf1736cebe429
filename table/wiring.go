package table

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// Indexes is how a catalog uses the tables' indexes; package index
// provides it (index.Maintenance()), and whoever builds the catalog
// passes it in Options.Indexes. A catalog without it (the zero Indexes)
// reads and writes correctly by scanning, but never narrows a read by an
// index nor keeps indexes up to date, so creating an index on it is
// refused (package index checks HasIndexMaintenance).
type Indexes struct {
	// Select narrows filtered reads, count_rows and the match counts of
	// update and delete.
	Select RowSelector
	// Maintain brings a table's indexes up to date after each commit of
	// this catalog.
	Maintain IndexMaintainer
	// KeyIndex answers the matches of a merge_insert with use_index.
	KeyIndex KeyIndexFinder
}

// Hooks are the checks and rewrites a package that keeps its own state
// in tables installs on a catalog with Use (package refresh installs its
// own on the catalog an engine is built over). Any field may be nil.
type Hooks struct {
	// Name identifies the hooks: Use with a name already used replaces
	// the hooks installed under it.
	Name string
	// SchemaHook runs in every schema-evolution commit.
	SchemaHook SchemaHook
	// WriteGuard runs before every direct write.
	WriteGuard WriteGuard
	// Rewriters: Compact passes each property a table has that is a key
	// here through its rewriter along with the merges, in the same
	// commit. A property without one is carried as it is.
	Rewriters map[string]PropertyRewriter
}

// wiring is what a catalog was given to use: its indexes, and the hooks
// of other packages in the order they were first installed.
type wiring struct {
	indexes atomic.Pointer[Indexes]
	mu      sync.Mutex
	hooks   atomic.Pointer[[]Hooks]
}

// UseIndexes replaces the catalog's Indexes (Options.Indexes); tests
// turn parts of it off to compare with a plain scan or to commit as a
// process that does not maintain indexes.
func (c *Catalog) UseIndexes(ix Indexes) { c.wiring.indexes.Store(&ix) }

// Indexes returns the catalog's Indexes.
func (c *Catalog) Indexes() Indexes {
	if ix := c.wiring.indexes.Load(); ix != nil {
		return *ix
	}
	return Indexes{}
}

// HasIndexMaintenance reports whether the catalog's commits keep indexes
// up to date (Options.Indexes has a Maintain).
func (c *Catalog) HasIndexMaintenance() bool { return c.Indexes().Maintain != nil }

// Use installs h on the catalog; hooks installed under h.Name before are
// replaced in place, so installing the same hooks again changes nothing.
func (c *Catalog) Use(h Hooks) {
	c.wiring.mu.Lock()
	defer c.wiring.mu.Unlock()
	var list []Hooks
	if p := c.wiring.hooks.Load(); p != nil {
		list = slices.Clone(*p)
	}
	i := slices.IndexFunc(list, func(o Hooks) bool { return o.Name == h.Name })
	if i < 0 {
		list = append(list, h)
	} else {
		list[i] = h
	}
	c.wiring.hooks.Store(&list)
}

// installed returns the hooks installed on the catalog, in order.
func (c *Catalog) installed() []Hooks {
	if p := c.wiring.hooks.Load(); p != nil {
		return *p
	}
	return nil
}

// runSchemaHooks runs the installed schema hooks on a schema change.
func (c *Catalog) runSchemaHooks(next *Manifest, ch SchemaChange) error {
	for _, h := range c.installed() {
		if h.SchemaHook == nil {
			continue
		}
		if err := h.SchemaHook(next, ch); err != nil {
			return err
		}
	}
	return nil
}

// guardWrite runs the installed write guards for op on table id at
// version m.
func (c *Catalog) guardWrite(id []string, m *Manifest, op string) error {
	// A Lance writer's own commit through version/create passes as it is
	// (stageVersion refuses only what it would re-encode); a rename moves
	// the folder whole.
	if op != "version create" && op != "rename" {
		if err := refuseStableRowIDs(id, m, op); err != nil {
			return err
		}
	}
	for _, h := range c.installed() {
		if h.WriteGuard == nil {
			continue
		}
		if err := h.WriteGuard(id, m, op); err != nil {
			return err
		}
	}
	return nil
}

// propertyRewriter returns the rewriter installed for property key.
func (c *Catalog) propertyRewriter(key string) (PropertyRewriter, bool) {
	for _, h := range c.installed() {
		if fn, ok := h.Rewriters[key]; ok && fn != nil {
			return fn, true
		}
	}
	return nil, false
}

// maintainIndexes runs the catalog's index maintainer, if any, on a
// commit of m to t.
func (c *Catalog) maintainIndexes(ctx context.Context, t *Table, m *Manifest) {
	if fn := c.Indexes().Maintain; fn != nil && m != nil {
		fn(context.WithoutCancel(ctx), t, m)
	}
}
