package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/txnlog"
)

// Batch transactions: new versions of several tables that become visible
// all together or not at all, across processes and through a crash.
//
// Object stores have no multi-object atomic write, so one object decides:
// the transaction's state chain. A transaction T lives under
// .mvq-txn/{T}/ as numbered state objects, each written with
// put-if-not-exists: 0 is the record (the tables, versions and manifest
// names, a deadline, status Running), and each later one carries the
// whole state (status, properties). The first state with a final status
// (Succeeded, Failed, Canceled) is the decision; since every state is a
// put-if-not-exists of the next number, exactly one decision is ever
// written, and alter's property changes serialize with it.
//
// The writer, after checking every entry, writes the record, then per
// table (in a fixed order, so two batches over the same tables meet on
// the same first one) a marker _versions/{manifest}.{T}.txn and then the
// manifest itself (put-if-not-exists, so it claims the version; its
// content names T). Then it decides Succeeded and removes its markers. A
// manifest whose marker names T, and whose content names T too, is not a
// version unless T succeeded (Table.Versions hides it); a manifest without
// a marker is an ordinary version. So readers pay only while markers
// exist: one state read per transaction (cached once final) and one
// manifest read per marked version.
//
// Whoever finds a transaction still Running past its deadline recovers
// it: it decides Succeeded when every manifest is in place (roll forward)
// and Failed otherwise (roll back: its manifests are removed, freeing the
// versions). A writer checks the deadline before each write and honours
// whatever decision the chain holds, so a recovered transaction and its
// slow writer agree. Markers of a transaction aborted by someone else stay
// until TxnMarkerGrace past its deadline (its writer might still be about
// to write a manifest, which the marker must hide); the writer removes its
// own at once.

// TxnStatus is the spec's TransactionStatus (txnlog.Status).
type TxnStatus = txnlog.Status

// Transaction statuses. A batch is Running until decided; Queued is never
// used.
const (
	TxnQueued    = txnlog.Queued
	TxnRunning   = txnlog.Running
	TxnSucceeded = txnlog.Succeeded
	TxnFailed    = txnlog.Failed
	TxnCanceled  = txnlog.Canceled
)

// ParseTxnStatus reads a status case-insensitively, in PascalCase or
// snake_case.
func ParseTxnStatus(s string) (TxnStatus, bool) { return txnlog.ParseStatus(s) }

// TxnEntry is one table version of a transaction.
type TxnEntry = txnlog.Entry

// txnState is one object of a transaction's state chain; seq 0, the
// record, also holds what the transaction writes.
type txnState = txnlog.State

const txnDir = txnlog.Dir

// txns is the catalog's transaction chains.
func (c *Catalog) txns() txnlog.Log { return txnlog.Log{Store: c.wh} }

const (
	// txnMarkerExt ends a marker's name: {manifest name}.{txn id}.txn.
	txnMarkerExt = ".txn"
	// TxnMarkerGrace is how long past its deadline a transaction aborted by
	// someone other than its writer keeps its markers.
	TxnMarkerGrace = time.Minute
	// TxnRetention is how long a decided transaction stays describable
	// before RecoverTransactions removes it.
	TxnRetention = 24 * time.Hour
)

// Transaction is what describe shows of a transaction.
type Transaction struct {
	ID         string
	Status     TxnStatus
	Reason     string
	Operation  string
	Properties map[string]string
	Created    time.Time
	Deadline   time.Time
	Entries    []TxnEntry
}

func markerName(manifest, id string) string { return manifest + "." + id + txnMarkerExt }

// txnMarker is a parsed marker name; ext is its kind: txnMarkerExt (a
// version the transaction writes), txnDeleteExt (one it deletes) or
// txnDeregisterExt (the transaction deregisters the table).
type txnMarker struct{ manifest, id, ext string }

func parseTxnMarker(name string) (txnMarker, bool) {
	ext := ""
	for _, x := range []string{txnMarkerExt, txnDeleteExt, txnDeregisterExt} {
		if strings.HasSuffix(name, x) {
			ext = x
		}
	}
	if ext == "" {
		return txnMarker{}, false
	}
	rest := strings.TrimSuffix(name, ext)
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return txnMarker{}, false
	}
	mk := txnMarker{manifest: rest[:i], id: rest[i+1:], ext: ext}
	if _, _, ok := ParseManifestName(mk.manifest); !ok || !txnlog.ValidID(mk.id) {
		return txnMarker{}, false
	}
	return mk, true
}

// BatchVersion is one version of a batch: CreateVersion's arguments.
type BatchVersion struct {
	// Field names the entry in error messages ("entries[0]").
	Field        string
	ID           []string
	Version      uint64
	ManifestPath string
	// ManifestSize, when set, must be the staged manifest's size; ETag,
	// when set, its ETag, quoted or not: the hex MD5 of its content, or the
	// ETag the store gives it (a local disk's inode-mtime-size), as for
	// version/create.
	ManifestSize *int64
	ETag         string
	Scheme       NamingScheme
	Metadata     map[string]string
	// Branch is the line a new version or a deletion of versions is on
	// ("" or "main": main); an unknown branch is errs.CodeTableBranchNotFound.
	Branch string
	// Kind is the operation (zero: create this version); the others
	// use ID and: BatchDeclare Properties, BatchDeleteVersions Ranges.
	Kind       BatchKind
	Properties map[string]string
	Ranges     []VersionRange
}

// BatchResult is one published version of a batch, in request order.
type BatchResult struct {
	Table    *Table
	File     VersionFile
	Manifest *Manifest
	Data     []byte
	// Kind is the entry's; Deleted counts the versions a
	// BatchDeleteVersions removed; Location is where a BatchDeclare'd
	// table is or a BatchDeregister'ed one went.
	Kind     BatchKind
	Deleted  int64
	Location string
}

// fieldErr puts field in front of a coded error's message.
func fieldErr(field string, err error) error {
	var e *errs.Error
	if field == "" || !errors.As(err, &e) {
		return err
	}
	return &errs.Error{Code: e.Code, Message: field + ": " + e.Message, Err: e.Err}
}

// CommitBatch publishes a version of each entry's table atomically: every
// one becomes visible at once, or none does. Each entry has
// CreateVersion's checks and semantics (put-if-not-exists of exactly
// latest+1); a table may appear once. operation names the request in the
// record. It returns the transaction id (also with an error once the
// transaction was recorded, so the failure can be described) and the
// versions in entry order.
func (c *Catalog) CommitBatch(ctx context.Context, operation string, entries []BatchVersion) (string, []BatchResult, error) {
	if len(entries) == 0 {
		return "", nil, errs.Errorf(errs.CodeInvalidInput, "a batch needs at least one entry")
	}
	type staged struct {
		i  int
		t  *Table
		sv *stagedVersion
		e  BatchVersion
		op *stagedOp
	}
	// Claim the tables first (claim.go): no move starts on them until the
	// transaction is over, and what is staged below is what it changes.
	id := newIdentity()
	now := time.Now()
	release, err := c.claimBatch(ctx, id, now.Add(c.opts.TxnTimeout), entries)
	if err != nil {
		return "", nil, err
	}
	defer release()
	seen := map[string]string{}
	all := make([]staged, 0, len(entries))
	for i, e := range entries {
		if len(e.ID) == 0 {
			return "", nil, errs.Errorf(errs.CodeInvalidInput, "%s.id: a table identifier needs a name", e.Field)
		}
		if prev, dup := seen[tableKey(e.ID)]; dup {
			return "", nil, errs.Errorf(errs.CodeInvalidInput, "%s: table %s is already in the batch (%s); a batch has one operation per table", e.Field, JoinID(e.ID), prev)
		}
		seen[tableKey(e.ID)] = e.Field
		if e.Kind != BatchCreateVersion {
			op, err := c.stageOp(ctx, e)
			if err != nil {
				return "", nil, fieldErr(branchField(e.Field, err), err)
			}
			all = append(all, staged{i: i, t: op.t, e: e, op: op})
			continue
		}
		t, err := c.openLine(ctx, e.ID, e.Branch)
		if err != nil {
			return "", nil, fieldErr(branchField(e.Field, err), err)
		}
		sv, err := t.stageVersion(ctx, e.Version, e.ManifestPath, e.Scheme, e.Metadata)
		if err != nil {
			return "", nil, fieldErr(e.Field, err)
		}
		// A batch re-encodes every version (it marks them with its id).
		for _, m := range []*Manifest{sv.m, sv.m.parent} {
			if err := refuseStableRowIDs(t.id, m, "a batch commit"); err != nil {
				return "", nil, fieldErr(e.Field, err)
			}
		}
		// The checks of version/create (the store's ETag or the MD5).
		if err := t.expectStaged(sv.st, e.ManifestSize, e.ETag); err != nil {
			var ee *errs.Error
			if errors.As(err, &ee) { // "manifest_size: …" → "{entry}.manifest_size: …"
				err = &errs.Error{Code: ee.Code, Message: e.Field + "." + ee.Message, Err: ee.Err}
			}
			return "", nil, err
		}
		all = append(all, staged{i: i, t: t, sv: sv, e: e})
	}
	// One order for every batch: two batches over common tables meet
	// first on the same table, where exactly one of them wins.
	sort.Slice(all, func(a, b int) bool { return all[a].t.key < all[b].t.key })

	rec := &txnState{Status: TxnRunning, Millis: now.UnixMilli(), Operation: operation, DeadlineMillis: now.Add(c.opts.TxnTimeout).UnixMilli()}
	for _, s := range all {
		if s.op != nil {
			rec.Entries = append(rec.Entries, s.op.entry)
			continue
		}
		rec.Entries = append(rec.Entries, TxnEntry{Table: s.t.id, Version: s.e.Version, Manifest: s.sv.name, Branch: s.t.branch})
		s.sv.m.Transaction = id
		data, err := s.sv.m.Encode()
		if err != nil {
			return "", nil, err
		}
		s.sv.data = data
		s.sv.m.parent = nil // encoded: no chain of versions kept alive
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return "", nil, err
	}
	if time.Now().After(time.UnixMilli(rec.DeadlineMillis)) {
		// Its claims may be taken over from now on.
		return "", nil, errs.Errorf(errs.CodeServiceUnavailable, "transaction %s: not staged before its deadline (%s); nothing applied", id, c.opts.TxnTimeout)
	}
	if err := c.txns().Record(ctx, id, data); err != nil {
		return "", nil, fmt.Errorf("record transaction: %w", err)
	}
	c.step("record")

	// abort decides Failed (unless decided already), undoes what this
	// writer wrote and returns err. (A recovery cannot have rolled the
	// transaction forward: a version of it is missing.)
	abort := func(err error) (string, []BatchResult, error) {
		ctx := context.WithoutCancel(ctx)
		if _, derr := c.txns().Decide(ctx, id, TxnFailed, err.Error()); derr != nil {
			return id, nil, errors.Join(err, derr)
		}
		return id, nil, errors.Join(err, c.rollback(ctx, id, rec, true))
	}
	deadline := time.UnixMilli(rec.DeadlineMillis)
	for k, s := range all {
		if time.Now().After(deadline) {
			return abort(errs.Errorf(errs.CodeServiceUnavailable, "transaction %s: not written before its deadline (%s); nothing applied", id, c.opts.TxnTimeout))
		}
		if s.op != nil {
			if err := c.writeOp(ctx, id, s.op); err != nil {
				return abort(fieldErr(s.e.Field, err))
			}
			c.step(fmt.Sprintf("marker-%d", k))
			continue
		}
		mk := s.t.versionsKey() + markerName(s.sv.name, id)
		if err := c.wh.PutIfNotExists(ctx, mk, []byte(id)); err != nil {
			return abort(fmt.Errorf("transaction %s: write marker: %w", id, err))
		}
		c.step(fmt.Sprintf("marker-%d", k))
		err := c.wh.PutIfNotExists(ctx, s.t.versionsKey()+s.sv.name, s.sv.data)
		if errors.Is(err, ErrExists) {
			// A transaction that failed may still hold the version: undo
			// it and try once more.
			if serr := s.t.settleVersionNow(ctx, s.e.Version); serr != nil {
				return abort(serr)
			}
			err = c.wh.PutIfNotExists(ctx, s.t.versionsKey()+s.sv.name, s.sv.data)
		}
		if errors.Is(err, ErrExists) {
			return abort(errs.Errorf(errs.CodeConcurrentModification, "%s: version %d of %s already exists (a concurrent commit took it); transaction %s aborted, nothing applied", s.e.Field, s.e.Version, JoinID(s.t.id), id))
		}
		if err != nil {
			return abort(fmt.Errorf("transaction %s: write %s version %d: %w", id, JoinID(s.t.id), s.e.Version, err))
		}
		c.step(fmt.Sprintf("manifest-%d", k))
	}
	want, reason := TxnSucceeded, ""
	if time.Now().After(deadline) {
		want, reason = TxnFailed, fmt.Sprintf("not decided before its deadline (%s)", c.opts.TxnTimeout)
	}
	st, err := c.txns().Decide(ctx, id, want, reason)
	if err != nil {
		// Undecided: a recovery past the deadline settles it.
		return id, nil, fmt.Errorf("transaction %s: decide: %w", id, err)
	}
	if st.Status != TxnSucceeded {
		err := errs.Errorf(errs.CodeConcurrentModification, "transaction %s %s before it committed (%s); nothing applied", id, strings.ToLower(string(st.Status)), st.Reason)
		return id, nil, errors.Join(err, c.rollback(context.WithoutCancel(ctx), id, rec, true))
	}
	c.step("decided")
	if err := c.finalize(context.WithoutCancel(ctx), id, rec); err != nil {
		return id, nil, err
	}
	out := make([]BatchResult, len(entries))
	for _, s := range all {
		if s.op != nil {
			out[s.i] = BatchResult{Table: s.t, Kind: s.e.Kind, Deleted: int64(len(s.op.entry.Deleted)), Location: s.op.location}
			continue
		}
		out[s.i] = BatchResult{Table: s.t, File: VersionFile{Version: s.e.Version, Scheme: s.e.Scheme, Name: s.sv.name, Size: int64(len(s.sv.data))}, Manifest: s.sv.m, Data: s.sv.data}
	}
	return id, out, nil
}

// finalize removes the markers of a transaction that succeeded (its
// versions are ordinary versions from then on) and runs the commit hook
// for each table whose marker it removed, so auto-refresh sees the batch
// only once it is committed.
func (c *Catalog) finalize(ctx context.Context, id string, rec *txnState) error {
	var errList []error
	for _, e := range rec.Entries {
		if e.Op != "" {
			errList = append(errList, c.finalizeOp(ctx, id, e))
			continue
		}
		t := c.lineHandle(e.Table, e.Branch)
		key := t.versionsKey() + markerName(e.Manifest, id)
		if ok, err := c.wh.Exists(ctx, key); err != nil || !ok {
			errList = append(errList, err)
			continue // gone: finalized already
		}
		m, err := t.readManifest(ctx, VersionFile{Version: e.Version, Name: e.Manifest})
		if err != nil {
			errList = append(errList, err)
			continue
		}
		if err := c.wh.Delete(ctx, key); err != nil {
			// Missing: a concurrent finalizer removed the marker first
			// and runs the commit hook itself.
			errList = append(errList, ignoreMissing(err))
			continue
		}
		c.committedOn(ctx, t, m)
	}
	return errors.Join(errList...)
}

// rollback removes the manifests a failed transaction wrote (those that
// name it), freeing their versions, and then its markers when its writer
// can no longer write (own: the writer itself is rolling back; else once
// TxnMarkerGrace past the deadline).
func (c *Catalog) rollback(ctx context.Context, id string, rec *txnState, own bool) error {
	var errList []error
	dropMarkers := own || time.Now().After(time.UnixMilli(rec.DeadlineMillis).Add(TxnMarkerGrace))
	for _, e := range rec.Entries {
		if e.Op != "" {
			errList = append(errList, c.rollbackOp(ctx, id, e))
			continue
		}
		t := c.lineHandle(e.Table, e.Branch)
		key := t.versionsKey() + e.Manifest
		b, err := c.wh.Read(ctx, key)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			errList = append(errList, err)
			continue
		default:
			if m, derr := DecodeManifest(b); derr == nil && m.Transaction == id {
				if err := c.wh.Delete(ctx, key); err != nil {
					errList = append(errList, ignoreMissing(err))
					continue
				}
			}
		}
		if dropMarkers {
			errList = append(errList, ignoreMissing(c.wh.Delete(ctx, t.versionsKey()+markerName(e.Manifest, id))))
		}
	}
	return errors.Join(errList...)
}

// allWritten reports whether every manifest of the transaction is in
// place.
func (c *Catalog) allWritten(ctx context.Context, id string, rec *txnState) (bool, error) {
	for _, e := range rec.Entries {
		if e.Op != "" {
			if ok, err := c.writtenOp(ctx, id, e); err != nil || !ok {
				return false, err
			}
			continue
		}
		b, err := c.wh.Read(ctx, c.lineHandle(e.Table, e.Branch).versionsKey()+e.Manifest)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if m, err := DecodeManifest(b); err != nil || m.Transaction != id {
			return false, nil
		}
	}
	return true, nil
}

// settleTxn brings a transaction to rest: a decided one is finalized or
// rolled back; a Running one past its deadline is recovered (forward when
// every manifest is in place, else back); a Running one within its
// deadline is waited for when wait is set, else left alone. It reports the
// status it left the transaction in.
func (c *Catalog) settleTxn(ctx context.Context, id string, wait bool) (TxnStatus, error) {
	for {
		rec, cur, err := c.txns().Read(ctx, id)
		if errs.CodeOf(err) == errs.CodeTransactionNotFound {
			return TxnFailed, nil
		}
		if err != nil {
			return "", err
		}
		switch {
		case cur.Status == TxnSucceeded:
			return cur.Status, c.finalize(ctx, id, rec)
		case cur.Status.Final():
			return cur.Status, c.rollback(ctx, id, rec, false)
		}
		left := time.Until(time.UnixMilli(rec.DeadlineMillis))
		if left > 0 {
			if !wait {
				return cur.Status, nil
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(min(left, 20*time.Millisecond)):
			}
			continue
		}
		ok, err := c.allWritten(ctx, id, rec)
		if err != nil {
			return "", err
		}
		if ok {
			_, err = c.txns().Decide(ctx, id, TxnSucceeded, "rolled forward by recovery: its writer stopped after writing every version")
		} else {
			_, err = c.txns().Decide(ctx, id, TxnFailed, "rolled back by recovery: its writer stopped before writing every version")
		}
		if err != nil {
			return "", err
		}
	}
}

// hideUncommitted removes from byVersion the versions whose marker names
// a transaction that has not succeeded and whose manifest names it too (a
// marker beside someone else's manifest is a leftover of a transaction
// that lost that version).
func (t *Table) hideUncommitted(ctx context.Context, byVersion map[uint64]VersionFile, markers []txnMarker) error {
	for _, mk := range markers {
		if mk.ext != txnMarkerExt {
			if err := t.hideDecided(ctx, byVersion, mk); err != nil {
				return err
			}
			continue
		}
		v, _, _ := ParseManifestName(mk.manifest)
		vf, ok := byVersion[v]
		if !ok || vf.Name != mk.manifest {
			continue
		}
		st, err := t.c.txns().Status(ctx, mk.id)
		if err != nil {
			return err
		}
		if st == TxnSucceeded {
			continue
		}
		b, err := t.c.wh.Read(ctx, t.versionsKey()+vf.Name)
		if errors.Is(err, os.ErrNotExist) {
			delete(byVersion, v) // rolled back meanwhile
			continue
		}
		if err != nil {
			return err
		}
		if m, err := DecodeManifest(b); err == nil && m.Transaction == mk.id {
			delete(byVersion, v)
		}
	}
	return nil
}

// settleVersion is called by a commit that found version v taken: if a
// transaction holds it, it waits for that transaction's decision (or
// recovers it once overdue) and finalizes or rolls it back, so the next
// attempt sees v as an ordinary version or free.
func (t *Table) settleVersion(ctx context.Context, v uint64) error {
	return t.settleHolders(ctx, v, true)
}

// settleVersionNow is settleVersion without waiting for a Running
// transaction (a batch never waits for another: one of them fails).
func (t *Table) settleVersionNow(ctx context.Context, v uint64) error {
	return t.settleHolders(ctx, v, false)
}

func (t *Table) settleHolders(ctx context.Context, v uint64, wait bool) error {
	entries, err := t.c.wh.List(ctx, t.versionsKey())
	if err != nil {
		return err
	}
	for _, e := range entries {
		mk, ok := parseTxnMarker(e.Name)
		if !ok || mk.ext != txnMarkerExt {
			continue
		}
		if mv, _, _ := ParseManifestName(mk.manifest); mv != v {
			continue
		}
		st, err := t.c.settleTxn(ctx, mk.id, wait)
		if err != nil {
			return err
		}
		// Settled through the record's table names; this table may have
		// another name by now (rename copies the folder), so undo here too.
		if st.Final() && st != TxnSucceeded {
			key := t.versionsKey() + mk.manifest
			if b, err := t.c.wh.Read(ctx, key); err == nil {
				if m, err := DecodeManifest(b); err == nil && m.Transaction == mk.id {
					if err := ignoreMissing(t.c.wh.Delete(ctx, key)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// Transaction describes transaction id.
func (c *Catalog) Transaction(ctx context.Context, id string) (*Transaction, error) {
	rec, cur, err := c.txns().Read(ctx, id)
	if err != nil {
		return nil, err
	}
	return txnOf(id, rec, cur), nil
}

func txnOf(id string, rec, cur *txnState) *Transaction {
	props := make(map[string]string, len(cur.Properties))
	for k, v := range cur.Properties {
		props[k] = v
	}
	return &Transaction{
		ID: id, Status: cur.Status, Reason: cur.Reason, Operation: rec.Operation, Properties: props,
		Created: time.UnixMilli(rec.Millis), Deadline: time.UnixMilli(rec.DeadlineMillis), Entries: rec.Entries,
	}
}

// TxnAction is one change of AlterTransaction: a status (SetStatus), or a
// property set (Key, Value) or unset (Key, Unset). Mode is the spec's
// SetPropertyMode (overwrite, fail, skip) or UnsetPropertyMode (skip,
// fail), lower case. Field names the action in errors.
type TxnAction struct {
	Field     string
	SetStatus TxnStatus
	Key       string
	Value     string
	Unset     bool
	Mode      string
}

// TxnReservedPrefix starts the property keys describe derives from the
// record; alter may not set them.
const TxnReservedPrefix = "mvq."

// AlterTransaction applies every action or none. A Running transaction
// may be set Canceled or Failed (an abort: its versions are removed);
// setting a decided one to its own status changes nothing, to another is
// a conflict; Succeeded, Running and Queued are reached only by the
// transaction itself.
func (c *Catalog) AlterTransaction(ctx context.Context, id string, actions []TxnAction) (*Transaction, error) {
	var rec0 *txnState
	aborted := false
	st, err := c.txns().Update(ctx, id, func(rec, cur *txnState) (*txnState, error) {
		rec0 = rec
		aborted = false
		next := &txnState{Status: cur.Status, Reason: cur.Reason, Properties: map[string]string{}}
		for k, v := range cur.Properties {
			next.Properties[k] = v
		}
		changed := false
		for _, a := range actions {
			switch {
			case a.SetStatus != "":
				if a.SetStatus == next.Status {
					continue
				}
				if next.Status.Final() {
					return nil, errs.Errorf(errs.CodeConcurrentModification, "%s.status: transaction %s is already %s", a.Field, id, next.Status)
				}
				if a.SetStatus != TxnCanceled && a.SetStatus != TxnFailed {
					return nil, errs.Errorf(errs.CodeInvalidInput, "%s.status: a transaction becomes %s only by itself; set Canceled or Failed to abort a Running one", a.Field, a.SetStatus)
				}
				next.Status, next.Reason, changed, aborted = a.SetStatus, "set by alter", true, true
			case a.Unset:
				if _, ok := next.Properties[a.Key]; !ok {
					if a.Mode == "fail" {
						return nil, errs.Errorf(errs.CodeConcurrentModification, "%s.key: transaction %s has no property %q (mode fail)", a.Field, id, a.Key)
					}
					continue
				}
				delete(next.Properties, a.Key)
				changed = true
			default:
				old, ok := next.Properties[a.Key]
				if ok && a.Mode == "fail" {
					return nil, errs.Errorf(errs.CodeConcurrentModification, "%s.key: transaction %s already has property %q (mode fail)", a.Field, id, a.Key)
				}
				if (ok && a.Mode == "skip") || (ok && old == a.Value) {
					continue
				}
				next.Properties[a.Key] = a.Value
				changed = true
			}
		}
		if !changed {
			return nil, nil
		}
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	if aborted && st.Status.Final() && st.Status != TxnSucceeded {
		// Best effort: what is left is hidden, and settled by the next
		// commit to those tables or by RecoverTransactions.
		_ = c.rollback(context.WithoutCancel(ctx), id, rec0, false)
	}
	return txnOf(id, rec0, st), nil
}

// TxnRecovery counts what RecoverTransactions did.
type TxnRecovery struct {
	Seen      int // transactions found
	Recovered int // Running past their deadline, decided now
	Removed   int // decided longer than the retention ago, removed
	Claims    int // claims of stopped batches and moves released (claim.go)
}

// RecoverTransactions settles every transaction in the warehouse:
// overdue Running ones are decided (forward when all their versions are
// written, else back), decided ones finalized or rolled back, and those
// decided more than retention ago (0: TxnRetention) removed; then the
// claims of stopped batches and moves are released (a stopped move is
// completed first). The janitor runs it each pass.
func (c *Catalog) RecoverTransactions(ctx context.Context, retention time.Duration) (TxnRecovery, error) {
	var res TxnRecovery
	if retention <= 0 {
		retention = TxnRetention
	}
	dirs, err := c.wh.List(ctx, txnDir)
	if err != nil {
		return res, err
	}
	var errList []error
	for _, d := range dirs {
		if !d.IsDir || !txnlog.ValidID(d.Name) {
			continue
		}
		res.Seen++
		_, before, err := c.txns().Read(ctx, d.Name)
		if errs.CodeOf(err) == errs.CodeTransactionNotFound {
			continue
		}
		if err != nil {
			errList = append(errList, err)
			continue
		}
		st, err := c.settleTxn(ctx, d.Name, false)
		if err != nil {
			errList = append(errList, fmt.Errorf("transaction %s: %w", d.Name, err))
			continue
		}
		if !before.Status.Final() && st.Final() {
			res.Recovered++
			continue
		}
		// Markers are gone once the deadline is TxnMarkerGrace past
		// (settleTxn above removed them); the record may go too.
		rec, cur, err := c.txns().Read(ctx, d.Name)
		if err != nil || !cur.Status.Final() || time.Since(time.UnixMilli(cur.Millis)) <= retention ||
			!time.Now().After(time.UnixMilli(rec.DeadlineMillis).Add(TxnMarkerGrace)) {
			continue
		}
		if err := c.wh.DeletePrefix(ctx, txnDir+d.Name+"/"); err != nil {
			errList = append(errList, err)
			continue
		}
		c.txns().Forget(d.Name)
		res.Removed++
	}
	n, err := c.claims().Recover(ctx)
	res.Claims = n
	errList = append(errList, err)
	return res, errors.Join(errList...)
}

// step runs the catalog's StepHook, if any, at the named step.
func (c *Catalog) step(name string) {
	if h := c.opts.StepHook; h != nil {
		h(name)
	}
}
