package jobs

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Polled jobs are answered from memory. Every script that changes a job
// record publishes the record's key on ChangedChannel in the same step
// (luaEmit, scriptTransition, scriptStartItem, savePlan). A Client that
// serves GetJSON subscribes to it and keeps the JSON of the jobs it read
// last (jobCache): a read stores its answer unless a change of that job
// was announced after the read started, and an announcement drops the
// job's answer. So a poll costs no Redis round trip while the job does not
// change, and sees a change as soon as its announcement arrives (the
// Redis publish to this process: well under a millisecond here).
//
// What a cached answer is not: a read that started after the request. A
// change made through another API process can be announced a moment after
// that process answered its own caller. Changes made through this Client
// (Cancel, CancelView) and events it reads (Events) drop the answer before
// they return, so one process reads its own writes and never answers an
// older state than an event it has streamed.
//
// Bounds, should an announcement be lost: nothing is served before the
// subscription is confirmed; a connection that go-redis finds broken (a
// failed read, or a failed ping every watchPing) is reconnected, and its
// new confirmation forgets every answer. A loss go-redis does not see (a
// half-open connection, an announcement dropped from a full channel, a
// Sentinel failover that leaves the subscription on the old master) is
// bounded only by the cache's maxAge (DefaultJobCacheMaxAge): no answer
// older than that is served, which also bounds how long a record that
// expired goes unseen. (A receive loop of our own with read deadlines
// would notice sooner; go-redis v9.23's ReceiveTimeout can block past its
// timeout while it peeks for push notifications, so it is not used.)

// ChangedChannel carries the record key (RedisKey("job:" + id)) of every
// job whose record changed, published by the script that changed it.
const ChangedChannel = "mvq:jobs:changed"

// DefaultJobCacheMaxAge is how old a job answered from memory may be at
// most (see JobCacheMaxAge).
const DefaultJobCacheMaxAge = time.Second

// jobCacheSize bounds the number of jobs remembered; a full cache drops
// the answers past the age limit, or all when none is.
var jobCacheSize = 4096

// watchPing is how often the subscription's connection is checked.
var watchPing = 500 * time.Millisecond

// JobCacheMaxAge sets how long a job's JSON may be answered from memory
// after the read that produced it started, at most (changes announced
// drop it sooner). 0 turns the cache off: every GetJSON reads Redis.
func JobCacheMaxAge(d time.Duration) ClientOption {
	return func(c *Client) { c.cache.maxAge = max(d, 0) }
}

type jobCache struct {
	maxAge time.Duration

	mu    sync.Mutex
	live  bool   // the subscription is confirmed (and not known lost)
	epoch uint64 // bumped whenever every answer is forgotten
	m     map[string]*cachedJob

	once sync.Once
	stop context.CancelFunc
	done chan struct{}
}

type cachedJob struct {
	b   []byte    // nil: none (a read registered the job)
	at  time.Time // when the read that produced b started
	gen uint64    // bumped by every announced change
}

// readToken is what a read records when it starts, to judge whether its
// answer may be kept.
type readToken struct {
	ok    bool
	epoch uint64
	gen   uint64
	at    time.Time
}

// start subscribes, once, on its own goroutine; close stops it.
func (c *jobCache) start(st *store) {
	if c.maxAge <= 0 {
		return
	}
	c.once.Do(func() {
		ctx, stop := context.WithCancel(context.Background())
		c.stop, c.done = stop, make(chan struct{})
		go c.watch(ctx, st)
	})
}

func (c *jobCache) close() {
	c.once.Do(func() {}) // a cache never started stays so
	if c.stop != nil {
		c.stop()
		<-c.done
	}
}

// get returns the job's remembered JSON, if it may be served.
func (c *jobCache) get(id string) ([]byte, bool) {
	if c.maxAge <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return nil, false
	}
	e := c.m[id]
	if e == nil || e.b == nil || time.Since(e.at) > c.maxAge {
		return nil, false
	}
	return e.b, true
}

// begin registers a read of id about to start.
func (c *jobCache) begin(id string) readToken {
	if c.maxAge <= 0 {
		return readToken{}
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		return readToken{}
	}
	e := c.m[id]
	if e == nil {
		if len(c.m) >= jobCacheSize {
			c.sweepLocked(now)
		}
		e = &cachedJob{}
		c.m[id] = e
	}
	return readToken{ok: true, epoch: c.epoch, gen: e.gen, at: now}
}

// sweepLocked makes room: it drops the answers past the age limit (and
// jobs registered by reads that kept nothing), and everything when all
// are fresh.
func (c *jobCache) sweepLocked(now time.Time) {
	for id, e := range c.m {
		if e.b == nil || now.Sub(e.at) > c.maxAge {
			delete(c.m, id)
		}
	}
	if len(c.m) >= jobCacheSize {
		c.forgetLocked()
	}
}

// abandon unregisters a read that failed (an unknown job is not kept).
func (c *jobCache) abandon(id string, t readToken) {
	if !t.ok {
		return
	}
	c.mu.Lock()
	if e := c.m[id]; e != nil && e.b == nil && c.epoch == t.epoch {
		delete(c.m, id)
	}
	c.mu.Unlock()
}

// put keeps b, the answer of the read t was taken for, unless a change of
// id was announced (or everything forgotten) since the read started.
func (c *jobCache) put(id string, t readToken, b []byte) {
	if !t.ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.epoch != t.epoch {
		return
	}
	if e := c.m[id]; e != nil && e.gen == t.gen {
		e.b, e.at = b, t.at
	}
}

// drop forgets id's answer and makes reads of id in flight keep nothing.
func (c *jobCache) drop(id string) {
	c.mu.Lock()
	if e := c.m[id]; e != nil {
		e.gen++
		e.b = nil
	}
	c.mu.Unlock()
}

// forget drops every answer; live says whether answers may be kept from
// now on.
func (c *jobCache) forget(live bool) {
	c.mu.Lock()
	c.live = live
	c.forgetLocked()
	c.mu.Unlock()
}

func (c *jobCache) forgetLocked() {
	c.epoch++
	c.m = map[string]*cachedJob{}
}

// watch follows ChangedChannel until ctx ends. The subscription's
// channel pings the connection every watchPing and reconnects when it
// fails; a reconnect resubscribes, and its confirmation forgets every
// answer (announcements made meanwhile were missed).
func (c *jobCache) watch(ctx context.Context, st *store) {
	defer close(c.done)
	ps := st.subscribe(ctx, ChangedChannel)
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(4096), redis.WithChannelHealthCheckInterval(watchPing))
	prefix := jobKey("")
	for {
		select {
		case <-ctx.Done():
			c.forget(false)
			return
		case msg, ok := <-ch:
			if !ok {
				c.forget(false)
				return
			}
			switch m := msg.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					c.forget(true) // announcements before this one were not seen
				}
			case *redis.Message:
				c.drop(strings.TrimPrefix(m.Payload, prefix))
			}
		}
	}
}
