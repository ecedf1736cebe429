// Package bounded is a map that holds at most a fixed number of entries,
// for the caches whose entries are checked when used (a view's decoded
// definition keyed by its version file, a table's identity, a job's view):
// past the bound, adding a key drops an arbitrary entry, which costs
// nothing to track and only ever costs a reload.
package bounded

import "sync"

// Map is safe for concurrent use; its zero value holds up to
// DefaultMax entries.
type Map[K comparable, V any] struct {
	// Max bounds the entries (0: DefaultMax). Set it before first use.
	Max int
	mu  sync.Mutex
	m   map[K]V
}

// DefaultMax is the bound of a Map whose Max is 0.
const DefaultMax = 4096

// Get returns the value of k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

// Put sets k to v, first dropping an arbitrary entry when k is new and
// the map is full.
func (m *Map[K, V]) Put(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[K]V{}
	}
	limit := m.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	if _, ok := m.m[k]; !ok && len(m.m) >= limit {
		for old := range m.m {
			delete(m.m, old)
			break
		}
	}
	m.m[k] = v
}

// Delete removes k.
func (m *Map[K, V]) Delete(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

// Len is the number of entries.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
