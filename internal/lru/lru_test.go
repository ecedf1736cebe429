package lru

import (
	"sync"
	"testing"
)

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](10)
	c.Put("a", 1, 4)
	c.Put("b", 2, 4)
	if _, ok := c.Get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.Put("c", 3, 4) // over the bound: b goes
	if _, ok := c.Get("b"); ok {
		t.Fatal("b kept past the bound")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Fatalf("%s = %d %v", k, v, ok)
		}
	}
	if c.Bytes() != 8 {
		t.Fatalf("bytes %d", c.Bytes())
	}
	c.Put("a", 9, 4) // present: kept as is
	if v, _ := c.Get("a"); v != 1 {
		t.Fatalf("a replaced: %d", v)
	}
	c.Put("big", 4, 11) // larger than the bound: not kept, nothing dropped
	if _, ok := c.Get("big"); ok || c.Bytes() != 8 {
		t.Fatalf("oversized entry: kept %v, bytes %d", ok, c.Bytes())
	}
}

func TestSetReplacesAndDelete(t *testing.T) {
	c := New[string, int](10)
	c.Set("a", 1, 4)
	c.Set("b", 2, 4)
	c.Set("a", 9, 5) // present: replaced, sized anew, most recent
	if v, _ := c.Get("a"); v != 9 || c.Bytes() != 9 || c.Len() != 2 {
		t.Fatalf("replace: a = %d, %d bytes, %d entries", v, c.Bytes(), c.Len())
	}
	c.Set("c", 3, 4) // over the bound: b, the least recent, goes
	if _, ok := c.Get("b"); ok || c.Bytes() != 9 {
		t.Fatalf("b kept past the bound (%d bytes)", c.Bytes())
	}
	c.Set("c", 4, 11) // larger than the bound: not kept, the old c goes
	if _, ok := c.Get("c"); ok || c.Bytes() != 5 {
		t.Fatalf("oversized replace: c kept %v, %d bytes", ok, c.Bytes())
	}
	c.Delete("a")
	c.Delete("missing")
	if _, ok := c.Get("a"); ok || c.Bytes() != 0 || c.Len() != 0 {
		t.Fatalf("delete: %v, %d bytes, %d entries", ok, c.Bytes(), c.Len())
	}
}

func TestConcurrentSetDelete(t *testing.T) {
	c := New[int, int](50)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				c.Set(g*1000+i, i, 1)
				c.Get(i)
				if i%7 == 0 {
					c.Delete(g*1000 + i)
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > 50 || c.Bytes() != int64(c.Len()) {
		t.Fatalf("%d entries, %d bytes, bound 50", c.Len(), c.Bytes())
	}
}
