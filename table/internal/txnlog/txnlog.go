// Package txnlog is the state chains of batch transactions: a
// transaction T lives under .mvq-txn/{T}/ as numbered state objects, each
// written with put-if-not-exists: 0 is the record (the tables, versions and
// manifest names, a deadline, status Running), and each later one carries
// the whole state (status, properties). The first state with a final
// status (Succeeded, Failed, Canceled) is the decision; since every state
// is a put-if-not-exists of the next number, exactly one decision is ever
// written. What a transaction writes into its tables, and how it is
// finalized, rolled back or recovered, is the table package's (txn.go).
package txnlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/warehouse"
)

// Dir holds every transaction's chain.
const Dir = ".mvq-txn/"

// maxAttempts bounds the updates of one chain lost to concurrent ones.
const maxAttempts = 200

// Store is the object operations the chains need (a *warehouse.Warehouse).
type Store interface {
	List(ctx context.Context, prefix string) ([]warehouse.Entry, error)
	Read(ctx context.Context, key string) ([]byte, error)
	PutIfNotExists(ctx context.Context, key string, data []byte) error
}

// Log is the transactions of one warehouse.
type Log struct{ Store Store }

// Forget drops id from the cache of decisions (its chain was removed).
func (l Log) Forget(id string) { decided.Delete(decidedKey{l.Store, id}) }

// Status is the spec's TransactionStatus.
type Status string

// Transaction statuses. A batch is Running until decided; Queued is never
// used.
const (
	Queued    Status = "Queued"
	Running   Status = "Running"
	Succeeded Status = "Succeeded"
	Failed    Status = "Failed"
	Canceled  Status = "Canceled"
)

// Final reports whether s is a decision.
func (s Status) Final() bool { return s == Succeeded || s == Failed || s == Canceled }

// ParseStatus reads a status case-insensitively, in PascalCase or
// snake_case.
func ParseStatus(s string) (Status, bool) {
	for _, st := range []Status{Queued, Running, Succeeded, Failed, Canceled} {
		if strings.EqualFold(strings.ReplaceAll(s, "_", ""), string(st)) {
			return st, true
		}
	}
	return "", false
}

// Entry is one table version of a transaction.
type Entry struct {
	Table    []string `json:"table"`
	Version  uint64   `json:"version"`
	Manifest string   `json:"manifest"` // file name under _versions/
	// Branch is the line the entry commits to ("": main); its
	// _versions/ folder holds the marker and manifest (table/branch_line.go).
	Branch string `json:"branch,omitempty"`
	// Op is what the entry does (table/txn_ops.go): "" writes version Version
	// (Manifest); the others declare the table, delete the versions
	// named in Deleted, or deregister it (identity UUID; Manifest is then
	// the version its marker is named after).
	Op         string            `json:"op,omitempty"`
	Deleted    []string          `json:"deleted,omitempty"`
	UUID       string            `json:"uuid,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

// State is one object of a transaction's state chain; seq 0, the
// record, also holds what the transaction writes.
type State struct {
	Seq        uint64            `json:"seq"`
	Status     Status            `json:"status"`
	Reason     string            `json:"reason,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Millis     int64             `json:"millis"`
	// Record only.
	Operation      string  `json:"operation,omitempty"`
	DeadlineMillis int64   `json:"deadline_millis,omitempty"`
	Entries        []Entry `json:"entries,omitempty"`
}

func key(id string, seq uint64) string { return fmt.Sprintf("%s%s/%020d.json", Dir, id, seq) }

// ValidID reports whether id can name a transaction: a UUID in its
// canonical form, so it is safe in a key.
func ValidID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// decided caches final statuses (they never change) by warehouse and id.
var (
	decided  sync.Map // decidedKey → Status
	ndecided atomic.Int64
)

type decidedKey struct {
	wh Store
	id string
}

const maxDecidedCache = 1 << 14

func rememberDecided(wh Store, id string, st Status) {
	if ndecided.Add(1) > maxDecidedCache {
		decided.Clear()
		ndecided.Store(0)
	}
	decided.Store(decidedKey{wh, id}, st)
}

// Read returns a transaction's record and its latest state.
func (l Log) Read(ctx context.Context, id string) (rec, cur *State, err error) {
	last, err := l.LastSeq(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if rec, err = l.ReadState(ctx, id, 0); err != nil {
		return nil, nil, err
	}
	if last == 0 {
		return rec, rec, nil
	}
	cur, err = l.ReadState(ctx, id, last)
	return rec, cur, err
}

// LastSeq is the number of a transaction's latest state.
func (l Log) LastSeq(ctx context.Context, id string) (uint64, error) {
	if !ValidID(id) {
		return 0, errs.Errorf(errs.CodeTransactionNotFound, "transaction %s not found", id)
	}
	entries, err := l.Store.List(ctx, Dir+id+"/")
	if err != nil {
		return 0, err
	}
	var last uint64
	found := false
	for _, e := range entries {
		var seq uint64
		if _, err := fmt.Sscanf(e.Name, "%020d.json", &seq); err != nil || e.IsDir {
			continue
		}
		if !found || seq > last {
			last = seq
		}
		found = true
	}
	if !found {
		return 0, errs.Errorf(errs.CodeTransactionNotFound, "transaction %s not found", id)
	}
	return last, nil
}

func (l Log) ReadState(ctx context.Context, id string, seq uint64) (*State, error) {
	b, err := l.Store.Read(ctx, key(id, seq))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.Errorf(errs.CodeTransactionNotFound, "transaction %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("transaction %s state %d is corrupt", id, seq), Err: err}
	}
	return &st, nil
}

// Status is the transaction's status; a transaction that does not
// exist counts as failed (it can never commit).
func (l Log) Status(ctx context.Context, id string) (Status, error) {
	if v, ok := decided.Load(decidedKey{l.Store, id}); ok {
		return v.(Status), nil
	}
	// Readers need only the latest state: one listing and one read.
	last, err := l.LastSeq(ctx, id)
	var cur *State
	if err == nil {
		cur, err = l.ReadState(ctx, id, last)
	}
	if errs.CodeOf(err) == errs.CodeTransactionNotFound {
		return Failed, nil
	}
	if err != nil {
		return "", err
	}
	if cur.Status.Final() {
		rememberDecided(l.Store, id, cur.Status)
	}
	return cur.Status, nil
}

// Update appends the state fn derives from the latest one (nil: no
// change) with put-if-not-exists, deriving again when another writer
// appended first. It returns the latest state.
func (l Log) Update(ctx context.Context, id string, fn func(rec, cur *State) (*State, error)) (*State, error) {
	for attempt := 0; ; attempt++ {
		rec, cur, err := l.Read(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := fn(rec, cur)
		if err != nil || next == nil {
			return cur, err
		}
		next.Seq = cur.Seq + 1
		next.Millis = time.Now().UnixMilli()
		data, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		err = l.Store.PutIfNotExists(ctx, key(id, next.Seq), data)
		if err == nil {
			if next.Status.Final() {
				rememberDecided(l.Store, id, next.Status)
			}
			return next, nil
		}
		if !errors.Is(err, warehouse.ErrExists) {
			return nil, err
		}
		if attempt >= maxAttempts {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "transaction %s: gave up after %d concurrent changes", id, attempt)
		}
	}
}

// Decide writes status as the transaction's decision unless it has one;
// it returns the decision in force.
func (l Log) Decide(ctx context.Context, id string, status Status, reason string) (*State, error) {
	return l.Update(ctx, id, func(_, cur *State) (*State, error) {
		if cur.Status.Final() {
			return nil, nil
		}
		return &State{Status: status, Reason: reason, Properties: cur.Properties}, nil
	})
}

// Record writes data as transaction id's record (state 0) with
// put-if-not-exists.
func (l Log) Record(ctx context.Context, id string, data []byte) error {
	return l.Store.PutIfNotExists(ctx, key(id, 0), data)
}
