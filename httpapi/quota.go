package httpapi

import "sync"

// quota bounds what all principals together, and each one, hold at once:
// the memory of spooled results (bytes, spool.go), the job event streams
// open (one each, streams.go).
type quota struct {
	total, per int64
	mu         sync.Mutex
	used, peak int64
	by         map[string]int64
}

// newQuota bounds the total at total and each principal at per (at most
// total).
func newQuota(total, per int64) *quota {
	return &quota{total: total, per: min(per, total), by: map[string]int64{}}
}

// reserve takes n for principal. When there is no room it takes nothing
// and answers which bound is full (perPrincipal) and what is held under
// it.
func (q *quota) reserve(principal string, n int64) (ok, perPrincipal bool, held int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.used+n > q.total:
		return false, false, q.used
	case q.by[principal]+n > q.per:
		return false, true, q.by[principal]
	}
	q.used += n
	q.peak = max(q.peak, q.used)
	q.by[principal] += n
	return true, false, 0
}

// release gives back n that principal reserved.
func (q *quota) release(principal string, n int64) {
	if n == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used -= n
	if q.by[principal] -= n; q.by[principal] <= 0 {
		delete(q.by, principal)
	}
}

// inUse is what is held now, and peakUse the most held at once.
func (q *quota) inUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

func (q *quota) peakUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.peak
}
