package jobs

import (
	"context"
	"time"
)

// Idempotency records: mvq:idem:{sha256(principal NUL key)} is a hash with
// the request's fingerprint, its state (pending, done) and, once done, the
// response's status, content type and body. mvq:idem-of:{sha256(principal)}
// is the principal's index of its records (a sorted set, by creation time
// in ms), which bounds how many a principal keeps: past
// IdempotencyMaxKeys, claiming a new key drops the principal's oldest
// record.
const (
	// DefaultIdempotencyMaxKeys is the records one principal keeps unless
	// configured (IdempotencyMaxKeys).
	DefaultIdempotencyMaxKeys = 1000

	// IdempotencyTTL is how long a finished request's response is replayed.
	IdempotencyTTL = 24 * time.Hour
	// idemPendingTTL bounds how long a request that never finished (its
	// process died) keeps its key busy.
	idemPendingTTL = 15 * time.Minute
)

// IdempotencyMaxKeys bounds the idempotency records one principal keeps
// (n <= 0: DefaultIdempotencyMaxKeys).
func IdempotencyMaxKeys(n int) ClientOption {
	return func(c *Client) {
		if n <= 0 {
			n = DefaultIdempotencyMaxKeys
		}
		c.idemMax = n
	}
}

// IdempotencyRecords counts the records principal holds now (for tests
// and tools).
func (c *Client) IdempotencyRecords(ctx context.Context, principal string) (int64, error) {
	return c.idem.idemRecords(ctx, principal, time.Now())
}

// IdemState is what BeginIdempotent found.
type IdemState int

const (
	IdemNew        IdemState = iota // first use: run the request, then Finish or Abandon
	IdemInProgress                  // the same request is running now
	IdemMismatch                    // the key was used for a different request
	IdemDone                        // finished before: replay Status, ContentType, Body
)

// IdemRecord is a stored response.
type IdemRecord struct {
	State       IdemState
	Status      int
	ContentType string
	Body        []byte
}

// BeginIdempotent claims key for principal's request with the given
// fingerprint (a hash of what the request does), or reports that it is in
// progress, was used for a different request, or is done (with the
// response to replay).
func (c *Client) BeginIdempotent(ctx context.Context, principal, key, fingerprint string) (IdemRecord, error) {
	limit := c.idemMax
	if limit <= 0 {
		limit = DefaultIdempotencyMaxKeys
	}
	return c.idem.idemBegin(ctx, principal, key, fingerprint, limit, time.Now())
}

// FinishIdempotent stores the response of the request that claimed key,
// to be replayed for IdempotencyTTL.
func (c *Client) FinishIdempotent(ctx context.Context, principal, key, fingerprint string, status int, contentType string, body []byte) error {
	return c.idem.idemFinish(ctx, principal, key, fingerprint, status, contentType, body)
}

// AbandonIdempotent frees key (its request failed: a 5xx is worth
// retrying, a 4xx changed nothing worth replaying), so the next request
// with it runs again. Its index entry stays until it ages out or is
// pushed out; it names a record that no longer exists.
func (c *Client) AbandonIdempotent(ctx context.Context, principal, key, fingerprint string) error {
	return c.idem.idemAbandon(ctx, principal, key, fingerprint)
}
