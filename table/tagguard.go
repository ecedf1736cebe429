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

// Tags against version deletion. A tagged version is never deleted, and a
// tag never points at a deleted version, however a tag write and a
// deletion interleave. Each side writes first and checks the other after:
//   - a deletion (DeleteVersions, or a batch's delete_table_versions)
//     announces each version it removes with a delete marker
//     _versions/{manifest}.{id}.txd (a batch's markers, txn_ops.go; a plain
//     deletion's name no transaction and hold its deadline), then reads the
//     tags again and gives up, removing nothing, when one points at a
//     version it removes;
//   - a tag write (create, update) writes the tag, then lists the
//     versions again and takes the tag back when its version is gone or
//     carries a live delete marker.
// Whichever checks second sees the other's write, so at most one of them
// goes through (both may give way: each answers a conflict).

// Test hooks (nil outside tests): after a tag write listed the versions,
// and after a plain deletion announced itself and read the tags again.
var testHookTagListed, testHookDeleteAnnounced func()

// errMarkerGone: a delete marker listed a moment ago is gone.
var errMarkerGone = errors.New("delete marker removed since the listing")

// deleteIntent is the content of a plain deletion's delete marker.
type deleteIntent struct {
	DeadlineMillis int64 `json:"deadline_millis"`
}

// recheckTags fails when a tag of this line points at a version in doomed.
func (t *Table) recheckTags(ctx context.Context, doomed []string) error {
	if len(doomed) == 0 {
		return nil
	}
	tags, err := t.Tags(ctx)
	if err != nil {
		return err
	}
	byVersion := map[uint64]bool{}
	for _, name := range doomed {
		v, _, _ := ParseManifestName(name)
		byVersion[v] = true
	}
	for _, n := range TagNames(tags) {
		if tg := tags[n]; tg.Branch == t.branch && byVersion[tg.Version] {
			return errs.Errorf(errs.CodeConcurrentModification, "version %d of %s was tagged %q while it was being deleted; nothing deleted", tg.Version, JoinID(t.id), n)
		}
	}
	return nil
}

// announceDelete writes the delete markers of a plain deletion and checks
// the tags again; it returns the markers' removal, to run once the
// versions are gone, and the deadline before which they must go.
func (t *Table) announceDelete(ctx context.Context, doomed []VersionFile) (func(), time.Time, error) {
	id := newIdentity()
	deadline := time.Now().Add(t.c.opts.TxnTimeout)
	body, _ := json.Marshal(deleteIntent{DeadlineMillis: deadline.UnixMilli()})
	var written, names []string
	done := func() {
		for _, k := range written {
			_ = ignoreMissing(t.c.wh.Delete(context.WithoutCancel(ctx), k))
		}
	}
	for _, vf := range doomed {
		k := t.versionsKey() + vf.Name + "." + id + txnDeleteExt
		if err := t.c.wh.PutIfNotExists(ctx, k, body); err != nil {
			done()
			return nil, deadline, err
		}
		written = append(written, k)
		names = append(names, vf.Name)
	}
	if err := t.recheckTags(ctx, names); err != nil {
		done()
		return nil, deadline, err
	}
	return done, deadline, nil
}

// deleteMarkerLive reports whether delete marker mk (in this line's
// versions folder) still stands for a deletion that may go through: its
// transaction is Running or Succeeded, or, for a plain deletion, its
// deadline is less than TxnMarkerGrace past.
func (t *Table) deleteMarkerLive(ctx context.Context, name string, mk txnMarker) (bool, error) {
	_, cur, err := t.c.txns().Read(ctx, mk.id)
	if err == nil {
		return cur.Status == TxnRunning || cur.Status == TxnSucceeded, nil
	}
	if errs.CodeOf(err) != errs.CodeTransactionNotFound {
		return false, err
	}
	b, err := t.c.wh.Read(ctx, t.versionsKey()+name)
	if errors.Is(err, os.ErrNotExist) {
		// Removed since the listing: the deletion is over, and it may
		// have removed the version after the listing showed it. The
		// caller looks at the version again (confirmTag).
		return false, errMarkerGone
	}
	if err != nil {
		return false, err
	}
	var di deleteIntent
	if json.Unmarshal(b, &di) != nil || di.DeadlineMillis == 0 {
		return false, nil // a batch's marker whose record is gone: long decided
	}
	return time.Now().Before(time.UnixMilli(di.DeadlineMillis).Add(TxnMarkerGrace)), nil
}

// confirmTag checks, after a tag was written, that its version (file vf)
// is still there and not being deleted; otherwise it runs undo and
// answers a conflict.
func (t *Table) confirmTag(ctx context.Context, tag string, vf VersionFile, undo func(context.Context) error) error {
	entries, err := t.c.wh.List(ctx, t.versionsKey())
	if err != nil {
		return errors.Join(err, undo(context.WithoutCancel(ctx)))
	}
	if testHookTagListed != nil {
		testHookTagListed()
	}
	present, doomed, gone := false, false, false
	for _, e := range entries {
		if e.Name == vf.Name {
			present = true
			continue
		}
		mk, ok := parseTxnMarker(e.Name)
		if !ok || mk.ext != txnDeleteExt || mk.manifest != vf.Name || !strings.HasPrefix(e.Name, vf.Name+".") {
			continue
		}
		live, err := t.deleteMarkerLive(ctx, e.Name, mk)
		if errors.Is(err, errMarkerGone) {
			gone = true
			continue
		}
		if err != nil {
			return errors.Join(err, undo(context.WithoutCancel(ctx)))
		}
		doomed = doomed || live
	}
	if gone && present && !doomed {
		// A deletion removes its markers only after removing the
		// versions it announced: a marker gone since the listing leaves
		// the listing's "present" stale. Whatever is there now decides;
		// a deletion starting later writes its marker after our tag and
		// sees the tag when it reads the tags again.
		ok, err := t.c.wh.Exists(ctx, t.versionsKey()+vf.Name)
		if err != nil {
			return errors.Join(err, undo(context.WithoutCancel(ctx)))
		}
		present = ok
	}
	if present && !doomed {
		return nil
	}
	if err := undo(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	return errs.Errorf(errs.CodeConcurrentModification, "version %d of %s was deleted or is being deleted; tag %q not written", vf.Version, JoinID(t.id), tag)
}
