package jobs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// idemStore keeps HTTP idempotency records: the Client's
// BeginIdempotent, FinishIdempotent and AbandonIdempotent call nothing
// else, so the records can move to a package of their own, or to memory,
// behind it. The store keeps them in Redis (keys.go: idemKey,
// idemIndexKey).
type idemStore interface {
	idemRecords(ctx context.Context, principal string, now time.Time) (int64, error)
	idemBegin(ctx context.Context, principal, key, fingerprint string, limit int, now time.Time) (IdemRecord, error)
	idemFinish(ctx context.Context, principal, key, fingerprint string, status int, contentType string, body []byte) error
	idemAbandon(ctx context.Context, principal, key, fingerprint string) error
}

var _ idemStore = (*store)(nil)

// idemRecords counts principal's records younger than IdempotencyTTL at
// now.
func (s *store) idemRecords(ctx context.Context, principal string, now time.Time) (int64, error) {
	min := strconv.FormatInt(now.UnixMilli()-IdempotencyTTL.Milliseconds(), 10)
	n, err := s.rdb.ZCount(ctx, idemIndexKey(principal), min, "+inf").Result()
	if err != nil {
		return 0, redisErr("idempotency key", err)
	}
	return n, nil
}

// idemBegin claims key for principal's request with fingerprint, keeping
// at most limit records for the principal (scriptIdemBegin), or reports
// what holds the key.
func (s *store) idemBegin(ctx context.Context, principal, key, fingerprint string, limit int, now time.Time) (IdemRecord, error) {
	v, err := scriptIdemBegin.Run(ctx, s.rdb, []string{idemKey(principal, key), idemIndexKey(principal)}, fingerprint,
		idemPendingTTL.Milliseconds(), now.UnixMilli(), IdempotencyTTL.Milliseconds(), limit).Slice()
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
	case "done":
		if len(v) == 4 {
			st, _ := v[1].(string)
			ct, _ := v[2].(string)
			body, _ := v[3].(string)
			n, _ := strconv.Atoi(st)
			return IdemRecord{State: IdemDone, Status: n, ContentType: ct, Body: []byte(body)}, nil
		}
	}
	return IdemRecord{}, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("idempotency key: unexpected answer %v", v)}
}

// idemFinish stores the response of the pending request that owns key
// with fingerprint, kept for IdempotencyTTL.
func (s *store) idemFinish(ctx context.Context, principal, key, fingerprint string, status int, contentType string, body []byte) error {
	err := scriptIdemFinish.Run(ctx, s.rdb, []string{idemKey(principal, key)}, fingerprint,
		strconv.Itoa(status), contentType, body, IdempotencyTTL.Milliseconds()).Err()
	if err != nil {
		return redisErr("idempotency key", err)
	}
	return nil
}

// idemAbandon frees key while the pending request with fingerprint owns
// it.
func (s *store) idemAbandon(ctx context.Context, principal, key, fingerprint string) error {
	if err := scriptIdemFinish.Run(ctx, s.rdb, []string{idemKey(principal, key)}, fingerprint, "", "", "", 0).Err(); err != nil {
		return redisErr("idempotency key", err)
	}
	return nil
}
