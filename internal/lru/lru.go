// Package lru is a cache bounded in bytes that drops the least recently
// used entries first, for values decoded from files that never change
// (index files, a fragment's vectors: Put) and for entries checked when
// used (a view's decoded definition keyed by its version file, a table's
// identity, a job's view: Set and Delete): an entry is never stale or is
// checked, so a miss only costs a reload.
package lru

import (
	"container/list"
	"sync"
)

// Cache is safe for concurrent use. Build it with New.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[K]*list.Element
}

type item[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

// New returns a cache holding up to maxBytes (as its callers size their
// entries).
func New[K comparable, V any](maxBytes int64) *Cache[K, V] {
	return &Cache[K, V]{max: maxBytes, ll: list.New(), items: map[K]*list.Element{}}
}

// Get returns the value of k and marks it most recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*item[K, V]).val, true
	}
	var zero V
	return zero, false
}

// Put keeps v, of size bytes, under k, dropping the least recently used
// entries while the cache is over its bound. A key already present keeps
// its value (entries never change); an entry larger than the whole bound
// is not kept.
func (c *Cache[K, V]) Put(k K, v V, size int64) {
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.add(k, v, size)
}

// Set keeps v, of size bytes, under k as Put does, replacing the value a
// key already present has (its entry is checked when used and may have
// been found stale); an entry larger than the whole bound is not kept
// and removes k.
func (c *Cache[K, V]) Set(k K, v V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(k)
	if size > c.max {
		return
	}
	c.add(k, v, size)
}

// Delete removes k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(k)
}

// Len answers the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// add puts a new entry in front, then drops the least recently used while
// over the bound. The caller holds mu.
func (c *Cache[K, V]) add(k K, v V, size int64) {
	c.items[k] = c.ll.PushFront(&item[K, V]{k, v, size})
	c.size += size
	for c.size > c.max {
		e := c.ll.Back()
		it := e.Value.(*item[K, V])
		c.ll.Remove(e)
		delete(c.items, it.key)
		c.size -= it.size
	}
}

// remove drops k's entry, if any. The caller holds mu.
func (c *Cache[K, V]) remove(k K) {
	if e, ok := c.items[k]; ok {
		c.ll.Remove(e)
		delete(c.items, k)
		c.size -= e.Value.(*item[K, V]).size
	}
}

// Bytes answers the size of the entries held.
func (c *Cache[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
