package table

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/errs"
)

// CreateVersion publishes a manifest the client staged inside the table
// folder (manifestPath, relative to it) as version v under scheme, with
// put-if-not-exists. The staged manifest is outside _versions/, or is
// exactly _versions/{the final manifest name}-{uuid}: where Lance's
// external-manifest commit stages it (isStagedManifest). The staged manifest must parse, carry version v and
// reference only data files that exist. v must be latest+1: an existing
// version is a conflict, a gap is invalid input. metadata, when given,
// replaces the version's metadata. An existing version is checked first.
// It returns the new version file, its
// manifest and the bytes written.
func (t *Table) CreateVersion(ctx context.Context, v uint64, manifestPath string, scheme NamingScheme, metadata map[string]string) (VersionFile, *Manifest, []byte, error) {
	return t.CreateVersionIf(ctx, v, manifestPath, scheme, metadata, nil, "")
}

// CreateVersionIf is CreateVersion with the client's expectations of the
// staged manifest, as version/create carries them (expectStaged).
func (t *Table) CreateVersionIf(ctx context.Context, v uint64, manifestPath string, scheme NamingScheme, metadata map[string]string, manifestSize *int64, etag string) (VersionFile, *Manifest, []byte, error) {
	sv, err := t.stageVersion(ctx, v, manifestPath, scheme, metadata)
	if err != nil {
		return VersionFile{}, nil, nil, err
	}
	if err := t.expectStaged(sv.st, manifestSize, etag); err != nil {
		return VersionFile{}, nil, nil, err
	}
	// Put within half the seal grace of the listing (seal.go).
	if !t.fresh(sv.listed) {
		if _, ok, err := t.revalidate(ctx, sv.parent); err != nil {
			return VersionFile{}, nil, nil, err
		} else if !ok {
			return VersionFile{}, nil, nil, errs.Errorf(errs.CodeConcurrentModification, "version %d already exists", v)
		}
	}
	err = t.putVersion(ctx, v, scheme, sv.name, sv.data)
	if errors.Is(err, ErrExists) {
		if err := t.sealedVersion(ctx, v, sv.name); err != nil {
			return VersionFile{}, nil, nil, err
		}
		return VersionFile{}, nil, nil, errs.Errorf(errs.CodeConcurrentModification, "version %d already exists", v)
	}
	if err != nil {
		return VersionFile{}, nil, nil, err
	}
	sv.m.parent = nil // encoded: no chain of versions kept alive

	t.notify(ctx, sv.m)
	return VersionFile{Version: v, Scheme: scheme, Name: sv.name, Size: int64(len(sv.data))}, sv.m, sv.data, nil
}

// stagedVersion is a version CreateVersion (or a batch) checked and is
// about to publish: its file name under _versions/, its manifest and the
// bytes to write, and the client's staged file it came from.
type stagedVersion struct {
	name   string
	parent string    // the file name of the version it follows
	listed time.Time // when the listing that found parent began
	m      *Manifest
	data   []byte
	st     *staged // the client's staged file, as read
}

// stageVersion does CreateVersion's checks and returns what it writes.
func (t *Table) stageVersion(ctx context.Context, v uint64, manifestPath string, scheme NamingScheme, metadata map[string]string) (*stagedVersion, error) {
	// Put-if-not-exists: an existing version is a conflict whatever else
	// is wrong with the request, so a client retrying a commit whose
	// staged manifest was cleaned up learns that the version exists.
	if _, err := t.Version(ctx, v); err == nil {
		return nil, errs.Errorf(errs.CodeConcurrentModification, "version %d already exists", v)
	} else if errs.CodeOf(err) != errs.CodeTableVersionNotFound {
		return nil, err
	}
	st, err := t.readStaged(ctx, v, manifestPath, scheme)
	if err != nil {
		return nil, err
	}
	m, data := st.m, st.data
	if err := m.checkIndexFragments(); err != nil {
		return nil, err
	}
	latest, listed, err := t.latestToCommit(ctx)
	if err != nil {
		return nil, err
	}
	cur, err := t.readManifest(ctx, latest)
	if err != nil {
		return nil, err
	}
	if err := t.c.guardWrite(t.id, cur, "version create"); err != nil {
		return nil, err
	}
	if cur.IsExternal() || m.IsExternal() {
		return nil, refuseExternal(t.id, "version create")
	}
	if v <= latest.Version {
		return nil, errs.Errorf(errs.CodeConcurrentModification, "version %d already exists", v)
	}
	if v > latest.Version+1 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "version: %d would leave a gap after the latest version %d", v, latest.Version)
	}
	if err := t.checkFiles(ctx, m, cur); err != nil {
		return nil, err
	}
	// A re-encoded version (below, or a batch's) records its Lance
	// transaction as the change from the version it follows, as every
	// mvq commit does, so a Lance writer behind it can rebase over it.
	m.parent = cur
	// The table keeps its identity whatever the staged manifest says, and
	// only a batch (txn.go) marks a version as part of a transaction.
	// A version staged in mvq's JSON form joins a Lance table as a Lance
	// manifest, so every version of the table stays readable by Lance.
	if metadata != nil || m.UUID != cur.UUID || m.Transaction != "" || (cur.lance && !m.lance) {
		if err := refuseStableRowIDs(t.id, cur, "a version/create that mvq rewrites (metadata, another identity, mvq's JSON form)"); err != nil {
			return nil, err
		}
		if metadata != nil {
			m.Metadata = metadata
		}
		m.UUID = cur.UUID
		m.Transaction = ""
		if cur.lance && !m.lance {
			// mvq's JSON form names no field ids: its fields get ids
			// never used before, and other writers' indexes (which name
			// ids) go; their config stays.
			m.carry = cur.carry.restarted()
		}
		m.lance = m.lance || cur.lance
		if data, err = m.Encode(); err != nil {
			return nil, stagedEncodeErr(err)
		}
	}
	name := ManifestName(v, scheme)
	// The version must not exist under the other scheme's name either.
	other := NamingV1
	if scheme == NamingV1 {
		other = NamingV2
	}
	if v < math.MaxUint64 {
		if ok, _ := t.c.wh.Exists(ctx, t.versionsKey()+ManifestName(v, other)); ok {
			return nil, errs.Errorf(errs.CodeConcurrentModification, "version %d already exists", v)
		}
	}
	return &stagedVersion{name: name, parent: latest.Name, listed: listed, m: m, data: data, st: st}, nil
}

// isStagedManifest reports whether clean (relative to the table folder)
// is where Lance's external-manifest commit stages version v's manifest
// before asking the namespace to create the version:
// _versions/{ManifestName(v, scheme)}-{uuid}, the uuid in its canonical
// lowercase hyphenated form. Nothing else under _versions/ is.
func isStagedManifest(clean string, v uint64, scheme NamingScheme) bool {
	rest, ok := strings.CutPrefix(clean, versionsDir+ManifestName(v, scheme)+"-")
	if !ok {
		return false
	}
	u, err := uuid.Parse(rest)
	return err == nil && u.String() == rest
}

// lostToOtherScheme is called by a writer that just put version v under
// name (naming scheme): put-if-not-exists guards one name, and a writer
// using the other scheme's name for the same version could have
// succeeded too. Each side checks the other name after its own put:
// whichever checks second sees the other, and a writer that sees the
// other name takes its own back (lost) — both may give way, never both
// stay. One stat (a HEAD on S3) per commit.
func (t *Table) lostToOtherScheme(ctx context.Context, v uint64, scheme NamingScheme, name string) (bool, error) {
	other := NamingV1
	if scheme == NamingV1 {
		other = NamingV2
	}
	if v >= math.MaxUint64 {
		return false, nil
	}
	ok, err := t.c.wh.Exists(ctx, t.versionsKey()+ManifestName(v, other))
	if err != nil || !ok {
		// An error leaves the version in place, as a put that
		// succeeded; the check is best effort against a rare mix.
		return false, nil
	}
	return true, t.c.wh.Delete(context.WithoutCancel(ctx), t.versionsKey()+name)
}

// staged is a manifest a client staged for version/create, read and
// checked: it parses, carries the version asked for and has a valid
// schema (checkFiles checks the files it references).
type staged struct {
	m     *Manifest
	data  []byte
	clean string // its path in the table folder
	size  int64
	sum   [16]byte // MD5 of the client's bytes
}

func (t *Table) readStaged(ctx context.Context, v uint64, manifestPath string, scheme NamingScheme) (*staged, error) {
	switch scheme {
	case NamingV1, NamingV2:
	default:
		return nil, errs.Errorf(errs.CodeInvalidInput, "naming_scheme: %q is not V1 or V2", scheme)
	}
	if v == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "version: versions start at 1")
	}
	if scheme == NamingV1 && v >= 1e19 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "version: too large for V1 naming")
	}
	rel := t.tableRel(manifestPath)
	clean := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || clean != rel || strings.HasPrefix(clean, "..") || strings.HasPrefix(clean, branchTreeDir) ||
		(strings.HasPrefix(clean, versionsDir) && !isStagedManifest(clean, v, scheme)) {
		return nil, errs.Errorf(errs.CodeInvalidInput, "manifest_path: %q must be a clean path inside the table folder, outside tree/ and _versions/ but for the staging name %s%s-{uuid}", manifestPath, versionsDir, ManifestName(v, scheme))
	}
	data, err := t.c.wh.Read(ctx, t.key+clean)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.Errorf(errs.CodeInvalidInput, "manifest_path: %q does not exist", manifestPath)
	}
	if err != nil {
		return nil, err
	}
	stagedSize := int64(len(data))
	stagedSum := md5.Sum(data) // of the client's bytes, before any rewrite below
	m, err := DecodeManifest(data)
	if err != nil {
		return nil, errs.Errorf(errs.CodeInvalidInput, "manifest_path: %v", err)
	}
	if m.Version != v {
		return nil, errs.Errorf(errs.CodeInvalidInput, "manifest_path: manifest carries version %d, request says %d", m.Version, v)
	}
	if s, err := decodeSchema(m.Schema); err != nil {
		return nil, errs.Errorf(errs.CodeInvalidInput, "manifest_path: %v", err)
	} else if err := checkSchema(s); err != nil {
		return nil, errs.Errorf(errs.CodeInvalidInput, "manifest_path: %v", err)
	}
	return &staged{m: m, data: data, clean: clean, size: stagedSize, sum: stagedSum}, nil
}

// checkFiles checks that the data and deletion files the staged manifest
// references exist (and its deletion files say what it says), but for
// fragments that the table's latest version cur (nil: none) already has
// with the same files: those were checked when cur was published, and a
// LanceDB append adds one fragment to a table of thousands.
func (t *Table) checkFiles(ctx context.Context, m, cur *Manifest) error {
	var known map[uint32]Fragment
	if cur != nil {
		known = make(map[uint32]Fragment, len(cur.Fragments))
		for _, f := range cur.Fragments {
			known[f.ID] = f
		}
	}
	var fields []int // every field of m, once a fragment needs them
	for _, f := range m.Fragments {
		k, ok := known[f.ID]
		if ok && sameFiles(k, f) {
			continue
		}
		// Only its deletion file changed (a delete or update): the data
		// files were checked when they were published.
		sameData := ok && k.Path == f.Path && k.Extra == f.Extra && k.Parts == f.Parts && k.Columns == f.Columns && k.Rows+k.DeletedRows == f.Rows+f.DeletedRows
		if _, err := f.parts(); err != nil { // checks its extra files too
			return errs.Errorf(errs.CodeInvalidInput, "manifest_path: %v", err)
		}
		for _, p := range f.DataPaths() {
			ok, err := t.c.wh.Exists(ctx, t.key+p)
			if err != nil {
				return err
			}
			if !ok {
				return errs.Errorf(errs.CodeInvalidInput, "manifest_path: fragment %d file %s does not exist", f.ID, p)
			}
		}
		// A deletion file it names must be there and say what the
		// manifest says, or the version would be unreadable (checkData
		// reads it with the data).
		if !sameData {
			if fields == nil {
				schema, err := m.ArrowSchema()
				if err != nil {
					return errs.Errorf(errs.CodeInvalidInput, "manifest_path: schema: %v", err)
				}
				fields = make([]int, schema.NumFields())
				for i := range fields {
					fields[i] = i
				}
			}
			if err := t.checkData(ctx, f, fields); err != nil {
				return err
			}
		} else if f.HasDeletions() {
			if _, err := t.Deleted(ctx, f); err != nil {
				return stagedDataErr(err)
			}
		}
	}
	return nil
}

// checkData checks that fragment f of a staged version holds what the
// version says, from the data files' footers and column metadata and its
// deletion file (nothing is decoded): its live rows are f's rows, and
// each of the version's fields (all of them, in order) is a column its
// files have. Without it a manifest that lies about a new
// fragment would be published, and every reader of the version
// (LanceDB's and mvq's) would fail on it. Types are not compared: a file
// that mvq cannot decode (an encoding it does not implement) does not
// block another writer's commit; its readers answer for it.
func (t *Table) checkData(ctx context.Context, f Fragment, fields []int) error {
	r, err := t.OpenFragment(ctx, f, FragmentReadOptions{Mem: t.c.opts.Mem})
	if err != nil {
		return stagedDataErr(err)
	}
	defer r.Close()
	if n := r.NumRows(); n != f.Rows {
		return errs.Errorf(errs.CodeInvalidInput, "manifest_path: fragment %d says %d live rows; its data file holds %d", f.ID, f.Rows, n)
	}
	if err := r.CheckFields(fields); err != nil {
		return stagedDataErr(err)
	}
	return nil
}

// stagedDataErr is a staged manifest's data that does not read as the
// manifest says: the client's error (400), with the message and not the
// cause (which may name a local path).
func stagedDataErr(err error) error {
	var e *errs.Error
	if errors.As(err, &e) && e.Code == errs.CodeInvalidTableState {
		return errs.Errorf(errs.CodeInvalidInput, "manifest_path: %s", e.Message)
	}
	return err
}

// sameFiles reports whether fragments a and b name the same data file and
// deletion file, with the same counts.
func sameFiles(a, b Fragment) bool {
	return a.Path == b.Path && a.Extra == b.Extra && a.Rows == b.Rows && a.DeletionID == b.DeletionID && a.DeletionReadVersion == b.DeletionReadVersion &&
		a.DeletionBitmap == b.DeletionBitmap && a.DeletedRows == b.DeletedRows
}

// md5 is the hex MD5 of the staged file (an S3 single-part ETag).
func (s *staged) md5() string { return hex.EncodeToString(s.sum[:]) }

// expectStaged checks the client's expectations of its staged file, as
// version/create carries them: manifestSize, when set, must be its size
// (else invalid input), and etag, when set, its ETag, quoted or not: its
// MD5, or the ETag the store gives the file (storeETags); else a conflict,
// as it changed since the client staged it.
func (t *Table) expectStaged(st *staged, manifestSize *int64, etag string) error {
	if manifestSize != nil && *manifestSize != st.size {
		return errs.Errorf(errs.CodeInvalidInput, "manifest_size: %d, but the staged manifest has %d bytes", *manifestSize, st.size)
	}
	if e := strings.Trim(etag, `"`); e != "" && e != st.md5() && !slices.Contains(t.storeETags(t.key+st.clean), e) {
		return errs.Errorf(errs.CodeConcurrentModification, "e_tag: %s, but the staged manifest's is \"%s\" (it changed since)", etag, st.md5())
	}
	return nil
}

// putVersion writes version v's manifest data under name, put-if-not-
// exists (an existing one is ErrExists), and takes it back when a writer
// using the other naming scheme wrote the same version (lostToOtherScheme):
// then a conflict.
func (t *Table) putVersion(ctx context.Context, v uint64, scheme NamingScheme, name string, data []byte) error {
	err := t.c.wh.PutIfNotExists(ctx, t.versionsKey()+name, data)
	if errors.Is(err, ErrExists) {
		return err
	}
	if err != nil {
		return fmt.Errorf("create version %d: %w", v, err)
	}
	if lost, err := t.lostToOtherScheme(ctx, v, scheme, name); err != nil || lost {
		if err == nil {
			err = errs.Errorf(errs.CodeConcurrentModification, "version %d already exists (written concurrently under the other naming scheme)", v)
		}
		return err
	}
	return nil
}

// stagedEncodeErr is a staged manifest mvq cannot write as a version (a
// fragment layout its form cannot say): the client's error.
func stagedEncodeErr(err error) error {
	if errs.CodeOf(err) != errs.CodeInternal {
		return err
	}
	return errs.Errorf(errs.CodeInvalidInput, "manifest_path: the staged manifest cannot be written as a version: %v", err)
}
