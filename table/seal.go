package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
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
// A commit whose base was read before the move and whose put lands only
// after the source was removed (the name was free again) is caught after
// its put: its parent version is gone. When the table has moved (its
// identity recorded elsewhere, or deregistered) and the destination does
// not hold exactly this version, the commit removes what it put and
// answers errMoved; one parent check per commit is all a commit pays.
//
// A move stopped after sealing is finished forward when the destination
// holds the table, else its seals are removed (unseal): the source is
// writable again (completeMove).

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
	if _, _, ok := ParseManifestName(mk.manifest); !ok || !validTxnID(mk.id) {
		return sealMarker{}, false
	}
	return mk, true
}

// isSeal reports whether m is the seal of move id.
func isSeal(m *Manifest, id string) bool {
	return m != nil && m.Operation == sealOperation && m.Transaction == id && id != ""
}

// hideSeals takes the seals the markers name out of a listing.
func (t *Table) hideSeals(ctx context.Context, byVersion map[uint64]VersionFile, seals []sealMarker) error {
	for _, mk := range seals {
		v, _, _ := ParseManifestName(mk.manifest)
		vf, ok := byVersion[v]
		if !ok || vf.Name != mk.manifest {
			continue
		}
		b, err := t.c.wh.Read(ctx, t.versionsKey()+vf.Name)
		if errors.Is(err, os.ErrNotExist) {
			delete(byVersion, v) // removed meanwhile
			continue
		}
		if err != nil {
			return err
		}
		if m, err := DecodeManifest(b); err == nil && isSeal(m, mk.id) {
			delete(byVersion, v)
		}
	}
	return nil
}

// errMoved is the error of a commit that lost to a move's seal, or
// whose version landed in a folder the move had already removed.
func (t *Table) errMoved(v uint64, movedTo string) error {
	where := "moved"
	switch {
	case strings.HasPrefix(movedTo, deregisteredDir):
		where = "deregistered"
	case movedTo != "":
		where = "renamed to " + movedTo
	}
	return Errorf(CodeConcurrentModification, "table %s was %s while this commit ran: version %d was not committed there; commit again under its new name", JoinID(t.id), where, v)
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

// confirmCommit is called by a commit that put version m (data, under
// name) on parent (the file name of its base): when the parent is gone
// and the table moved while the commit ran, the version counts only if
// the destination holds exactly it (the move copied it); otherwise the
// commit landed in a removed folder: it takes its manifest back and
// answers errMoved.
func (t *Table) confirmCommit(ctx context.Context, parent, name string, m *Manifest, data []byte) error {
	if ok, err := t.c.wh.Exists(ctx, t.versionsKey()+parent); err != nil || ok {
		return nil // the parent is there: the folder was not moved away before the put
	}
	if m.UUID == "" {
		return nil
	}
	dest, movedTo, err := t.c.movedLine(ctx, m.UUID, t.branch)
	if err != nil || dest == nil || dest.key == t.key {
		return nil // not moved: the parent went another way (a version deletion)
	}
	if b, err := t.c.wh.Read(ctx, dest.versionsKey()+name); err == nil && bytes.Equal(b, data) {
		return nil // copied by the move: committed under the new name
	}
	if err := ignoreMissing(t.c.wh.Delete(context.WithoutCancel(ctx), t.versionsKey()+name)); err != nil {
		return fmt.Errorf("take back version %d of moved table %s: %w", m.Version, JoinID(t.id), err)
	}
	return t.errMoved(m.Version, movedTo)
}

// movedLine is line b of the table with identity uuid where a move took
// it (renamed: its identity record; deregistered: _deregistered/), with
// a description of where; nil when no move is recorded.
func (c *Catalog) movedLine(ctx context.Context, uuid, b string) (*Table, string, error) {
	moved, err := c.movedTable(ctx, uuid)
	if err != nil {
		return nil, "", err
	}
	if moved != nil {
		line := *moved
		line.branch = b
		return &line, JoinID(moved.id), nil
	}
	key := deregisteredDir + uuid + tableSuffix + "/"
	line := &Table{c: c, id: []string{strings.TrimSuffix(key, "/")}, key: key, branch: b}
	if vs, err := line.Main().Versions(ctx); err != nil || len(vs) == 0 {
		return nil, "", err
	}
	return line, key, nil
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
		if ErrorCode(err) == CodeTableNotFound || ErrorCode(err) == CodeTableBranchNotFound {
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
			return Errorf(CodeConcurrentModification, "seal %s for a move: gave up after %d concurrent commits", JoinID(t.id), attempt)
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
	files, err := c.wh.walk(ctx, key)
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
