package table

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// The batch operations beside a new version (txn.go): declare a table,
// delete versions, deregister a table. Each writes, before the decision,
// only objects that the decision turns on, and applies its effect after
// it, so a crash before the decision leaves nothing visible and recovery
// after it completes the effect (finalize is idempotent):
//   - declare: the table's _declared.json names the transaction; it
//     declares the table only once the transaction succeeded (Declared),
//     and finalize rewrites it without the name.
//   - delete versions: a marker _versions/{manifest}.{T}.txd per version;
//     a version whose marker names a transaction that succeeded is hidden
//     (Versions), and finalize removes the manifest, then the marker.
//   - deregister: a marker _versions/{latest manifest}.{T}.txr; once T
//     succeeded the table has no version (it is gone from the catalog), and
//     finalize moves the folder to _deregistered/ as DeregisterTable does,
//     the marker last.
// A marker of a transaction that did not succeed has no effect, so
// rollback simply removes them.

// BatchKind is what one entry of a batch does.
type BatchKind int

// Batch entry kinds.
const (
	BatchCreateVersion BatchKind = iota
	BatchDeclare
	BatchDeleteVersions
	BatchDeregister
)

const (
	txnDeleteExt     = ".txd"
	txnDeregisterExt = ".txr"

	opDeclare    = "declare_table"
	opDelete     = "delete_table_versions"
	opDeregister = "deregister_table"
)

// stagedOp is a checked entry that is not a new version.
type stagedOp struct {
	t        *Table
	entry    TxnEntry
	location string
}

// stageOp checks an entry as its single-table operation does.
func (c *Catalog) stageOp(ctx context.Context, e BatchVersion) (*stagedOp, error) {
	t := c.handle(e.ID)
	op := &stagedOp{t: t, entry: TxnEntry{Table: t.id}}
	if e.Branch != "" && e.Branch != MainBranch && e.Kind != BatchDeleteVersions {
		return nil, errs.Errorf(errs.CodeInvalidInput, "branch: a table is declared or deregistered whole, not on a branch")
	}
	switch e.Kind {
	case BatchDeclare:
		if err := c.requireNamespace(ctx, e.ID[:len(e.ID)-1]); err != nil {
			return nil, err
		}
		if ok, err := c.tableExists(ctx, e.ID); err != nil {
			return nil, err
		} else if ok {
			return nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(e.ID))
		}
		if ok, err := c.Declared(ctx, e.ID); err != nil {
			return nil, err
		} else if ok {
			return nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s is already declared", JoinID(e.ID))
		}
		op.entry.Op, op.entry.Properties, op.location = opDeclare, e.Properties, t.Location()
	case BatchDeleteVersions:
		t, err := c.openLine(ctx, e.ID, e.Branch)
		if err != nil {
			return nil, err
		}
		op.t, op.entry.Branch = t, t.branch
		doomed, err := t.planDelete(ctx, e.Ranges)
		if err != nil {
			return nil, err
		}
		op.entry.Op = opDelete
		op.entry.Deleted = []string{}
		for _, vf := range doomed {
			op.entry.Deleted = append(op.entry.Deleted, vf.Name)
		}
	case BatchDeregister:
		// The move after the decision carries the folder whole: batches
		// already in flight over it are settled first (as DeregisterTable).
		if err := c.settleTable(ctx, t); err != nil {
			return nil, err
		}
		vs, err := t.Versions(ctx)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			return nil, errs.Errorf(errs.CodeTableNotFound, "table %s not found", JoinID(e.ID))
		}
		m, err := t.readManifest(ctx, vs[len(vs)-1])
		if err != nil {
			return nil, err
		}
		uuid, err := t.Identity(ctx, m)
		if err != nil {
			return nil, err
		}
		op.entry.Op, op.entry.UUID, op.entry.Manifest, op.entry.Version = opDeregister, uuid, vs[len(vs)-1].Name, vs[len(vs)-1].Version
		op.location = c.wh.Location(strings.TrimSuffix(deregisteredDir+uuid+tableSuffix, "/"))
	default:
		return nil, errs.Errorf(errs.CodeInvalidInput, "unknown batch operation %d", e.Kind)
	}
	return op, nil
}

// writeOp writes what an entry needs before the decision, each object
// with put-if-not-exists.
func (c *Catalog) writeOp(ctx context.Context, id string, op *stagedOp) error {
	e, t := op.entry, op.t
	switch e.Op {
	case opDeclare:
		b, _ := json.Marshal(declaredDoc{Properties: e.Properties, Transaction: id})
		err := c.wh.PutIfNotExists(ctx, t.key+declaredMarker, b)
		if errors.Is(err, ErrExists) {
			return errs.Errorf(errs.CodeTableAlreadyExists, "table %s was declared concurrently; transaction %s aborted, nothing applied", JoinID(t.id), id)
		}
		return err
	case opDelete:
		for _, name := range e.Deleted {
			if err := c.wh.PutIfNotExists(ctx, t.versionsKey()+name+"."+id+txnDeleteExt, []byte(id)); err != nil {
				return err
			}
		}
		// A tag written since the plan stops the batch (tagguard.go).
		return t.recheckTags(ctx, e.Deleted)
	case opDeregister:
		return c.wh.PutIfNotExists(ctx, t.key+versionsDir+e.Manifest+"."+id+txnDeregisterExt, []byte(id))
	}
	return nil
}

// writtenOp reports whether everything writeOp writes is in place.
func (c *Catalog) writtenOp(ctx context.Context, id string, e TxnEntry) (bool, error) {
	t := c.lineHandle(e.Table, e.Branch)
	switch e.Op {
	case opDeclare:
		d, err := c.readDeclared(ctx, t)
		return err == nil && d != nil && d.Transaction == id, err
	case opDelete:
		for _, name := range e.Deleted {
			if ok, err := c.wh.Exists(ctx, t.versionsKey()+name+"."+id+txnDeleteExt); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case opDeregister:
		return c.wh.Exists(ctx, t.key+versionsDir+e.Manifest+"."+id+txnDeregisterExt)
	}
	return false, nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// finalizeOp applies an entry of a transaction that succeeded; running it
// again after a crash finishes it.
func (c *Catalog) finalizeOp(ctx context.Context, id string, e TxnEntry) error {
	t := c.lineHandle(e.Table, e.Branch)
	switch e.Op {
	case opDeclare:
		d, err := c.readDeclared(ctx, t)
		if err != nil || d == nil || d.Transaction != id {
			return err
		}
		b, _ := json.Marshal(declaredDoc{Properties: d.Properties})
		return c.wh.Write(ctx, t.key+declaredMarker, b)
	case opDelete:
		var errList []error
		for _, name := range e.Deleted {
			mk := t.versionsKey() + name + "." + id + txnDeleteExt
			if ok, err := c.wh.Exists(ctx, mk); err != nil || !ok {
				errList = append(errList, err)
				continue
			}
			if err := ignoreMissing(c.wh.Delete(ctx, t.versionsKey()+name)); err != nil {
				errList = append(errList, err)
				continue
			}
			errList = append(errList, ignoreMissing(c.wh.Delete(ctx, mk)))
		}
		return errors.Join(errList...)
	case opDeregister:
		mk := e.Manifest + "." + id + txnDeregisterExt
		if ok, err := c.wh.Exists(ctx, t.key+versionsDir+mk); err != nil || !ok {
			return err
		}
		// A commit that listed the versions before the decision (after
		// it, listings hide the table) puts within half the seal grace
		// of its listing (seal.go): the folder is copied only once a
		// whole grace has passed since the decision, so such a commit
		// goes with the table instead of landing behind the copy.
		if err := c.waitSealGrace(ctx, id); err != nil {
			return err
		}
		// The table it was, for register to ask about (DeregisterTable).
		if err := c.recordOrigin(ctx, e.UUID, e.Table); err != nil {
			return err
		}
		if err := c.moveFolderKeeping(ctx, t.key, deregisteredDir+e.UUID+tableSuffix+"/", versionsDir+mk); err != nil {
			return err
		}
		return c.recordIdentity(ctx, e.UUID, nil)
	}
	return nil
}

// rollbackOp removes what an entry of a transaction that did not succeed
// wrote (none of it has an effect; this only tidies).
func (c *Catalog) rollbackOp(ctx context.Context, id string, e TxnEntry) error {
	t := c.lineHandle(e.Table, e.Branch)
	switch e.Op {
	case opDeclare:
		d, err := c.readDeclared(ctx, t)
		if err != nil || d == nil || d.Transaction != id {
			return err
		}
		return ignoreMissing(c.wh.Delete(ctx, t.key+declaredMarker))
	case opDelete:
		var errList []error
		for _, name := range e.Deleted {
			errList = append(errList, ignoreMissing(c.wh.Delete(ctx, t.versionsKey()+name+"."+id+txnDeleteExt)))
		}
		return errors.Join(errList...)
	case opDeregister:
		return ignoreMissing(c.wh.Delete(ctx, t.key+versionsDir+e.Manifest+"."+id+txnDeregisterExt))
	}
	return nil
}

// hideDecided applies a delete or deregister marker whose transaction
// succeeded (and whose finalize has not run yet) to a listing.
func (t *Table) hideDecided(ctx context.Context, byVersion map[uint64]VersionFile, mk txnMarker) error {
	st, err := t.c.txns().Status(ctx, mk.id)
	if err != nil || st != TxnSucceeded {
		return err
	}
	if mk.ext == txnDeregisterExt {
		clear(byVersion)
		return nil
	}
	v, _, _ := ParseManifestName(mk.manifest)
	if vf, ok := byVersion[v]; ok && vf.Name == mk.manifest {
		delete(byVersion, v)
	}
	return nil
}

// readDeclared reads a table's _declared.json (nil: none).
func (c *Catalog) readDeclared(ctx context.Context, t *Table) (*declaredDoc, error) {
	b, err := c.wh.Read(ctx, t.key+declaredMarker)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d declaredDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return &declaredDoc{}, nil // written before the document had fields
	}
	return &d, nil
}

// declaredNow reports whether t's _declared.json declares it: it exists
// and names no transaction, or one that succeeded. A leftover of a
// transaction that failed is removed when remove is set.
func (c *Catalog) declaredNow(ctx context.Context, t *Table, remove bool) (bool, error) {
	d, err := c.readDeclared(ctx, t)
	if err != nil || d == nil {
		return false, err
	}
	if d.Transaction == "" {
		return true, nil
	}
	st, err := c.txns().Status(ctx, d.Transaction)
	if err != nil {
		return false, err
	}
	if st.Final() && st != TxnSucceeded && remove {
		if err := c.rollbackOp(ctx, d.Transaction, TxnEntry{Table: t.id, Op: opDeclare}); err != nil {
			return false, err
		}
	}
	return st == TxnSucceeded, nil
}

// settleTable brings every transaction holding a marker in t to its
// decision (waiting for a Running one until its deadline, then recovering
// it), so a rename or deregister moves a table no batch is changing.
func (c *Catalog) settleTable(ctx context.Context, t *Table) error {
	ids, err := c.txnsHolding(ctx, t)
	if err != nil {
		return err
	}
	if d, err := c.readDeclared(ctx, t); err != nil {
		return err
	} else if d != nil && d.Transaction != "" {
		ids[d.Transaction] = true
	}
	for id := range ids {
		if _, err := c.settleTxn(ctx, id, true); err != nil {
			return err
		}
	}
	return nil
}

// waitSealGrace waits until Options.SealGrace has passed since
// transaction id was decided.
func (c *Catalog) waitSealGrace(ctx context.Context, id string) error {
	_, cur, err := c.txns().Read(ctx, id)
	if err != nil {
		return err
	}
	until := time.UnixMilli(cur.Millis).Add(c.opts.SealGrace)
	if d := time.Until(until); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}
