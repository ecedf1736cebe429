package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/txnlog"
	"github.com/mvq-dev/mvq/table/internal/warehouse"
)

// Seals: a move (rename, deregister, register) copies the table folder
// and removes the source, but ordinary commits take no claim (claim.go).
// So before copying, the move seals every line of versions of the source
// (main and each branch): it writes, put-if-not-exists, the next version
// of the line as a seal — a copy of the latest manifest whose operation is
// sealOperation and whose Transaction names the move — after a marker
// {manifest}.{move id}.mov naming it. A commit racing the seal for that
// version either wins (its version is then listed and copied by the move,
// which walks the folder only after sealing) or loses and answers
// errMoved; exactly one of them gets the name. Readers never see a seal
// (Versions hides the manifest a seal marker names when its content is the
// seal: one read per marker, nothing while no move runs), and the move
// neither copies seals nor removes them before every other manifest.
//
// A commit must not put into the source once the move removes it (the
// names are free again then). A writer's listing that shows a seal
// answers errMoved at once (latestToCommit); one that shows none was made
// before the seal, and the commit puts within half of Options.SealGrace
// of it (else it lists again: revalidate), while the move removes no
// manifest before a whole SealGrace after sealing, and the seals last.
// Commits pay no extra request for it. (The pause between that check
// and the put is covered by the other half, as a batch's deadline check
// is by its grace, txn.go.)
//
// A move stopped after sealing is finished forward when the destination
// holds the table, else its seals are removed (unseal): the source is
// writable again (the claim chain completes it: table/internal/claim).

const (
	sealExt       = ".mov"
	sealOperation = "move"
	// sealMovedTo is the seal's metadata naming where the table goes.
	sealMovedTo = "mvq.moved_to"
)

type sealMarker struct{ manifest, id string }

func sealMarkerName(manifest, id string) string { return manifest + "." + id + sealExt }

func parseSealMarker(name string) (sealMarker, bool) {
	rest, ok := strings.CutSuffix(name, sealExt)
	if !ok {
		return sealMarker{}, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return sealMarker{}, false
	}
	mk := sealMarker{manifest: rest[:i], id: rest[i+1:]}
	if _, _, ok := ParseManifestName(mk.manifest); !ok || !txnlog.ValidID(mk.id) {
		return sealMarker{}, false
	}
	return mk, true
}

// isSeal reports whether m is the seal of move id.
func isSeal(m *Manifest, id string) bool {
	return m != nil && m.Operation == sealOperation && m.Transaction == id && id != ""
}

// hideSeals takes the seals the markers name out of a listing and
// returns one of them (nil: none).
func (t *Table) hideSeals(ctx context.Context, byVersion map[uint64]VersionFile, seals []sealMarker) (*Manifest, error) {
	var seal *Manifest
	for _, mk := range seals {
		v, _, _ := ParseManifestName(mk.manifest)
		vf, ok := byVersion[v]
		if !ok || vf.Name != mk.manifest {
			continue
		}
		b, err := t.c.wh.Read(ctx, t.versionsKey()+vf.Name)
		if errors.Is(err, os.ErrNotExist) {
			// Removed since the listing: the move ended (or was undone).
			delete(byVersion, v)
			seal = &Manifest{Version: v}
			continue
		}
		if err != nil {
			return nil, err
		}
		if m, err := DecodeManifest(b); err == nil && isSeal(m, mk.id) {
			delete(byVersion, v)
			m.Version = v
			seal = m
		}
	}
	return seal, nil
}

// errMoved is the error of a write that lost to a move's seal (or whose
// listing showed one): 409 naming where the table went.
func (t *Table) errMoved(v uint64, movedTo string) error {
	where := "moved"
	switch {
	case strings.HasPrefix(movedTo, deregisteredDir):
		where = "deregistered"
	case movedTo != "":
		where = "renamed to " + movedTo
	}
	return errs.Errorf(errs.CodeConcurrentModification, "table %s was %s while this write ran: it was not applied there (version %d); apply it again under its new name", JoinID(t.id), where, v)
}

// guardMove is called by a write into the table folder that is not a
// version (a tag, a branch) once it is written: when the main line is
// sealed or gone, a move may have walked the folder before it, so undo
// takes it back and the write answers errMoved (or not found). A move
// seals before it walks, so a write this check passes is copied.
func (t *Table) guardMove(ctx context.Context, undo func(context.Context) error) error {
	return t.GuardMove(ctx, undo)
}

// GuardMove is guardMove for writes other packages make into the table's
// folders (an index definition).
func (t *Table) GuardMove(ctx context.Context, undo func(context.Context) error) error {
	_, _, err := t.Main().latestToCommit(ctx)
	if errs.CodeOf(err) != errs.CodeConcurrentModification && errs.CodeOf(err) != errs.CodeTableNotFound {
		return nil
	}
	return errors.Join(err, undo(context.WithoutCancel(ctx)))
}

// sealedVersion returns errMoved when the manifest at name (a version a
// commit just lost) is a seal, else nil.
func (t *Table) sealedVersion(ctx context.Context, v uint64, name string) error {
	b, err := t.c.wh.Read(ctx, t.versionsKey()+name)
	if err != nil {
		return nil // gone again (a rolled back batch, an unseal): retry
	}
	m, err := DecodeManifest(b)
	if err != nil || m.Operation != sealOperation || m.Transaction == "" {
		return nil
	}
	if ok, _ := t.c.wh.Exists(ctx, t.versionsKey()+sealMarkerName(name, m.Transaction)); !ok {
		return nil
	}
	return t.errMoved(v, m.Metadata[sealMovedTo])
}

// latestToCommit is LatestVersion for a writer: it also answers
// errMoved when the listing shows a seal, and the time the listing began
// (a commit must put within half the seal grace of it; see the top).
func (t *Table) latestToCommit(ctx context.Context) (VersionFile, time.Time, error) {
	for attempt := 0; ; attempt++ {
		start := time.Now()
		vs, seal, err := t.listVersionNames(ctx)
		if err != nil {
			return VersionFile{}, start, err
		}
		if seal != nil {
			return VersionFile{}, start, t.errMoved(seal.Version, seal.Metadata[sealMovedTo])
		}
		if len(vs) == 0 {
			return VersionFile{}, start, t.noVersions()
		}
		vf, ok, err := t.statVersion(vs[len(vs)-1])
		if err != nil {
			return VersionFile{}, start, err
		}
		if ok || attempt == 2 {
			if !ok {
				return VersionFile{}, start, fmt.Errorf("commit %s: the latest version %s went while it was listed: %w", JoinID(t.id), vf.Name, os.ErrNotExist)
			}
			return vf, start, nil
		}
		// Removed between the listing and the stat (a rollback, a
		// move): list again.
	}
}

// listVersionNames is listVersions on the cheapest listing the store has:
// on a file:// warehouse the folder's names alone (the listing of a
// local store reads every file's attributes: a commit cost that grew
// with the number of versions), sizes and times left for statVersion.
func (t *Table) listVersionNames(ctx context.Context) ([]VersionFile, *Manifest, error) {
	vs, seal, _, err := t.listVersionNamesAt(ctx)
	return vs, seal, err
}

// listVersionNamesAt is listVersionNames with the state of the folder the
// names were read in (file:// warehouses; else zero), for statVersionAt.
func (t *Table) listVersionNamesAt(ctx context.Context) ([]VersionFile, *Manifest, warehouse.Listed, error) {
	if t.c.wh.Dir() == "" {
		vs, seal, err := t.listVersions(ctx)
		return vs, seal, warehouse.Listed{}, err
	}
	entries, l, err := t.c.wh.ListNamesAt(t.versionsKey())
	if err != nil {
		return nil, nil, l, err
	}
	vs, seal, err := t.versionsOf(ctx, entries)
	return vs, seal, l, err
}

// fresh reports whether a commit that listed at listed may still put:
// within half the seal grace (a move removes no manifest before a whole
// grace after sealing).
func (t *Table) fresh(listed time.Time) bool { return time.Since(listed) < t.c.opts.SealGrace/2 }

// revalidate is called by a commit that took too long since its listing:
// it lists again and answers the new listing time when parent is still
// the latest (ok false: rebase), or errMoved.
func (t *Table) revalidate(ctx context.Context, parent string) (time.Time, bool, error) {
	for range maxCommitAttempts {
		vf, listed, err := t.latestToCommit(ctx)
		if err != nil {
			return listed, false, err
		}
		if vf.Name != parent {
			return listed, false, nil
		}
		if t.fresh(listed) {
			return listed, true, nil
		}
	}
	return time.Time{}, false, errs.Errorf(errs.CodeServiceUnavailable, "commit %s: listing the versions takes longer than %s", JoinID(t.id), t.c.opts.SealGrace/2)
}

// seal seals every line of the table at key for move id (to describes
// the destination); see the comment at the top.
func (c *Catalog) seal(ctx context.Context, key, id, to string) error {
	t := &Table{c: c, key: key, id: []string{strings.TrimSuffix(key, "/")}}
	lines := []*Table{t}
	bs, err := t.Branches(ctx)
	if err != nil {
		return err
	}
	for _, name := range BranchNames(bs) {
		line := *t
		line.branch = name
		lines = append(lines, &line)
	}
	for _, line := range lines {
		if err := line.sealLine(ctx, id, to); err != nil {
			return err
		}
	}
	return nil
}

// sealLine writes the seal of one line: marker, then the manifest at the
// next version, again at the next one while commits take it first.
func (t *Table) sealLine(ctx context.Context, id, to string) error {
	for attempt := 0; ; attempt++ {
		vf, err := t.LatestVersion(ctx)
		if errs.CodeOf(err) == errs.CodeTableNotFound || errs.CodeOf(err) == errs.CodeTableBranchNotFound {
			return nil // a line without versions: nothing to seal
		}
		if err != nil {
			return err
		}
		base, err := t.readManifest(ctx, vf)
		if err != nil {
			return err
		}
		s := base.clone()
		s.Version, s.ParentVersion = vf.Version+1, vf.Version
		s.Operation, s.Transaction = sealOperation, id
		s.TimestampMillis = time.Now().UnixMilli()
		s.Metadata = map[string]string{sealMovedTo: to}
		data, err := s.Encode()
		if err != nil {
			return err
		}
		name := ManifestName(s.Version, NamingV2)
		marker := t.versionsKey() + sealMarkerName(name, id)
		if err := t.c.wh.PutIfNotExists(ctx, marker, []byte(id)); err != nil && !errors.Is(err, ErrExists) {
			return err
		}
		err = t.c.wh.PutIfNotExists(ctx, t.versionsKey()+name, data)
		if err == nil {
			return nil
		}
		if derr := ignoreMissing(t.c.wh.Delete(ctx, marker)); derr != nil {
			return derr
		}
		if !errors.Is(err, ErrExists) {
			return err
		}
		if attempt >= maxCommitAttempts {
			return errs.Errorf(errs.CodeConcurrentModification, "seal %s for a move: gave up after %d concurrent commits", JoinID(t.id), attempt)
		}
		if err := t.settleVersion(ctx, s.Version); err != nil {
			return err
		}
	}
}

// sealFiles picks, from the files of a folder being moved (keys), the
// seal markers and the seals they name (by content): a move copies
// neither and removes them last.
func (c *Catalog) sealFiles(ctx context.Context, files []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range files {
		i := strings.LastIndexByte(f, '/')
		mk, ok := parseSealMarker(f[i+1:])
		if !ok {
			continue
		}
		out[f] = true
		mf := f[:i+1] + mk.manifest
		b, err := c.wh.Read(ctx, mf)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m, err := DecodeManifest(b); err == nil && isSeal(m, mk.id) {
			out[mf] = true
		}
	}
	return out, nil
}

// unseal removes the seals of move id from every line of the folder at
// key (a stopped move that copied nothing: the source stays).
func (c *Catalog) unseal(ctx context.Context, key, id string) error {
	files, err := c.wh.Walk(ctx, key)
	if err != nil {
		return err
	}
	var markers []string
	for _, f := range files {
		i := strings.LastIndexByte(f, '/')
		if mk, ok := parseSealMarker(f[i+1:]); ok && mk.id == id {
			markers = append(markers, f)
		}
	}
	sealed, err := c.sealFiles(ctx, markers)
	if err != nil {
		return err
	}
	// Seals first, then markers: a marker without its seal hides nothing.
	for f := range sealed {
		if !strings.HasSuffix(f, sealExt) {
			if err := ignoreMissing(c.wh.Delete(ctx, f)); err != nil {
				return err
			}
		}
	}
	for _, f := range markers {
		if err := ignoreMissing(c.wh.Delete(ctx, f)); err != nil {
			return err
		}
	}
	return nil
}

// writeGone turns the error of a write into the table's folder that
// failed because a move (or a drop) removed the folder meanwhile into a
// clear one; other errors pass.
func (t *Table) writeGone(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, os.ErrNotExist) && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	if _, _, lerr := t.latestToCommit(ctx); lerr != nil && (errs.CodeOf(lerr) == errs.CodeTableNotFound || errs.CodeOf(lerr) == errs.CodeConcurrentModification) {
		return &errs.Error{Code: errs.CodeTableNotFound, Message: fmt.Sprintf("table %s was moved or dropped while this write ran: nothing was written", JoinID(t.id)), Err: err}
	}
	return err
}
