package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/refresh"
)

// probe wraps an engine to watch the orchestrator drive it: calls per work
// item, work items in flight and their peak, the order of plans and
// commits, and an optional hook run before each Expand (to pace or fail
// items).
type probe struct {
	engine
	mu       sync.Mutex
	expands  map[string]int // "job:index" -> Expand calls
	inflight int
	peak     int
	log      []string // "plan <job>", "commit <job>" in call order
	// beforeExpand, when set, runs before each Expand; an error fails it.
	beforeExpand func(ctx context.Context, p *refresh.Plan, i int) error
}

func newProbe(e engine) *probe { return &probe{engine: e, expands: map[string]int{}} }

// Freshness is the engine's, when it reports freshness (the real one);
// else an error, which the target-lag code reads as "behind".
func (p *probe) Freshness(ctx context.Context, id []string, now time.Time) (*refresh.Freshness, error) {
	if f, ok := p.engine.(Freshener); ok {
		return f.Freshness(ctx, id, now)
	}
	return nil, errors.New("the fake engine reports no freshness")
}

func (p *probe) Plan(ctx context.Context, id []string, jobID string, o refresh.Options) (*refresh.Plan, error) {
	p.note("plan " + jobID)
	return p.engine.Plan(ctx, id, jobID, o)
}

func (p *probe) Commit(ctx context.Context, pl *refresh.Plan, rs []refresh.ItemResult) (refresh.Result, error) {
	r, err := p.engine.Commit(ctx, pl, rs)
	if err == nil {
		p.note("commit " + pl.JobID)
	}
	return r, err
}

func (p *probe) Expand(ctx context.Context, pl *refresh.Plan, i int) (refresh.ItemResult, error) {
	p.mu.Lock()
	p.expands[fmt.Sprintf("%s:%d", pl.JobID, i)]++
	p.inflight++
	p.peak = max(p.peak, p.inflight)
	hook := p.beforeExpand
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
	}()
	if hook != nil {
		if err := hook(ctx, pl, i); err != nil {
			return refresh.ItemResult{}, err
		}
	}
	return p.engine.Expand(ctx, pl, i)
}

func (p *probe) note(s string) {
	p.mu.Lock()
	p.log = append(p.log, s)
	p.mu.Unlock()
}

func (p *probe) calls(job string, i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expands[fmt.Sprintf("%s:%d", job, i)]
}

func (p *probe) peakInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

func (p *probe) calls2() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// bundle is what a test drives: a client, the engine probe and the redis
// connection the workers it starts share.
type bundle struct {
	client *Client
	rdb    *redis.Client
	conn   asynq.RedisClientOpt
	eng    *probe
}

func setup(t testing.TB, eng engine) *bundle {
	t.Helper()
	r, db := testenv.SharedRedis(t)
	conn := asynq.RedisClientOpt{Addr: r.Addr, DB: db}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, DB: db})
	t.Cleanup(func() { rdb.Close() })
	p := newProbe(eng)
	c := newClient(rdb, conn, p)
	t.Cleanup(func() { c.Close() })
	return &bundle{client: c, rdb: rdb, conn: conn, eng: p}
}

var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// newServer builds a worker for clusters (default "default") without
// starting it.
func (b *bundle) newServer(t testing.TB, clusters ...string) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{Redis: b.conn, RDB: b.rdb, Clusters: clusters, Concurrency: 4,
		ShutdownTimeout: 5 * time.Second, Logger: testLogger, engine: b.eng})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func (b *bundle) startServer(t testing.TB, clusters ...string) *Server {
	t.Helper()
	s := b.newServer(t, clusters...)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTerminal waits until job id ends and returns it.
func (b *bundle) waitTerminal(t *testing.T, id string) *Job {
	t.Helper()
	var j *Job
	waitFor(t, "job "+id+" to end", 30*time.Second, func() (bool, error) {
		var err error
		j, err = b.client.Get(context.Background(), id)
		return err == nil && Terminal(j.State), err
	})
	return j
}

func (b *bundle) waitState(t *testing.T, id string, state State) *Job {
	t.Helper()
	j := b.waitTerminal(t, id)
	if j.State != state {
		t.Fatalf("job %s is %s, want %s (failure %+v)", id, j.State, state, j.Failure)
	}
	return j
}

// events collects a job's events through Client.Events, which must end by
// itself at the terminal event.
func (b *bundle) events(t *testing.T, id string) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var evs []Event
	if err := b.client.Events(ctx, id, "", func(e Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

func eventSummary(evs []Event) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, e.Type+":"+string(e.State)+"/"+e.Phase)
	}
	return strings.Join(parts, " ")
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
