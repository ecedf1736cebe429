package duck

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
)

// memoryBomb is the filter of the report: one string of about 1 GB built
// inside a subquery. Under DuckDB's default memory_limit (80% of RAM) each
// of a few concurrent copies may take most of the machine.
const memoryBomb = "(SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(1000)) > 0"

// TestMemoryBudgetPerSession: under a MemoryBudget every session's
// memory_limit is the budget's share (so the sessions that run at once fit
// it together), nothing spills to a temp directory, and three concurrent
// copies of the memory bomb each fail cleanly with an out-of-memory
// SQLError instead of growing the process.
func TestMemoryBudgetPerSession(t *testing.T) {
	t.Parallel()
	const budget = 2 * MinSessionMemory
	db, err := Open(Options{Threads: 1, Sessions: 4, MemoryBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Sessions() != 2 || db.SessionMemory() != MinSessionMemory {
		t.Fatalf("sessions %d of %d bytes, want 2 of %d (the budget divided, none under MinSessionMemory)", db.Sessions(), db.SessionMemory(), MinSessionMemory)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	db.beforeRelease = func(c *sql.Conn) {
		rows, err := c.QueryContext(context.Background(), "SELECT name, value FROM duckdb_settings() WHERE name IN ('memory_limit', 'temp_directory')")
		if err != nil {
			t.Error(err)
			return
		}
		defer rows.Close()
		mu.Lock()
		defer mu.Unlock()
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Error(err)
			}
			seen[k] = v
		}
	}
	if _, err := collectOne(t, db, `SELECT count(*) FROM "docs$articles"`); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if seen["memory_limit"] != "128.0 MiB" || seen["temp_directory"] != "" {
		t.Fatalf("session settings %v, want memory_limit 128.0 MiB and no temp_directory", seen)
	}
	mu.Unlock()

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = collectOne(t, db, `SELECT id FROM "docs$articles" WHERE `+memoryBomb)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !isSQLError(err) || !strings.Contains(err.Error(), "out of memory") || !strings.Contains(err.Error(), "128 MiB share of MVQ_QUERY_MEMORY") {
			t.Errorf("bomb %d: %v, want an out-of-memory SQLError naming the share", i, err)
		}
	}
	// The engine still answers.
	if v, err := collectOne(t, db, `SELECT count(*) FROM "docs$articles"`); err != nil || v != "10" {
		t.Fatalf("after the bombs: %q %v", v, err)
	}
}

func TestShareBudget(t *testing.T) {
	for _, c := range []struct {
		budget       int64
		sessions     int
		wantSessions int
		wantEach     int64
	}{
		{8 << 30, 4, 4, 2 << 30},
		{1 << 30, 32, 8, 128 << 20},
		{64 << 20, 4, 1, 64 << 20},
		{3 << 30, 5, 5, (3 << 30) / 5 >> 10 << 10},
	} {
		n, each := shareBudget(c.budget, c.sessions)
		if n != c.wantSessions || each != c.wantEach || int64(n)*each > c.budget {
			t.Errorf("shareBudget(%d, %d) = %d, %d; want %d, %d", c.budget, c.sessions, n, each, c.wantSessions, c.wantEach)
		}
	}
}
