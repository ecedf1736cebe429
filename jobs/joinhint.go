package jobs

import (
	"time"

	"github.com/mvq-dev/mvq/internal/lru"
)

// joinHints remembers, by view and request fingerprint, the PENDING job
// this process last created or joined, and when it last found it
// PENDING. A submit with a hint it trusts (expects) tries the join alone
// first (store.join: scriptJoin), which skips the plan task, the record
// and scriptCreate's long argument list: a burst of identical refreshes,
// the coalescing path, costs the API and Redis a fraction of a create. A
// hint is only a guess: the join script decides from Redis, and a submit
// whose hinted job has started (or was cancelled) pays one small extra
// round trip, then creates as without a hint. Safe for concurrent use.
type joinHints struct {
	c *lru.Cache[string, joinHint]
}

type joinHint struct {
	created time.Time // the job's creation: no join is taken after lostPlanAge
	seen    time.Time // last found PENDING
}

// joinHintFresh is how long after a job was last found PENDING a hint is
// trusted: a job usually starts within that time of its last join, or
// its view has a burst of refreshes that keeps the hint fresh.
const joinHintFresh = 10 * time.Second

// joinHintsBytes bounds the hints a process keeps (some 10,000 views' worth).
const joinHintsBytes = 2 << 20

func newJoinHints() joinHints { return joinHints{c: lru.New[string, joinHint](joinHintsBytes)} }

func joinHintKey(view []string, fp string) string { return viewKey(view) + "\x00" + fp }

// expects reports whether a submit of view with fingerprint fp at now
// should try the join alone first.
func (h joinHints) expects(view []string, fp string, now time.Time) bool {
	hint, ok := h.c.Get(joinHintKey(view, fp))
	return ok && now.Sub(hint.seen) < joinHintFresh && now.Sub(hint.created) < lostPlanAge
}

// saw records that the job of view and fp created at created was PENDING
// at now.
func (h joinHints) saw(view []string, fp string, created, now time.Time) {
	k := joinHintKey(view, fp)
	h.c.Set(k, joinHint{created: created, seen: now}, int64(len(k))+96)
}

// forget drops the hint of view and fp (its job was not joinable).
func (h joinHints) forget(view []string, fp string) { h.c.Delete(joinHintKey(view, fp)) }
