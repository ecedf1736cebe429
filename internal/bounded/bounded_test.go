package bounded

import (
	"fmt"
	"sync"
	"testing"
)

func TestMapBound(t *testing.T) {
	m := Map[string, int]{Max: 3}
	for i := range 10 {
		m.Put(fmt.Sprint(i), i)
		if n := m.Len(); n > 3 {
			t.Fatalf("%d entries after %d puts, bound 3", n, i+1)
		}
		if v, ok := m.Get(fmt.Sprint(i)); !ok || v != i {
			t.Fatalf("the entry just put: %v %v", v, ok)
		}
	}
	m.Put("9", 90) // an existing key replaces, never evicts
	if v, _ := m.Get("9"); v != 90 || m.Len() != 3 {
		t.Fatalf("replace: %v, %d entries", v, m.Len())
	}
	m.Delete("9")
	if _, ok := m.Get("9"); ok {
		t.Fatal("deleted key still there")
	}
	var z Map[int, int]
	for i := range DefaultMax + 10 {
		z.Put(i, i)
	}
	if z.Len() != DefaultMax {
		t.Fatalf("zero Map holds %d, want %d", z.Len(), DefaultMax)
	}
}

func TestMapConcurrent(t *testing.T) {
	m := Map[int, int]{Max: 50}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.Put(g*1000+i, i)
				m.Get(i)
				if i%7 == 0 {
					m.Delete(g*1000 + i)
				}
			}
		})
	}
	wg.Wait()
	if m.Len() > 50 {
		t.Fatalf("%d entries, bound 50", m.Len())
	}
}
