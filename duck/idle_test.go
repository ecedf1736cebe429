package duck

import (
	"fmt"
	"testing"
)

// TestIdleSessionsBound: more texts than Sessions keep a session each, up
// to IdleSessions; past it the least recently used is closed, and each
// kept text is served by its own session again.
func TestIdleSessionsBound(t *testing.T) {
	db, err := Open(Options{Threads: 1, Sessions: 1, IdleSessions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	text := func(i int) string { return fmt.Sprintf(`SELECT id + %d FROM "docs$articles"`, i) }
	for i := range 4 {
		if _, err := collectOne(t, db, text(i)); err != nil {
			t.Fatal(err)
		}
	}
	db.mu.Lock()
	idle := len(db.idle)
	db.mu.Unlock()
	if idle != 3 {
		t.Fatalf("%d idle sessions after 4 texts, want 3 (IdleSessions)", idle)
	}
	reused := db.reused.Load()
	run := func(i int) {
		if _, err := collectOne(t, db, text(i)); err != nil {
			t.Fatal(err)
		}
	}
	run(3) // kept: reused
	run(2) // kept: reused
	if n := db.reused.Load() - reused; n != 2 {
		t.Fatalf("texts 3 and 2 reused %d sessions, want 2", n)
	}
	run(0) // evicted first: opened afresh, and evicts text 1 (least recently used)
	run(1)
	if n := db.reused.Load() - reused; n != 2 {
		t.Fatalf("evicted texts reused a session (%d reuses, want 2)", n)
	}
}

// TestIdleSessionsDefault: many texts in turn (views of many tables)
// keep their sessions by default, well beyond twice the sessions running.
func TestIdleSessionsDefault(t *testing.T) {
	db, err := Open(Options{Threads: 1, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.maxIdle != 32 {
		t.Fatalf("default IdleSessions %d, want 32", db.maxIdle)
	}
}
