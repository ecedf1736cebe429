// Package index builds and uses a table's secondary indexes: scalar
// (BTREE, BITMAP) indexes that narrow filtered reads, IVF_FLAT vector
// indexes that narrow nearest-neighbour searches, and INVERTED full-text
// indexes scored with BM25.
//
// An index is per fragment, and per line of versions: main's live in the
// table folder, a branch's in its folder tree/{b}/ (table.LineKey), so a
// branch starts with no indexes and its commits extend only its own. Its
// definition lives at _indices/<name>.json in that folder: column, type, parameters, the uuid of this build
// and the fragments it covers (id and data file path). Each covered
// fragment has its own file _indices/<uuid>/frag-<id>.idx, written before
// the definition names it and never changed (data files never change, so
// neither does what is derived from them). A query uses the index for a
// fragment only when the definition covers that fragment id with the same
// data file; every other fragment — appended after the build, or
// rewritten by update, delete or compaction (a rewritten fragment gets a
// new id) — is read unindexed. Extend indexes the uncovered fragments of
// the latest version and adds them to the definition; create of an
// existing name builds afresh under a new uuid and then removes the old
// files.
package index

import (
	"bytes"
	"container/list"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mvq-dev/mvq/table"
)

// Index types.
const (
	BTree    = "BTREE"
	Bitmap   = "BITMAP"
	IVFFlat  = "IVF_FLAT"
	Inverted = "INVERTED"
)

// FormatVersion is the on-disk format of the index files.
const FormatVersion = 1

const dir = "_indices/"

// Covered is one fragment an index covers.
type Covered struct {
	ID    uint32 `json:"id"`
	Path  string `json:"path"` // the data file indexed
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"` // size of the index file
}

// Meta is an index definition (_indices/<name>.json).
type Meta struct {
	Name      string    `json:"name"`
	UUID      string    `json:"uuid"`
	Column    string    `json:"column"`
	Type      string    `json:"index_type"`
	Metric    string    `json:"distance_type,omitempty"`
	Params    Params    `json:"params"`
	Version   uint64    `json:"dataset_version"` // table version built from
	CreatedAt time.Time `json:"created_at"`
	Format    int       `json:"index_version"`
	Fragments []Covered `json:"fragments"`
	// CentroidBytes is the size of the IVF centroids file.
	CentroidBytes int64 `json:"centroid_bytes,omitempty"`

	kind byte // scalar key kind, set while building
}

// Params are the build parameters an index keeps.
type Params struct {
	Partitions    int `json:"num_partitions,omitempty"`
	MaxIterations int `json:"max_iterations,omitempty"`
	SampleRate    int `json:"sample_rate,omitempty"`
}

func metaKey(t *table.Table, name string) string { return t.LineKey(dir + name + ".json") }
func fileKey(t *table.Table, uuid string, frag uint32) string {
	return t.LineKey(fmt.Sprintf("%s%s/frag-%d.idx", dir, uuid, frag))
}
func centroidKey(t *table.Table, uuid string) string {
	return t.LineKey(dir + uuid + "/centroids.idx")
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// checkName refuses names that are not one path segment.
func checkName(name string) error {
	if !nameRE.MatchString(name) {
		return table.Errorf(table.CodeInvalidInput, "name: %q is not an index name (letters, digits, _ . -; at most 128; not starting with . or -)", name)
	}
	return nil
}

// List returns the table's index definitions, by name.
func List(ctx context.Context, t *table.Table) ([]*Meta, error) {
	wh := t.Catalog().Warehouse()
	entries, err := wh.List(ctx, t.LineKey(dir))
	if err != nil {
		return nil, err
	}
	var out []*Meta
	for _, e := range entries {
		if e.IsDir || !strings.HasSuffix(e.Name, ".json") {
			continue
		}
		m, err := Load(ctx, t, strings.TrimSuffix(e.Name, ".json"))
		if table.ErrorCode(err) == table.CodeTableIndexNotFound {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Load reads the definition of index name.
func Load(ctx context.Context, t *table.Table, name string) (*Meta, error) {
	if checkName(name) != nil {
		return nil, table.Errorf(table.CodeTableIndexNotFound, "index %q not found", name)
	}
	data, err := t.Catalog().Warehouse().Read(ctx, metaKey(t, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, table.Errorf(table.CodeTableIndexNotFound, "index %q not found on table %s", name, table.JoinID(t.ID()))
	}
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &table.Error{Code: table.CodeInvalidTableState, Message: fmt.Sprintf("index %q: unreadable definition", name), Err: err}
	}
	return &m, nil
}

func saveMeta(ctx context.Context, t *table.Table, m *Meta) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.Catalog().Warehouse().Write(ctx, metaKey(t, m.Name), data)
}

// Drop removes index name: the definition first (queries stop using it at
// once), then its files.
func Drop(ctx context.Context, t *table.Table, name string) error {
	m, err := Load(ctx, t, name)
	if err != nil {
		return err
	}
	wh := t.Catalog().Warehouse()
	if err := wh.Delete(ctx, metaKey(t, name)); err != nil {
		return err
	}
	return wh.DeletePrefix(ctx, t.LineKey(dir+m.UUID+"/"))
}

// covers answers the covered entry of fragment f, if the index covers
// that exact data file.
func (m *Meta) covers(f table.Fragment) (Covered, bool) {
	for _, c := range m.Fragments {
		if c.ID == f.ID && c.Path == f.Path {
			return c, true
		}
	}
	return Covered{}, false
}

// Coverage counts the rows of version man the index covers and not.
func (m *Meta) Coverage(man *table.Manifest) (indexed, unindexed int64) {
	for _, f := range man.Fragments {
		if _, ok := m.covers(f); ok {
			indexed += f.Rows
		} else {
			unindexed += f.Rows
		}
	}
	return indexed, unindexed
}

// SizeBytes is the total size of the index files.
func (m *Meta) SizeBytes() int64 {
	n := m.CentroidBytes
	for _, c := range m.Fragments {
		n += c.Bytes
	}
	return n
}

// encode and decode are the index file codec (gob, with a format tag).
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(FormatVersion); err != nil {
		return nil, err
	}
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decode(data []byte, v any) error {
	r := bytes.NewReader(data)
	var format int
	if err := gob.NewDecoder(r).Decode(&format); err != nil {
		return err
	}
	if format != FormatVersion {
		return fmt.Errorf("index file format %d, want %d", format, FormatVersion)
	}
	return gob.NewDecoder(r).Decode(v)
}

// cache keeps decoded index files by warehouse key (files never change),
// bounded in approximate bytes, least recently used out first.
type cache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[string]*list.Element
}

type cacheItem struct {
	key  string
	val  any
	size int64
}

var files = &cache{max: 1 << 30, ll: list.New(), items: map[string]*list.Element{}}

func (c *cache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheItem).val, true
	}
	return nil, false
}

func (c *cache) put(key string, val any, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.ll.PushFront(&cacheItem{key, val, size})
	c.size += size
	for c.size > c.max && c.ll.Len() > 1 {
		e := c.ll.Back()
		it := e.Value.(*cacheItem)
		c.ll.Remove(e)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

// readFile loads and decodes an index file into a new value made by mk,
// through the cache. A missing file (the index was replaced or dropped
// while the caller held its definition) is found=false.
func readFile[T any](ctx context.Context, t *table.Table, key string) (*T, bool, error) {
	if v, ok := files.get(key); ok {
		return v.(*T), true, nil
	}
	data, err := t.Catalog().Warehouse().Read(ctx, key)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v := new(T)
	if err := decode(data, v); err != nil {
		return nil, false, &table.Error{Code: table.CodeInvalidTableState, Message: "index file unreadable", Err: err}
	}
	files.put(key, v, int64(len(data))*2)
	return v, true, nil
}
