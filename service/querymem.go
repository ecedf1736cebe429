package service

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The SQL engine's memory: every DuckDB database that may run a query at
// once gets an equal share of MVQ_QUERY_MEMORY as its memory_limit
// (duck.Options.MemoryBudget), so concurrent queries cannot together grow
// the process past it, whatever their SQL does; one past its share fails
// alone (400 in the API, its own job in a worker).

// DefaultQueryMemoryFraction is the part of the process's memory limit
// (its cgroup's, else the machine's RAM) the SQL engine gets unless
// MVQ_QUERY_MEMORY says otherwise. The rest is the Go heap's: request
// bodies, spooled results, Arrow batches read from the warehouse, a
// worker's chunks and embeddings.
const DefaultQueryMemoryFraction = 0.5

// fallbackMemoryLimit stands in for the memory limit where neither a
// cgroup limit nor /proc/meminfo can be read.
const fallbackMemoryLimit = 4 << 30

// DefaultQueryMemory is the SQL engine's budget when MVQ_QUERY_MEMORY is
// not set: DefaultQueryMemoryFraction of MemoryLimit.
func DefaultQueryMemory() int64 {
	return int64(float64(MemoryLimit()) * DefaultQueryMemoryFraction)
}

// MemoryLimit is the memory this process may use: the smaller of its
// cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) and the
// machine's RAM; fallbackMemoryLimit where neither is known.
func MemoryLimit() int64 {
	limit := int64(0)
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<60 {
				limit = n
				break
			}
		}
	}
	if ram := memTotal(); ram > 0 && (limit == 0 || ram < limit) {
		limit = ram
	}
	if limit == 0 {
		limit = fallbackMemoryLimit
	}
	return limit
}

// memTotal reads MemTotal from /proc/meminfo; 0 where it cannot.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return n << 10
				}
			}
		}
	}
	return 0
}

// loadQueryBounds reads MVQ_QUERY_MEMORY into cfg.QueryMemory: bytes,
// with an optional unit (KiB, MiB, GiB, TiB; KB, MB, GB, TB), or a
// percentage of MemoryLimit ("40%"); unset leaves 0 (OpenCore uses
// DefaultQueryMemory). MVQ_QUERY_SESSIONS into cfg.QuerySessions: the
// queries that may run at once, each with an equal share of the memory
// (fewer: more memory each); unset leaves 0 (max(4, 2×GOMAXPROCS)). And
// MVQ_QUERY_SHARE into cfg.QueryShare: the SQL sessions one principal's
// API requests may hold at once; unset leaves 0 (half the sessions,
// rounded up).
func loadQueryBounds(cfg *Config, getenv func(string) string) error {
	if v := strings.TrimSpace(getenv("MVQ_QUERY_MEMORY")); v != "" {
		n, err := parseMemory(v, MemoryLimit())
		if err != nil {
			return fmt.Errorf("MVQ_QUERY_MEMORY %q: %v", v, err)
		}
		cfg.QueryMemory = n
	}
	for _, c := range []struct {
		key, what string
		dst       *int
	}{
		{"MVQ_QUERY_SESSIONS", "the SQL queries that may run at once", &cfg.QuerySessions},
		{"MVQ_QUERY_SHARE", "the sessions one principal may hold", &cfg.QueryShare},
	} {
		if v := strings.TrimSpace(getenv(c.key)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 4096 {
				return fmt.Errorf("%s %q: want %s, 1..4096", c.key, v, c.what)
			}
			*c.dst = n
		}
	}
	return nil
}

// parseMemory parses a byte size ("2GiB", "512MB", "1073741824") or a
// percentage of limit ("50%"); at least 16 MiB.
func parseMemory(v string, limit int64) (int64, error) {
	const want = "want bytes such as 2GiB or 512MiB, or a percentage of the memory limit such as 50%"
	var n int64
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f <= 0 || f > 100 {
			return 0, fmt.Errorf("%s", want)
		}
		n = int64(float64(limit) * f / 100)
	} else {
		num := strings.TrimRightFunc(v, func(r rune) bool { return r < '0' || r > '9' })
		unit := strings.ToUpper(strings.TrimSpace(v[len(num):]))
		mult := map[string]int64{"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
			"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
		x, err := strconv.ParseInt(num, 10, 64)
		if err != nil || mult == 0 || x <= 0 || x > (1<<62)/mult {
			return 0, fmt.Errorf("%s", want)
		}
		n = x * mult
	}
	if n < 16<<20 {
		return 0, fmt.Errorf("at least 16MiB (got %d bytes)", n)
	}
	return n, nil
}
