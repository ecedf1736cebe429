package jobs

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mvq-dev/mvq/errs"
)

// Reading a job is what dashboards poll, many clients at once for the same
// job. GetJSON answers from memory while the job has not changed
// (jobcache.go); otherwise it coalesces concurrent reads of one job id and
// encodes the record once per read, under one rule that keeps every such
// answer as fresh as an uncoalesced read: a request is answered only by a
// Redis read that STARTED AFTER the request arrived. Per job id at most one read runs;
// requests arriving while it runs do not join it (it may have read the
// record before their arrival) but share the one read that starts when it
// ends. So a request never sees a state older than the one recorded when
// it arrived, and a job polled by N clients costs Redis at most one read
// in flight.

// readGroup coalesces reads by key (see above). The zero value is ready.
type readGroup struct {
	mu sync.Mutex
	m  map[string]*readSlot
}

// readSlot is one key's state: whether a read runs, and the read that
// starts after it, which every request arriving meanwhile joins.
type readSlot struct {
	running bool
	next    *readCall
}

type readCall struct {
	ctx  context.Context // of the request that made the call, not cancelled with it
	done chan struct{}
	n    int // requests sharing it
	b    []byte
	err  error
}

// do answers key with a read by read that started after do was called.
// The read runs on its own goroutine with the values (trace) of the
// request that started it but not its cancellation: a request that goes
// away leaves the read to the others; each waits on its own ctx.
func (g *readGroup) do(ctx context.Context, key string, read func(context.Context) ([]byte, error)) ([]byte, error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*readSlot{}
	}
	s := g.m[key]
	if s == nil {
		s = &readSlot{}
		g.m[key] = s
	}
	c := s.next // not started yet: joining it is fresh
	if c == nil {
		c = &readCall{ctx: context.WithoutCancel(ctx), done: make(chan struct{})}
		if s.running {
			s.next = c // starts when the running read ends
		} else {
			s.running = true
			go g.run(key, s, c, read)
		}
	}
	c.n++
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.b, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run does c, then the read queued behind it, until none is queued.
func (g *readGroup) run(key string, s *readSlot, c *readCall, read func(context.Context) ([]byte, error)) {
	for c != nil {
		c.b, c.err = read(c.ctx)
		close(c.done)
		g.mu.Lock()
		c, s.next = s.next, nil
		if c == nil {
			s.running = false
			delete(g.m, key)
		}
		g.mu.Unlock()
	}
}

// GetJSON returns the job as JSON (json.Marshal of what Get returns):
// from memory while no change of the job was announced since it was read
// (jobcache.go), else from a read of its record that started after the
// call (readGroup), with concurrent reads of one job shared. The bytes are
// shared with other callers: read them, never change them.
func (c *Client) GetJSON(ctx context.Context, jobID string) ([]byte, error) {
	if b, ok := c.cache.get(jobID); ok {
		return b, nil
	}
	c.cache.start(c.st)
	return c.reads.do(ctx, jobID, func(ctx context.Context) ([]byte, error) {
		t := c.cache.begin(jobID)
		j, err := c.st.job(ctx, jobID)
		if err != nil {
			c.cache.abandon(jobID, t)
			return nil, err
		}
		b, err := json.Marshal(j)
		if err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: "encode job " + jobID, Err: err}
		}
		if testAfterJobRead != nil {
			testAfterJobRead(jobID)
		}
		c.cache.put(jobID, t, b)
		return b, nil
	})
}

// testAfterJobRead, when set by a test, runs between a job's read and
// keeping its answer.
var testAfterJobRead func(id string)

// jobViewsBytes bounds Client.jobViews: some thousands of jobs.
const jobViewsBytes = 1 << 20

// jobViewSize is the share of jobViewsBytes of job jobID's view v.
func jobViewSize(jobID string, v []string) int64 {
	n := len(jobID) + 64
	for _, p := range v {
		n += len(p) + 16
	}
	return int64(n)
}

// JobView returns the view a job refreshes (what access to the job is
// judged by). A job's view is set when it is submitted and never changes,
// so it is remembered per job id (a cache bounded in bytes): polling a job with
// credentials then costs the auth step no Redis read. A job whose record
// has expired since may still be found here; the read that answers the
// request says it is gone.
func (c *Client) JobView(ctx context.Context, jobID string) ([]string, error) {
	if v, ok := c.jobViews.Get(jobID); ok {
		return append([]string(nil), v...), nil
	}
	j, err := c.Get(ctx, jobID)
	if err != nil {
		return nil, err
	}
	v := j.ViewID()
	c.jobViews.Set(jobID, v, jobViewSize(jobID, v))
	return append([]string(nil), v...), nil
}
