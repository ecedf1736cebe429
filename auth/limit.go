package auth

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter holds one token bucket per principal: RateLimit requests per
// second, with a burst of one second's worth (at least 1).
type Limiter struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// NewLimiter returns an empty limiter.
func NewLimiter() *Limiter { return &Limiter{m: map[string]*rate.Limiter{}} }

// Allow takes one request from the identity's bucket. When the bucket is
// empty it returns false and how long until a request would be allowed.
// An identity without a rate limit is always allowed. A changed rate limit
// (a reloaded tokens file) applies from the next request.
func (l *Limiter) Allow(id *Identity, now time.Time) (bool, time.Duration) {
	if id.RateLimit <= 0 {
		return true, 0
	}
	limit := rate.Limit(id.RateLimit)
	burst := max(1, int(math.Ceil(id.RateLimit)))
	l.mu.Lock()
	b := l.m[id.Principal]
	if b == nil {
		b = rate.NewLimiter(limit, burst)
		l.m[id.Principal] = b
	} else if b.Limit() != limit || b.Burst() != burst {
		b.SetLimitAt(now, limit)
		b.SetBurstAt(now, burst)
	}
	l.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
