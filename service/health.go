package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// health tracks a worker's dependencies (Redis, the warehouse) for its
// /healthz and /readyz. Each is probed every interval; /healthz fails once
// a dependency has not answered for longer than timeout (a liveness
// restart may help: a wedged client, a lost network), /readyz fails as
// soon as the last probe of one failed or the worker is draining.
type health struct {
	timeout time.Duration
	deps    []healthDep
	ready   atomic.Bool

	mu    sync.Mutex
	state map[string]*depState
}

type healthDep struct {
	name  string
	probe func(ctx context.Context) error
}

type depState struct {
	lastOK  time.Time
	lastErr error
}

func newHealth(timeout time.Duration, deps ...healthDep) *health {
	h := &health{timeout: timeout, deps: deps, state: map[string]*depState{}}
	now := time.Now()
	for _, d := range deps {
		h.state[d.name] = &depState{lastOK: now}
	}
	return h
}

// interval is how often dependencies are probed: a quarter of the
// timeout, between 100 ms and 5 s.
func (h *health) interval() time.Duration {
	return min(max(h.timeout/4, 100*time.Millisecond), 5*time.Second)
}

// run probes every dependency once now and then every interval until ctx
// ends.
func (h *health) run(ctx context.Context) {
	t := time.NewTicker(h.interval())
	defer t.Stop()
	for {
		h.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *health) probe(ctx context.Context) {
	for _, d := range h.deps {
		pctx, cancel := context.WithTimeout(ctx, h.interval())
		err := d.probe(pctx)
		cancel()
		h.mu.Lock()
		st := h.state[d.name]
		// The cause (an address, a path) goes to the log, once per
		// change; the endpoints name only the dependency.
		switch {
		case err != nil && (st.lastErr == nil || st.lastErr.Error() != err.Error()):
			slog.Warn("health: dependency unreachable", "dependency", d.name, "err", err)
		case err == nil && st.lastErr != nil:
			slog.Info("health: dependency reachable again", "dependency", d.name)
		}
		st.lastErr = err
		if err == nil {
			st.lastOK = time.Now()
		}
		h.mu.Unlock()
	}
}

// report returns, per dependency, "ok" or "unreachable for <duration>"
// (never the error itself: it names addresses and paths, and these
// endpoints answer anyone who reaches the port), and whether every
// dependency answered within the timeout (live) and at its last probe
// (fresh).
func (h *health) report() (deps map[string]string, live, fresh bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	deps = map[string]string{}
	live, fresh = true, true
	for name, st := range h.state {
		if st.lastErr == nil {
			deps[name] = "ok"
			continue
		}
		fresh = false
		since := time.Since(st.lastOK)
		deps[name] = "unreachable for " + since.Round(time.Second).String()
		if since > h.timeout {
			live = false
		}
	}
	return deps, live, fresh
}

// healthz is 200 {"status":"ok"} unless a dependency has been unreachable
// for longer than the timeout: then 503 naming it.
func (h *health) healthz(w http.ResponseWriter, _ *http.Request) {
	deps, live, _ := h.report()
	status, code := "ok", http.StatusOK
	if !live {
		status, code = "unhealthy", http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "dependencies": deps})
}

// readyz is 200 {"status":"ready"} while the worker takes work and every
// dependency answered its last probe; 503 otherwise.
func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	deps, _, fresh := h.report()
	switch {
	case !h.ready.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "draining", "dependencies": deps})
	case !fresh:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "dependencies": deps})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "dependencies": deps})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
