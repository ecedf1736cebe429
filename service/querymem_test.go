package service_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/service"
)

// TestQueryMemoryConfig: MVQ_QUERY_MEMORY takes bytes with a unit or a
// percentage of the memory limit, MVQ_QUERY_SESSIONS and MVQ_QUERY_SHARE
// session counts; bad
// values fail naming the variable.
func TestQueryMemoryConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for v, want := range map[string]int64{
		"512MiB": 512 << 20, "2GiB": 2 << 30, "1GB": 1e9, "268435456": 1 << 28,
		"50%": service.MemoryLimit() / 2,
	} {
		cfg, err := service.LoadConfig("api", nil, env(map[string]string{"MVQ_QUERY_MEMORY": v, "MVQ_QUERY_SESSIONS": "6", "MVQ_QUERY_SHARE": "3"}), io.Discard)
		if err != nil || cfg.QueryMemory != want || cfg.QuerySessions != 6 || cfg.QueryShare != 3 {
			t.Fatalf("MVQ_QUERY_MEMORY=%s: %d share %d %v, want %d", v, cfg.QueryMemory, cfg.QueryShare, err, want)
		}
	}
	for k, vals := range map[string][]string{
		"MVQ_QUERY_MEMORY":   {"0", "-1GiB", "1PB", "12xb", "150%", "0%", "1MiB", "lots"},
		"MVQ_QUERY_SHARE":    {"0", "-2", "x", "99999"},
		"MVQ_QUERY_SESSIONS": {"0", "-1", "4097", "two"},
	} {
		for _, v := range vals {
			if _, err := service.LoadConfig("worker", nil, env(map[string]string{k: v}), io.Discard); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%q: %v, want an error naming it", k, v, err)
			}
		}
	}
}

// TestCoreQueryMemory: the SQL engine every process opens keeps its
// sessions within MVQ_QUERY_MEMORY together, and without it within
// DefaultQueryMemory (half the memory limit); DuckDB's own default (80%
// of RAM for each of them) is never left in place.
func TestCoreQueryMemory(t *testing.T) {
	t.Parallel()
	for _, budget := range []int64{512 << 20, 0} {
		cfg := service.Defaults()
		cfg.Warehouse = "file://" + t.TempDir()
		cfg.QueryMemory = budget
		if budget > 0 {
			cfg.QuerySessions = 2 // 256 MiB each
		}
		core, err := service.OpenCore(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := budget
		if want == 0 {
			want = service.DefaultQueryMemory()
		}
		n, each := int64(core.SQL.Sessions()), core.SQL.SessionMemory()
		core.Close()
		if budget > 0 && (n != 2 || each != 256<<20) {
			t.Fatalf("MVQ_QUERY_SESSIONS=2 over 512 MiB: %d sessions of %d bytes", n, each)
		}
		if each <= 0 || n*each > want || n*each < want*9/10 {
			t.Fatalf("budget %d: %d sessions of %d bytes, want their sum just within %d", budget, n, each, want)
		}
		if want > service.MemoryLimit() {
			t.Fatalf("default budget %d over the memory limit %d", want, service.MemoryLimit())
		}
	}
}
