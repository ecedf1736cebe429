// Package claim is the claim chains of table names: what a table name is
// claimed for. A move (rename, deregister, register) copies a table folder
// to another name, which takes many writes; a batch transaction writes
// markers and manifests into the folders of its tables. Were they to
// overlap, the batch could commit into the old name after the copy (its
// version lost, or a half table left there) or the move could carry half a
// batch. So each claims the names it changes first: a batch shares a name
// with other batches (they settle between them on the manifests, table's
// txn.go), a move holds its names alone. A batch that finds a name moved
// answers a conflict at once (batches never wait); a move waits for the
// batches holding its names to finish.
//
// A name's claim is a chain of numbered state objects under
// .mvq-claim/{table folder}, each written with put-if-not-exists like a
// transaction's states: the latest is in force, and an update that loses
// the race for the next number reads again. Only the latest state counts,
// so each update removes the older ones (Recover those left over); a
// writer whose put landed on a pruned number (it read a state that was
// long superseded) sees a newer number in the listing after its put and
// reads again.
//
// A holder stops holding when it releases its claim, and also when it
// stopped without releasing: a batch once its transaction is decided (one
// overdue is recovered first, as any reader does), or when it has no
// record yet and its deadline is one more lease (its TxnTimeout) past; a
// move when its lease (renewed while it copies) is one more lease past.
// (The holder itself checks its deadline before each write: the grace
// covers a pause between that check and the write.) A stopped move is
// completed before its names are claimed again: forward when it had begun
// copying manifests (the destination holds the table: the copy is finished
// and the identity recorded), otherwise there is nothing to undo (the
// source is whole). Recover does the same for every claim, so a killed
// mover or batch frees its names without anyone asking.
//
// The package knows the chains only; what a batch's transaction is and how
// a stopped move is finished are the table package's, handed in as the
// Claims' BatchAlive and FinishMove.
package claim

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
	"github.com/mvq-dev/mvq/table/internal/warehouse"
)

// Dir holds every claim chain.
const Dir = ".mvq-claim/"

// maxAttempts bounds the updates of one chain lost to concurrent ones.
const maxAttempts = 200

// Store is the object operations the chains need (a *warehouse.Warehouse).
type Store interface {
	List(ctx context.Context, prefix string) ([]warehouse.Entry, error)
	Walk(ctx context.Context, prefix string) ([]string, error)
	Read(ctx context.Context, key string) ([]byte, error)
	PutIfNotExists(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
}

// Claims is the claim chains of one warehouse.
type Claims struct {
	Store Store
	// Lease is a holder's default grace past its deadline, and a move's
	// lease (the catalog's TxnTimeout).
	Lease time.Duration
	// BatchAlive reports whether the batch transaction h.ID still holds
	// its names; grace is when a batch without a record stops holding.
	BatchAlive func(ctx context.Context, h Holder, grace time.Time) (bool, error)
	// FinishMove completes a stopped move that had begun copying.
	FinishMove func(ctx context.Context, h Holder) error
}

// Holder is one holder of a name.
type Holder struct {
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

// State is one state of a name's claim chain.
type State struct {
	Seq  uint64   `json:"seq"`
	Txns []Holder `json:"txns,omitempty"`
	Move *Holder  `json:"move,omitempty"`
}

func (s *State) clone() *State {
	n := &State{Txns: append([]Holder(nil), s.Txns...)}
	if s.Move != nil {
		m := *s.Move
		n.Move = &m
	}
	return n
}

// Chain is the chain of the table folder tableKey.
func Chain(tableKey string) string { return Dir + tableKey }

func key(chain string, seq uint64) string { return fmt.Sprintf("%s%020d.json", chain, seq) }

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// seqs lists the state numbers of a chain, ascending.
func (c *Claims) seqs(ctx context.Context, chain string) ([]uint64, error) {
	entries, err := c.Store.List(ctx, chain)
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

// Read returns the latest state of a chain (an empty one, number 0,
// when it has none).
func (c *Claims) Read(ctx context.Context, chain string) (*State, error) {
	for attempt := 0; ; attempt++ {
		seqs, err := c.seqs(ctx, chain)
		if err != nil || len(seqs) == 0 {
			return &State{}, err
		}
		last := seqs[len(seqs)-1]
		b, err := c.Store.Read(ctx, key(chain, last))
		if errors.Is(err, os.ErrNotExist) && attempt < maxAttempts {
			continue // pruned since the listing: a newer state exists
		}
		if err != nil {
			return nil, err
		}
		var st State
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("claim state %s is corrupt", key(chain, last)), Err: err}
		}
		st.Seq = last
		return &st, nil
	}
}

// update appends the state fn derives from the latest one (nil: no
// change) and returns the state in force.
func (c *Claims) update(ctx context.Context, chain string, fn func(cur *State) (*State, error)) (*State, error) {
	for attempt := 0; ; attempt++ {
		cur, err := c.Read(ctx, chain)
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
		err = c.Store.PutIfNotExists(ctx, key(chain, next.Seq), data)
		if err != nil && !errors.Is(err, warehouse.ErrExists) {
			return nil, err
		}
		if err == nil {
			seqs, lerr := c.seqs(ctx, chain)
			if lerr != nil {
				return nil, lerr
			}
			if len(seqs) > 0 && seqs[len(seqs)-1] == next.Seq {
				for _, s := range seqs[:len(seqs)-1] {
					_ = c.Store.Delete(ctx, key(chain, s)) // best effort: only the latest counts
				}
				return next, nil
			}
			// The put filled a pruned number below the latest: stale.
		}
		if attempt >= maxAttempts {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "claim %s: gave up after %d concurrent changes", chain, attempt)
		}
	}
}

// alive reports whether a holder still holds its claim at now (see the
// package comment); a batch's is BatchAlive's answer.
func (c *Claims) alive(ctx context.Context, h Holder, move bool, now time.Time) (bool, error) {
	lease := time.Duration(h.GraceMillis) * time.Millisecond
	if lease <= 0 {
		lease = c.Lease
	}
	grace := time.UnixMilli(h.DeadlineMillis).Add(lease)
	if move {
		return now.Before(grace), nil
	}
	return c.BatchAlive(ctx, h, grace)
}

// errBusy carries why a name cannot be claimed now.
type errBusy struct{ msg string }

func (e *errBusy) Error() string { return e.msg }

// acquire adds h to the claim of one table folder: alone when move, else
// beside other batches. A move waits (until ctx ends) for the batches and
// moves holding the name; a batch gets a errs.CodeConcurrentModification
// error when a move holds it. A stopped move found in the way is
// completed first.
func (c *Claims) acquire(ctx context.Context, folder string, h Holder, move bool) error {
	chain := Chain(folder)
	for {
		var stopped *Holder
		var busy error
		_, err := c.update(ctx, chain, func(cur *State) (*State, error) {
			stopped, busy = nil, nil
			if m := cur.Move; m != nil && m.ID != h.ID {
				alive, err := c.alive(ctx, *m, true, time.Now())
				if err != nil {
					return nil, err
				}
				if alive {
					busy = &errBusy{fmt.Sprintf("is being moved (renamed, deregistered or registered) by operation %s", m.ID)}
				} else {
					stopped = m
				}
				return nil, nil
			}
			next := &State{}
			for _, x := range cur.Txns {
				if x.ID == h.ID {
					continue
				}
				alive, err := c.alive(ctx, x, false, time.Now())
				if err != nil {
					return nil, err
				}
				if alive {
					next.Txns = append(next.Txns, x)
				}
			}
			if move {
				if len(next.Txns) > 0 {
					busy = &errBusy{fmt.Sprintf("has batch transaction %s in flight", next.Txns[0].ID)}
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
			return errs.Errorf(errs.CodeConcurrentModification, "table folder %s %s; try again", strings.TrimSuffix(folder, "/"), busy)
		}
		select {
		case <-ctx.Done():
			return errs.Errorf(errs.CodeServiceUnavailable, "table folder %s %s: %v", strings.TrimSuffix(folder, "/"), busy, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// release removes holder id from a folder's claim.
func (c *Claims) release(ctx context.Context, folder, id string) error {
	_, err := c.update(ctx, Chain(folder), func(cur *State) (*State, error) {
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
func (c *Claims) completeMove(ctx context.Context, chain string, h Holder) error {
	if h.Started {
		if err := c.FinishMove(ctx, h); err != nil {
			return fmt.Errorf("complete the move %s of %s: %w", h.ID, h.From, err)
		}
	}
	_, err := c.update(ctx, chain, func(cur *State) (*State, error) {
		if cur.Move == nil || cur.Move.ID != h.ID {
			return nil, nil
		}
		next := cur.clone()
		next.Move = nil
		return next, nil
	})
	return err
}

// Move is a move's hold on its names.
type Move struct {
	c *Claims
	// H is the move's holder: its ID, From, To, ToID as claimed (the
	// mover may set To before it starts).
	H       Holder
	keys    []string
	renewed time.Time
	// Stuck: a stopped move left for recovery to complete; Release keeps
	// the claim then.
	Stuck bool
}

// sortedUniq sorts keys and drops repeats, in place.
func sortedUniq(keys []string) []string {
	sort.Strings(keys)
	uniq := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			uniq = append(uniq, k)
		}
	}
	return uniq
}

// ClaimMove claims the folders keys (sorted, so two moves meet on the same
// first one) for move id from → to, waiting for their holders.
func (c *Claims) ClaimMove(ctx context.Context, id, from, to string, toID []string, keys ...string) (*Move, error) {
	mc := &Move{c: c, keys: sortedUniq(keys), renewed: time.Now(), H: Holder{
		ID: id, DeadlineMillis: time.Now().Add(c.Lease).UnixMilli(),
		GraceMillis: c.Lease.Milliseconds(), From: from, To: to, ToID: toID,
	}}
	for i, k := range mc.keys {
		if err := c.acquire(ctx, k, mc.H, true); err != nil {
			for _, held := range mc.keys[:i] {
				_ = c.release(context.WithoutCancel(ctx), held, mc.H.ID)
			}
			return nil, err
		}
	}
	return mc, nil
}

// update rewrites the move's holder on each of its chains; it fails when
// another took a name over (the move's lease ran out).
func (mc *Move) update(ctx context.Context, fn func(h *Holder)) error {
	fn(&mc.H)
	for _, k := range mc.keys {
		_, err := mc.c.update(ctx, Chain(k), func(cur *State) (*State, error) {
			if cur.Move == nil || cur.Move.ID != mc.H.ID {
				return nil, errs.Errorf(errs.CodeConcurrentModification, "move %s of %s: its claim on %s ran out (lease %s) and was taken over; nothing more moved", mc.H.ID, mc.H.From, strings.TrimSuffix(k, "/"), mc.c.Lease)
			}
			next := cur.clone()
			h := mc.H
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

// Start records that the move is about to copy the table with identity
// uuid (a stopped move is completed from here on).
func (mc *Move) Start(ctx context.Context, uuid string) error {
	return mc.update(ctx, func(h *Holder) {
		h.UUID, h.Started = uuid, true
		h.DeadlineMillis = time.Now().Add(mc.c.Lease).UnixMilli()
	})
}

// Hold renews the lease once half of it has passed; the mover calls it
// between writes.
func (mc *Move) Hold(ctx context.Context) error {
	if time.Since(mc.renewed) < mc.c.Lease/2 {
		return nil
	}
	return mc.update(ctx, func(h *Holder) { h.DeadlineMillis = time.Now().Add(mc.c.Lease).UnixMilli() })
}

// Release gives the move's names back (unless it is Stuck).
func (mc *Move) Release(ctx context.Context) {
	if mc.Stuck {
		return
	}
	for _, k := range mc.keys {
		_ = mc.c.release(context.WithoutCancel(ctx), k, mc.H.ID)
	}
}

// Shared claims table folders keys beside other batches (a move waits for
// them; a move holding one is a conflict at once) for holder id until
// deadline; it returns the release.
func (c *Claims) Shared(ctx context.Context, id string, deadline time.Time, keys []string) (func(), error) {
	uniq := sortedUniq(keys)
	h := Holder{ID: id, DeadlineMillis: deadline.UnixMilli(), GraceMillis: c.Lease.Milliseconds()}
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
		each(held, func(k string) error { return c.release(context.WithoutCancel(ctx), k, id) })
	}
	errList := each(uniq, func(k string) error { return c.acquire(ctx, k, h, false) })
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

// Recover takes stopped holders off every claim chain (completing
// stopped moves) and reports how many it took off. A move holds the
// chains of all its names with one deadline: the pass judges every chain
// at the instant it began, so that a move whose lease runs out during the
// pass is taken off all of its chains or none (else one pass would clear
// the chains it reached last and leave the others to the next).
func (c *Claims) Recover(ctx context.Context) (int, error) {
	now := time.Now()
	files, err := c.Store.Walk(ctx, Dir)
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
		if seqs, err := c.seqs(ctx, chain); err == nil && len(seqs) > 1 {
			for _, s := range seqs[:len(seqs)-1] {
				_ = ignoreMissing(c.Store.Delete(ctx, key(chain, s)))
			}
		}
		var stopped *Holder
		removed := 0
		_, err := c.update(ctx, chain, func(cur *State) (*State, error) {
			stopped, removed = nil, 0
			next := cur.clone()
			next.Txns = next.Txns[:0]
			for _, x := range cur.Txns {
				alive, err := c.alive(ctx, x, false, now)
				if err != nil {
					return nil, err
				}
				if alive {
					next.Txns = append(next.Txns, x)
				}
			}
			if m := cur.Move; m != nil {
				if alive, _ := c.alive(ctx, *m, true, now); !alive {
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
