package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// Claims: what a table name is claimed for. A move (rename, deregister,
// register) copies a table folder to another name, which takes many
// writes; a batch transaction writes markers and manifests into the
// folders of its tables. Were they to overlap, the batch could commit into
// the old name after the copy (its version lost, or a half table left
// there) or the move could carry half a batch. So each claims the names it
// changes first: a batch shares a name with other batches (they settle
// between them on the manifests, txn.go), a move holds its names alone.
// A batch that finds a name moved answers a conflict at once (batches
// never wait); a move waits for the batches holding its names to finish.
//
// A name's claim is a chain of numbered state objects under
// .mvq-claim/{table folder}, each written with put-if-not-exists like a
// transaction's states: the latest is in force, and an update that loses
// the race for the next number reads again. Only the latest state counts,
// so each update removes the older ones (RecoverTransactions those left
// over); a writer whose put landed on a pruned number (it read a state
// that was long superseded) sees a newer number in the listing after its
// put and reads again.
//
// A holder stops holding when it releases its claim, and also when it
// stopped without releasing: a batch once its transaction is decided (one
// overdue is recovered first, as any reader does), or when it has no
// record yet and its deadline is one more lease (its TxnTimeout) past; a
// move when its lease (renewed while it copies) is one more lease past.
// (The holder itself checks its deadline before each write: the grace
// covers a pause between that check and the write.) A stopped move
// is completed before its names are claimed again: forward when it
// had begun copying manifests (the destination holds the table: the copy
// is finished and the identity recorded), otherwise there is nothing to
// undo (the source is whole). RecoverTransactions does the same for every
// claim, so a killed mover or batch frees its names without anyone asking.

const claimDir = ".mvq-claim/"

// claimHolder is one holder of a name.
type claimHolder struct {
	ID             string `json:"id"`
	DeadlineMillis int64  `json:"deadline_millis"`
	// GraceMillis is how long past the deadline the holder still holds:
	// its lease (TxnTimeout where it runs).
	GraceMillis int64 `json:"grace_millis,omitempty"`
	// A move's: its source and destination folders, the identifier the
	// table gets (nil: it leaves the catalog), the table's identity, and
	// whether manifests may have been copied (recovery completes it then).
	From    string   `json:"from,omitempty"`
	To      string   `json:"to,omitempty"`
	ToID    []string `json:"to_id,omitempty"`
	UUID    string   `json:"uuid,omitempty"`
	Started bool     `json:"started,omitempty"`
}

// claimState is one state of a name's claim chain.
type claimState struct {
	Seq  uint64        `json:"seq"`
	Txns []claimHolder `json:"txns,omitempty"`
	Move *claimHolder  `json:"move,omitempty"`
}

func (s *claimState) clone() *claimState {
	n := &claimState{Txns: append([]claimHolder(nil), s.Txns...)}
	if s.Move != nil {
		m := *s.Move
		n.Move = &m
	}
	return n
}

func claimChain(tableKey string) string { return claimDir + tableKey }

func claimKey(chain string, seq uint64) string { return fmt.Sprintf("%s%020d.json", chain, seq) }

// claimSeqs lists the state numbers of a chain, ascending.
func (c *Catalog) claimSeqs(ctx context.Context, chain string) ([]uint64, error) {
	entries, err := c.wh.List(ctx, chain)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		var seq uint64
		if e.IsDir || len(e.Name) != 25 {
			continue
		}
		if _, err := fmt.Sscanf(e.Name, "%020d.json", &seq); err == nil {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// readClaim returns the latest state of a chain (an empty one, number 0,
// when it has none).
func (c *Catalog) readClaim(ctx context.Context, chain string) (*claimState, error) {
	for attempt := 0; ; attempt++ {
		seqs, err := c.claimSeqs(ctx, chain)
		if err != nil || len(seqs) == 0 {
			return &claimState{}, err
		}
		last := seqs[len(seqs)-1]
		b, err := c.wh.Read(ctx, claimKey(chain, last))
		if errors.Is(err, os.ErrNotExist) && attempt < maxCommitAttempts {
			continue // pruned since the listing: a newer state exists
		}
		if err != nil {
			return nil, err
		}
		var st claimState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("claim state %s is corrupt", claimKey(chain, last)), Err: err}
		}
		st.Seq = last
		return &st, nil
	}
}

// updateClaim appends the state fn derives from the latest one (nil: no
// change) and returns the state in force.
func (c *Catalog) updateClaim(ctx context.Context, chain string, fn func(cur *claimState) (*claimState, error)) (*claimState, error) {
	for attempt := 0; ; attempt++ {
		cur, err := c.readClaim(ctx, chain)
		if err != nil {
			return nil, err
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return cur, err
		}
		next.Seq = cur.Seq + 1
		data, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		err = c.wh.PutIfNotExists(ctx, claimKey(chain, next.Seq), data)
		if err != nil && !errors.Is(err, ErrExists) {
			return nil, err
		}
		if err == nil {
			seqs, lerr := c.claimSeqs(ctx, chain)
			if lerr != nil {
				return nil, lerr
			}
			if len(seqs) > 0 && seqs[len(seqs)-1] == next.Seq {
				for _, s := range seqs[:len(seqs)-1] {
					_ = c.wh.Delete(ctx, claimKey(chain, s)) // best effort: only the latest counts
				}
				return next, nil
			}
			// The put filled a pruned number below the latest: stale.
		}
		if attempt >= maxCommitAttempts {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "claim %s: gave up after %d concurrent changes", chain, attempt)
		}
	}
}

// holderAlive reports whether a holder still holds its claim (see the
// package comment above); an overdue Running transaction is recovered.
func (c *Catalog) holderAlive(ctx context.Context, h claimHolder, move bool) (bool, error) {
	lease := time.Duration(h.GraceMillis) * time.Millisecond
	if lease <= 0 {
		lease = c.opts.TxnTimeout
	}
	grace := time.UnixMilli(h.DeadlineMillis).Add(lease)
	if move {
		return time.Now().Before(grace), nil
	}
	rec, cur, err := c.readTxn(ctx, h.ID)
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

// errClaimBusy carries why a name cannot be claimed now.
type errClaimBusy struct{ msg string }

func (e *errClaimBusy) Error() string { return e.msg }

// acquireClaim adds h to the claim of one table folder: alone when move,
// else beside other batches. A move waits (until ctx ends) for the
// batches and moves holding the name; a batch gets a
// errs.CodeConcurrentModification error when a move holds it. A stopped move
// found in the way is completed first.
func (c *Catalog) acquireClaim(ctx context.Context, key string, h claimHolder, move bool) error {
	chain := claimChain(key)
	for {
		var stopped *claimHolder
		var busy error
		_, err := c.updateClaim(ctx, chain, func(cur *claimState) (*claimState, error) {
			stopped, busy = nil, nil
			if m := cur.Move; m != nil && m.ID != h.ID {
				alive, err := c.holderAlive(ctx, *m, true)
				if err != nil {
					return nil, err
				}
				if alive {
					busy = &errClaimBusy{fmt.Sprintf("is being moved (renamed, deregistered or registered) by operation %s", m.ID)}
				} else {
					stopped = m
				}
				return nil, nil
			}
			next := &claimState{}
			for _, x := range cur.Txns {
				if x.ID == h.ID {
					continue
				}
				alive, err := c.holderAlive(ctx, x, false)
				if err != nil {
					return nil, err
				}
				if alive {
					next.Txns = append(next.Txns, x)
				}
			}
			if move {
				if len(next.Txns) > 0 {
					busy = &errClaimBusy{fmt.Sprintf("has batch transaction %s in flight", next.Txns[0].ID)}
					return nil, nil
				}
				mh := h
				next.Move = &mh
			} else {
				next.Txns = append(next.Txns, h)
			}
			return next, nil
		})
		if err != nil {
			return err
		}
		switch {
		case stopped != nil:
			if err := c.completeMove(ctx, chain, *stopped); err != nil {
				return err
			}
			continue
		case busy == nil:
			return nil
		case !move:
			return errs.Errorf(errs.CodeConcurrentModification, "table folder %s %s; try again", strings.TrimSuffix(key, "/"), busy)
		}
		select {
		case <-ctx.Done():
			return errs.Errorf(errs.CodeServiceUnavailable, "table folder %s %s: %v", strings.TrimSuffix(key, "/"), busy, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// releaseClaim removes holder id from a folder's claim.
func (c *Catalog) releaseClaim(ctx context.Context, key, id string) error {
	_, err := c.updateClaim(ctx, claimChain(key), func(cur *claimState) (*claimState, error) {
		next := cur.clone()
		next.Txns = next.Txns[:0]
		for _, x := range cur.Txns {
			if x.ID != id {
				next.Txns = append(next.Txns, x)
			}
		}
		if next.Move != nil && next.Move.ID == id {
			next.Move = nil
		}
		if len(next.Txns) == len(cur.Txns) && (next.Move == nil) == (cur.Move == nil) {
			return nil, nil
		}
		return next, nil
	})
	return err
}

// completeMove finishes a move whose mover stopped (forward, when it had
// begun copying manifests and the table is at the destination) and takes
// it off the chain.
func (c *Catalog) completeMove(ctx context.Context, chain string, h claimHolder) error {
	if h.Started {
		if err := c.finishMove(ctx, h); err != nil {
			return fmt.Errorf("complete the move %s of %s: %w", h.ID, h.From, err)
		}
	}
	_, err := c.updateClaim(ctx, chain, func(cur *claimState) (*claimState, error) {
		if cur.Move == nil || cur.Move.ID != h.ID {
			return nil, nil
		}
		next := cur.clone()
		next.Move = nil
		return next, nil
	})
	return err
}

// finishMove runs a stopped move again when the destination holds the
// moved table (by identity) and the source holds it or nothing: copying
// is idempotent, and the source goes once everything is copied.
func (c *Catalog) finishMove(ctx context.Context, h claimHolder) error {
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

// moveClaim is a move's hold on its names.
type moveClaim struct {
	c       *Catalog
	keys    []string
	h       claimHolder
	renewed time.Time
	// stuck: a stopped move left for recovery to complete; release keeps
	// the claim then.
	stuck bool
}

// claimMove claims the folders keys (sorted, so two moves meet on the same
// first one) for a move from → to, waiting for their holders.
func (c *Catalog) claimMove(ctx context.Context, from, to string, toID []string, keys ...string) (*moveClaim, error) {
	sort.Strings(keys)
	uniq := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			uniq = append(uniq, k)
		}
	}
	mc := &moveClaim{c: c, keys: uniq, renewed: time.Now(), h: claimHolder{
		ID: newIdentity(), DeadlineMillis: time.Now().Add(c.opts.TxnTimeout).UnixMilli(),
		GraceMillis: c.opts.TxnTimeout.Milliseconds(), From: from, To: to, ToID: toID,
	}}
	for i, k := range mc.keys {
		if err := c.acquireClaim(ctx, k, mc.h, true); err != nil {
			for _, held := range mc.keys[:i] {
				_ = c.releaseClaim(context.WithoutCancel(ctx), held, mc.h.ID)
			}
			return nil, err
		}
	}
	return mc, nil
}

// update rewrites the move's holder on each of its chains; it fails when
// another took a name over (the move's lease ran out).
func (mc *moveClaim) update(ctx context.Context, fn func(h *claimHolder)) error {
	fn(&mc.h)
	for _, k := range mc.keys {
		_, err := mc.c.updateClaim(ctx, claimChain(k), func(cur *claimState) (*claimState, error) {
			if cur.Move == nil || cur.Move.ID != mc.h.ID {
				return nil, errs.Errorf(errs.CodeConcurrentModification, "move %s of %s: its claim on %s ran out (lease %s) and was taken over; nothing more moved", mc.h.ID, mc.h.From, strings.TrimSuffix(k, "/"), mc.c.opts.TxnTimeout)
			}
			next := cur.clone()
			h := mc.h
			next.Move = &h
			return next, nil
		})
		if err != nil {
			return err
		}
	}
	mc.renewed = time.Now()
	return nil
}

// start records that the move is about to copy the table with identity
// uuid (a stopped move is completed from here on).
func (mc *moveClaim) start(ctx context.Context, uuid string) error {
	return mc.update(ctx, func(h *claimHolder) {
		h.UUID, h.Started = uuid, true
		h.DeadlineMillis = time.Now().Add(mc.c.opts.TxnTimeout).UnixMilli()
	})
}

// hold renews the lease once half of it has passed; the mover calls it
// between writes.
func (mc *moveClaim) hold(ctx context.Context) error {
	if time.Since(mc.renewed) < mc.c.opts.TxnTimeout/2 {
		return nil
	}
	return mc.update(ctx, func(h *claimHolder) { h.DeadlineMillis = time.Now().Add(mc.c.opts.TxnTimeout).UnixMilli() })
}

func (mc *moveClaim) release(ctx context.Context) {
	if mc.stuck {
		return
	}
	for _, k := range mc.keys {
		_ = mc.c.releaseClaim(context.WithoutCancel(ctx), k, mc.h.ID)
	}
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
	return c.claimShared(ctx, id, deadline, keys)
}

// claimShared claims table folders keys beside other batches (a move
// waits for them; a move holding one is a conflict at once) for holder
// id until deadline; it returns the release.
func (c *Catalog) claimShared(ctx context.Context, id string, deadline time.Time, keys []string) (func(), error) {
	sort.Strings(keys)
	uniq := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			uniq = append(uniq, k)
		}
	}
	h := claimHolder{ID: id, DeadlineMillis: deadline.UnixMilli(), GraceMillis: c.opts.TxnTimeout.Milliseconds()}
	// A batch never waits for a claim, so its names are claimed (and
	// released) all at once.
	each := func(keys []string, fn func(string) error) []error {
		errList := make([]error, len(keys))
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errList[i] = fn(k)
			}()
		}
		wg.Wait()
		return errList
	}
	release := func(held []string) {
		each(held, func(k string) error { return c.releaseClaim(context.WithoutCancel(ctx), k, id) })
	}
	errList := each(uniq, func(k string) error { return c.acquireClaim(ctx, k, h, false) })
	var held []string
	var first error
	for i, err := range errList {
		if err == nil {
			held = append(held, uniq[i])
		} else if first == nil {
			first = err
		}
	}
	if first != nil {
		release(held)
		return nil, first
	}
	return func() { release(uniq) }, nil
}

// recoverClaims takes stopped holders off every claim chain (completing
// stopped moves) and reports how many it took off.
func (c *Catalog) recoverClaims(ctx context.Context) (int, error) {
	files, err := c.wh.walk(ctx, claimDir)
	if err != nil {
		return 0, err
	}
	chains := map[string]bool{}
	for _, f := range files {
		chains[path.Dir(f)+"/"] = true
	}
	n := 0
	var errList []error
	for chain := range chains {
		// Only the latest state counts: older ones left over go.
		if seqs, err := c.claimSeqs(ctx, chain); err == nil && len(seqs) > 1 {
			for _, s := range seqs[:len(seqs)-1] {
				_ = ignoreMissing(c.wh.Delete(ctx, claimKey(chain, s)))
			}
		}
		var stopped *claimHolder
		removed := 0
		_, err := c.updateClaim(ctx, chain, func(cur *claimState) (*claimState, error) {
			stopped, removed = nil, 0
			next := cur.clone()
			next.Txns = next.Txns[:0]
			for _, x := range cur.Txns {
				alive, err := c.holderAlive(ctx, x, false)
				if err != nil {
					return nil, err
				}
				if alive {
					next.Txns = append(next.Txns, x)
				}
			}
			if m := cur.Move; m != nil {
				if alive, _ := c.holderAlive(ctx, *m, true); !alive {
					stopped = m
				}
			}
			if len(next.Txns) == len(cur.Txns) {
				return nil, nil
			}
			removed = len(cur.Txns) - len(next.Txns)
			return next, nil
		})
		n += removed
		if err == nil && stopped != nil {
			if err = c.completeMove(ctx, chain, *stopped); err == nil {
				n++
			}
		}
		if err != nil {
			errList = append(errList, err)
		}
	}
	return n, errors.Join(errList...)
}
