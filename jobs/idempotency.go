package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Idempotency records: mvq:idem:{sha256(principal NUL key)} is a hash with
// the request's fingerprint, its state (pending, done) and, once done, the
// response's status, content type and body.
const (
	// IdempotencyTTL is how long a finished request's response is replayed.
	IdempotencyTTL = 24 * time.Hour
	// idemPendingTTL bounds how long a request that never finished (its
	// process died) keeps its key busy.
	idemPendingTTL = 15 * time.Minute
)

func idemKey(principal, key string) string {
	h := sha256.Sum256([]byte(principal + "\x00" + key))
	return keyPrefix + "idem:" + hex.EncodeToString(h[:])
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

// scriptIdemBegin claims an idempotency key or reports what holds it.
//
// KEYS: record. ARGV: fingerprint, pending TTL ms.
// Returns {"new"}, {"mismatch"}, {"pending"} or {"done", status, ctype, body}.
var scriptIdemBegin = redis.NewScript(`
local fp = redis.call('HGET', KEYS[1], 'fp')
if not fp then
  redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'pending')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'new'}
end
if fp ~= ARGV[1] then return {'mismatch'} end
local v = redis.call('HMGET', KEYS[1], 'state', 'status', 'ctype', 'body')
if v[1] ~= 'done' then return {'pending'} end
return {'done', v[2], v[3] or '', v[4] or ''}
`)

// scriptIdemFinish stores the response of the pending request that owns
// the key (same fingerprint), or, with an empty status, frees the key.
//
// KEYS: record. ARGV: fingerprint, status ("" to abandon), ctype, body, TTL ms.
var scriptIdemFinish = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'pending' then return 0 end
if ARGV[2] == '' then return redis.call('DEL', KEYS[1]) end
redis.call('HSET', KEYS[1], 'state', 'done', 'status', ARGV[2], 'ctype', ARGV[3], 'body', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)

// BeginIdempotent claims key for principal's request with the given
// fingerprint (a hash of what the request does), or reports that it is in
// progress, was used for a different request, or is done (with the
// response to replay).
func (c *Client) BeginIdempotent(ctx context.Context, principal, key, fingerprint string) (IdemRecord, error) {
	v, err := scriptIdemBegin.Run(ctx, c.st.rdb, []string{idemKey(principal, key)}, fingerprint, idemPendingTTL.Milliseconds()).Slice()
	if err != nil {
		return IdemRecord{}, redisErr("idempotency key", err)
	}
	switch v[0] {
	case "new":
		return IdemRecord{State: IdemNew}, nil
	case "mismatch":
		return IdemRecord{State: IdemMismatch}, nil
	case "pending":
		return IdemRecord{State: IdemInProgress}, nil
	}
	st, _ := v[1].(string)
	ct, _ := v[2].(string)
	body, _ := v[3].(string)
	n, _ := strconv.Atoi(st)
	return IdemRecord{State: IdemDone, Status: n, ContentType: ct, Body: []byte(body)}, nil
}

// FinishIdempotent stores the response of the request that claimed key,
// to be replayed for IdempotencyTTL.
func (c *Client) FinishIdempotent(ctx context.Context, principal, key, fingerprint string, status int, contentType string, body []byte) error {
	err := scriptIdemFinish.Run(ctx, c.st.rdb, []string{idemKey(principal, key)}, fingerprint,
		strconv.Itoa(status), contentType, body, IdempotencyTTL.Milliseconds()).Err()
	if err != nil {
		return redisErr("idempotency key", err)
	}
	return nil
}

// AbandonIdempotent frees key (its request failed in a way worth
// retrying: a 5xx), so the next request with it runs again.
func (c *Client) AbandonIdempotent(ctx context.Context, principal, key, fingerprint string) error {
	err := scriptIdemFinish.Run(ctx, c.st.rdb, []string{idemKey(principal, key)}, fingerprint, "", "", "", 0).Err()
	if err != nil {
		return redisErr("idempotency key", err)
	}
	return nil
}
