// Package idem keeps the records of HTTP Idempotency-Key requests in
// Redis: for each principal and key, the request's fingerprint, whether it
// is still running and, once done, the response to replay. httpapi serves
// the header with a Store; jobs.Client makes the Store over the job
// store's Redis (jobs.Client.Idempotency), so the records share its key
// prefix and hash tag.
//
// The package owns its keys (keys.go) and Lua scripts (scripts.go); the
// prefix they start with is given by jobs (keys.go there owns it).
package idem

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
)

const (
	// DefaultMaxKeys is the records one principal keeps unless
	// configured.
	DefaultMaxKeys = 1000

	// TTL is how long a finished request's response is replayed.
	TTL = 24 * time.Hour
	// pendingTTL bounds how long a request that never finished (its
	// process died) keeps its key busy.
	pendingTTL = 15 * time.Minute
)

// State is what Begin found.
type State int

const (
	New        State = iota // first use: run the request, then Finish or Abandon
	InProgress              // the same request is running now
	Mismatch                // the key was used for a different request
	Done                    // finished before: replay Status, ContentType, Body
)

// Record is a stored response.
type Record struct {
	State       State
	Status      int
	ContentType string
	Body        []byte
}

// Store keeps idempotency records in Redis. It is safe for concurrent
// use.
type Store struct {
	rdb     redis.UniversalClient
	prefix  string
	maxKeys int
}

// NewStore returns a store whose keys start with prefix (the caller's
// key prefix, hash tag included) and which keeps at most maxKeys records
// per principal (maxKeys <= 0: DefaultMaxKeys): past it, claiming a new
// key drops the principal's oldest record.
func NewStore(rdb redis.UniversalClient, prefix string, maxKeys int) *Store {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Store{rdb: rdb, prefix: prefix, maxKeys: maxKeys}
}

func redisErr(err error) error {
	return &errs.Error{Code: errs.CodeServiceUnavailable, Message: "idempotency key: redis unavailable", Err: err}
}

// Records counts the records principal holds now (for tests and tools).
func (s *Store) Records(ctx context.Context, principal string) (int64, error) {
	return s.records(ctx, principal, time.Now())
}

// records counts principal's records younger than TTL at now.
func (s *Store) records(ctx context.Context, principal string, now time.Time) (int64, error) {
	min := strconv.FormatInt(now.UnixMilli()-TTL.Milliseconds(), 10)
	n, err := s.rdb.ZCount(ctx, s.indexKey(principal), min, "+inf").Result()
	if err != nil {
		return 0, redisErr(err)
	}
	return n, nil
}

// Begin claims key for principal's request with the given fingerprint (a
// hash of what the request does), or reports that it is in progress, was
// used for a different request, or is done (with the response to
// replay).
func (s *Store) Begin(ctx context.Context, principal, key, fingerprint string) (Record, error) {
	return s.begin(ctx, principal, key, fingerprint, time.Now())
}

// begin claims key at now, keeping at most maxKeys records for the
// principal (scriptBegin).
func (s *Store) begin(ctx context.Context, principal, key, fingerprint string, now time.Time) (Record, error) {
	v, err := scriptBegin.Run(ctx, s.rdb, []string{s.recordKey(principal, key), s.indexKey(principal)}, fingerprint,
		pendingTTL.Milliseconds(), now.UnixMilli(), TTL.Milliseconds(), s.maxKeys).Slice()
	if err != nil {
		return Record{}, redisErr(err)
	}
	switch v[0] {
	case "new":
		return Record{State: New}, nil
	case "mismatch":
		return Record{State: Mismatch}, nil
	case "pending":
		return Record{State: InProgress}, nil
	case "done":
		if len(v) == 4 {
			st, _ := v[1].(string)
			ct, _ := v[2].(string)
			body, _ := v[3].(string)
			n, _ := strconv.Atoi(st)
			return Record{State: Done, Status: n, ContentType: ct, Body: []byte(body)}, nil
		}
	}
	return Record{}, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("idempotency key: unexpected answer %v", v)}
}

// Finish stores the response of the pending request that claimed key
// with fingerprint, to be replayed for TTL.
func (s *Store) Finish(ctx context.Context, principal, key, fingerprint string, status int, contentType string, body []byte) error {
	err := scriptFinish.Run(ctx, s.rdb, []string{s.recordKey(principal, key)}, fingerprint,
		strconv.Itoa(status), contentType, body, TTL.Milliseconds()).Err()
	if err != nil {
		return redisErr(err)
	}
	return nil
}

// Abandon frees key while the pending request with fingerprint owns it
// (its request failed: a 5xx is worth retrying, a 4xx changed nothing
// worth replaying), so the next request with it runs again. Its index
// entry stays until it ages out or is pushed out; it names a record that
// no longer exists.
func (s *Store) Abandon(ctx context.Context, principal, key, fingerprint string) error {
	if err := scriptFinish.Run(ctx, s.rdb, []string{s.recordKey(principal, key)}, fingerprint, "", "", "", 0).Err(); err != nil {
		return redisErr(err)
	}
	return nil
}
