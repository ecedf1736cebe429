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
	once       sync.Once
	total, per int
	mu         sync.Mutex
	open       int
	by         map[string]int
}

// acquire takes a slot for principal; ok false says which cap is full.
func (s *streamSlots) acquire(principal string) (release func(), why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.open >= s.total:
		return nil, fmt.Sprintf("%d job event streams are open, the server's limit (MVQ_MAX_EVENT_STREAMS)", s.open)
	case s.by[principal] >= s.per:
		return nil, fmt.Sprintf("principal %q has %d job event streams open, its limit (MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL)", principal, s.by[principal])
	}
	s.open++
	s.by[principal]++
	var done sync.Once
	return func() {
		done.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.open--
			if s.by[principal]--; s.by[principal] <= 0 {
				delete(s.by, principal)
			}
		})
	}, ""
}

// slots returns v's stream counter, made on first use from its caps.
func (v *ViewRoutes) slots() *streamSlots {
	v.streams.once.Do(func() {
		v.streams.total, v.streams.per = v.MaxStreams, v.MaxStreamsPerPrincipal
		if v.streams.total <= 0 {
			v.streams.total = DefaultMaxEventStreams
		}
		if v.streams.per <= 0 {
			v.streams.per = DefaultMaxEventStreamsPerPrincipal
		}
		v.streams.per = min(v.streams.per, v.streams.total)
		v.streams.by = map[string]int{}
	})
	return &v.streams
}

// tooManyStreams answers a follower over a cap: 429 with Retry-After.
func tooManyStreams(c *gin.Context, why string) {
	c.Header("Retry-After", strconv.Itoa(streamRetryAfter))
	problem(c, http.StatusTooManyRequests, tooMany.typ, "Too many job event streams", why+": close one or retry later")
}
