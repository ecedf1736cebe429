package lru

import "testing"

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
