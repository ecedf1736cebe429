package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"
)

// Defaults of the job event stream caps (ViewRoutes.MaxStreams,
// MaxStreamsPerPrincipal).
const (
	DefaultMaxEventStreams             = 128
	DefaultMaxEventStreamsPerPrincipal = 16
)

// streamRetryAfter is the wait a refused follower is told to observe.
const streamRetryAfter = 5

// streamSlots counts the job event streams open now, in all and per
// principal.
type streamSlots struct {
	once sync.Once
	q    *quota
}

// acquire takes a slot for principal; without one, why says which cap is
// full.
func (s *streamSlots) acquire(principal string) (release func(), why string) {
	ok, perPrincipal, held := s.q.reserve(principal, 1)
	switch {
	case !ok && perPrincipal:
		return nil, fmt.Sprintf("principal %q has %d job event streams open, its limit (MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL)", principal, held)
	case !ok:
		return nil, fmt.Sprintf("%d job event streams are open, the server's limit (MVQ_MAX_EVENT_STREAMS)", held)
	}
	var done sync.Once
	return func() { done.Do(func() { s.q.release(principal, 1) }) }, ""
}

// slots returns v's stream counter, made on first use from its caps.
func (v *ViewRoutes) slots() *streamSlots {
	v.streams.once.Do(func() {
		total, per := v.MaxStreams, v.MaxStreamsPerPrincipal
		if total <= 0 {
			total = DefaultMaxEventStreams
		}
		if per <= 0 {
			per = DefaultMaxEventStreamsPerPrincipal
		}
		v.streams.q = newQuota(int64(total), int64(per))
	})
	return &v.streams
}

// tooManyStreams answers a follower over a cap: 429 with Retry-After.
func tooManyStreams(c *gin.Context, why string) {
	c.Header("Retry-After", strconv.Itoa(streamRetryAfter))
	problem(c, http.StatusTooManyRequests, tooMany.typ, "Too many job event streams", why+": close one or retry later")
}
