package table

import (
	"context"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/claim"
)

// Claims: what a table name is claimed for (table/internal/claim). A move
// (rename, deregister, register) holds its names alone; a batch
// transaction shares them with other batches. Here is what the claim
// chains ask of the catalog: whether a batch's transaction still holds its
// names, and how a stopped move is finished.

// claims is the catalog's claim chains.
func (c *Catalog) claims() *claim.Claims {
	return &claim.Claims{Store: c.wh, Lease: c.opts.TxnTimeout, BatchAlive: c.batchAlive, FinishMove: c.finishMove}
}

// batchAlive reports whether batch h still holds its claim: until its
// transaction is decided (an overdue Running one is recovered), or without
// a record until grace.
func (c *Catalog) batchAlive(ctx context.Context, h claim.Holder, grace time.Time) (bool, error) {
	rec, cur, err := c.txns().Read(ctx, h.ID)
	if errs.CodeOf(err) == errs.CodeTransactionNotFound {
		return time.Now().Before(grace), nil
	}
	if err != nil {
		return false, err
	}
	if cur.Status.Final() {
		return false, nil
	}
	if time.Now().Before(time.UnixMilli(rec.DeadlineMillis)) {
		return true, nil
	}
	st, err := c.settleTxn(ctx, h.ID, false)
	return err == nil && !st.Final(), err
}

// finishMove runs a stopped move again when the destination holds the
// moved table (by identity) and the source holds it or nothing: copying
// is idempotent, and the source goes once everything is copied.
func (c *Catalog) finishMove(ctx context.Context, h claim.Holder) error {
	identityAt := func(key string) (string, bool, error) {
		t := &Table{c: c, key: key, id: []string{strings.TrimSuffix(key, "/")}}
		vs, err := t.Versions(ctx)
		if err != nil || len(vs) == 0 {
			return "", false, err
		}
		m, err := t.readManifest(ctx, vs[len(vs)-1])
		if err != nil {
			return "", false, err
		}
		u, err := t.Identity(ctx, m)
		return u, true, err
	}
	du, ok, err := identityAt(h.To)
	if err != nil {
		return err
	}
	if !ok || du != h.UUID {
		// The copy never reached the manifests: the source is whole, and
		// writable again once its seals are gone.
		return c.unseal(ctx, h.From, h.ID)
	}
	su, ok, err := identityAt(h.From)
	if err != nil {
		return err
	}
	if ok && su != h.UUID {
		return nil // another table took the source name since
	}
	if err := c.moveFolder(ctx, h.From, h.To); err != nil {
		return err
	}
	return c.recordIdentity(ctx, h.UUID, h.ToID)
}

// claimMove claims the folders keys for a move from → to (a new
// operation), waiting for their holders.
func (c *Catalog) claimMove(ctx context.Context, from, to string, toID []string, keys ...string) (*claim.Move, error) {
	return c.claims().ClaimMove(ctx, newIdentity(), from, to, toID, keys...)
}

// claimBatch claims the table folders of a batch's entries (those with a
// valid identifier: the others are refused before anything is written)
// for transaction id; it returns the release.
func (c *Catalog) claimBatch(ctx context.Context, id string, deadline time.Time, entries []BatchVersion) (func(), error) {
	var keys []string
	for _, e := range entries {
		valid := len(e.ID) > 0
		for _, p := range e.ID {
			valid = valid && ValidatePart(p) == nil
		}
		if valid {
			keys = append(keys, tableKey(e.ID))
		}
	}
	return c.claims().Shared(ctx, id, deadline, keys)
}
