package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/telemetry"
)

// Table is a handle on a table folder. It holds no version: every read
// names or resolves one.
type Table struct {
	c   *Catalog
	id  []string
	key string // folder key, ending in "/"
	// branch is the line of versions the handle reads and commits ("":
	// main); see branch.go.
	branch string
	// storage caches storageVersion (shared by the handle's branch
	// handles: a dataset has one storage version).
	storage *atomic.Pointer[string]
}

// ID is the table identifier.
func (t *Table) ID() []string { return t.id }

// Catalog returns the catalog the table lives in.
func (t *Table) Catalog() *Catalog { return t.c }

// Location is the URI of the table folder.
func (t *Table) Location() string { return t.c.wh.Location(strings.TrimSuffix(t.key, "/")) }

// Key returns the warehouse key of a path relative to the table folder.
func (t *Table) Key(rel string) string { return t.key + rel }

func (c *Catalog) tableExists(ctx context.Context, id []string) (bool, error) {
	vs, err := c.handle(id).versionNames(ctx)
	return len(vs) > 0, err
}

func (c *Catalog) handle(id []string) *Table {
	return &Table{c: c, id: append([]string(nil), id...), key: tableKey(id), storage: new(atomic.Pointer[string])}
}

// OpenTable returns a handle on an existing table; a table with no version
// is not found.
func (c *Catalog) OpenTable(ctx context.Context, id []string) (*Table, error) {
	if len(id) == 0 {
		return nil, errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	t := c.handle(id)
	ok, err := c.tableExists(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errs.Errorf(errs.CodeTableNotFound, "table %s not found", JoinID(id))
	}
	return t, nil
}

// VersionFile is one manifest file under _versions/.
type VersionFile struct {
	Version uint64
	Scheme  NamingScheme
	Name    string // file name under _versions/
	Size    int64
	ModTime time.Time // as the warehouse lists it (caches key on it)
	// MD5 is the content hash the store lists (S3: the ETag of a
	// single-part object; nil where the store has none, as file://).
	// Caches compare it too: S3 lists times to the second, so a table
	// dropped and re-created within one second has a same-named,
	// same-sized, same-time version 1 that only its content tells apart.
	MD5 []byte
}

// Versions lists the table's versions in ascending order. Where a version
// exists under both names, the V2 file wins.
func (t *Table) Versions(ctx context.Context) ([]VersionFile, error) {
	vs, _, err := t.listVersions(ctx)
	return vs, err
}

// listVersions is Versions and the seal of a move it hid (nil: none;
// seal.go).
func (t *Table) listVersions(ctx context.Context) ([]VersionFile, *Manifest, error) {
	entries, err := t.c.wh.List(ctx, t.versionsKey())
	if err != nil {
		return nil, nil, err
	}
	return t.versionsOf(ctx, entries)
}

// LatestVersion returns the newest version file (latest.go).
func (t *Table) LatestVersion(ctx context.Context) (VersionFile, error) {
	return t.latestVersion(ctx)
}

// Version returns the file of version v (latest.go).
func (t *Table) Version(ctx context.Context, v uint64) (VersionFile, error) {
	return t.version(ctx, v)
}

// LoadSchema is Load with the version's Arrow schema.
func (t *Table) LoadSchema(ctx context.Context, v uint64) (*Manifest, *arrow.Schema, error) {
	m, err := t.Load(ctx, v)
	if err != nil {
		return nil, nil, err
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, nil, err
	}
	return m, schema, nil
}

// Load reads version v, or the latest when v is 0.
func (t *Table) Load(ctx context.Context, v uint64) (*Manifest, error) {
	var vf VersionFile
	var err error
	if v == 0 {
		for attempt := 0; ; attempt++ {
			var m *Manifest
			if vf, err = t.LatestVersion(ctx); err == nil {
				m, err = t.readManifest(ctx, vf)
			}
			// Removed since the listing (a move, a rollback): list again.
			if !errors.Is(err, os.ErrNotExist) || attempt >= 20 {
				return m, err
			}
		}
	} else {
		vf, err = t.Version(ctx, v)
	}
	if err != nil {
		return nil, err
	}
	return t.readManifest(ctx, vf)
}

// LoadFile reads the version a listing (Versions, LatestVersion) returned,
// without listing again.
func (t *Table) LoadFile(ctx context.Context, vf VersionFile) (*Manifest, error) {
	return t.readManifest(ctx, vf)
}

func (t *Table) readManifest(ctx context.Context, vf VersionFile) (*Manifest, error) {
	b, err := t.c.wh.Read(ctx, t.versionsKey()+vf.Name)
	if err != nil {
		return nil, fmt.Errorf("read %s v%d: %w", JoinID(t.id), vf.Version, err)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("table %s version %d is corrupt", JoinID(t.id), vf.Version), Err: err}
	}
	m.Version = vf.Version
	return m, nil
}

// Identity is the identity of the table m is a version of: the UUID
// stored at creation, or, for a table created before identities were
// stored, LegacyIdentity of its version 1's timestamp. Reading version 1
// can fail; the error is returned, never guessed around: an identity that
// could not be read must not look like another table's.
func (t *Table) Identity(ctx context.Context, m *Manifest) (string, error) {
	if m.UUID != "" {
		return m.UUID, nil
	}
	v1 := m
	if m.Version != 1 || t.branch != "" {
		var err error
		if v1, err = t.Main().Load(ctx, 1); err != nil {
			return "", fmt.Errorf("identity of %s: %w", JoinID(t.id), err)
		}
	}
	if v1.UUID != "" {
		return v1.UUID, nil
	}
	return LegacyIdentity(v1.TimestampMillis), nil
}

// Schema decodes the manifest's Arrow schema.
func (m *Manifest) ArrowSchema() (*arrow.Schema, error) { return decodeSchema(m.Schema) }

// Op derives the next manifest from base (a private copy). It is called
// again with a newer base when a concurrent writer took the version; it
// returns an error wrapping ErrConflict when it cannot be rebased on base.
type Op func(base *Manifest) (*Manifest, error)

// maxCommitAttempts bounds the rebase loop of one commit.
const maxCommitAttempts = 200

// Commit writes the next version with put-if-not-exists. A lost race
// re-reads the latest version and calls op again (append rebases; ops that
// cannot rebase return a conflict). Exactly one writer wins each version.
// It is traced as table.commit and measured by mvq_commit_duration_seconds
// and mvq_commit_conflicts_total.
func (t *Table) Commit(ctx context.Context, op Op) (*Manifest, error) {
	ctx, span := tracer.Start(ctx, "table.commit", trace.WithAttributes(attribute.String("mvq.table", JoinID(t.id))))
	defer span.End()
	start := time.Now()
	attempts := 0
	m, err := t.commit(ctx, op, &attempts)
	telemetry.CommitDuration.Record(ctx, time.Since(start).Seconds())
	if attempts > 1 {
		telemetry.CommitConflicts.Add(ctx, int64(attempts-1))
	}
	span.SetAttributes(attribute.Int("mvq.commit_attempts", attempts))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	span.SetAttributes(attribute.Int64("mvq.version", int64(m.Version)), attribute.Int64("mvq.rows", m.NumRows()), attribute.Int("mvq.fragments", len(m.Fragments)))
	t.notify(ctx, m)
	return m, nil
}

var tracer = otel.Tracer("github.com/mvq-dev/mvq/table")

func (t *Table) commit(ctx context.Context, op Op, attempts *int) (*Manifest, error) {
	for {
		*attempts++
		parent, listed, err := t.latestToCommit(ctx)
		if errors.Is(err, os.ErrNotExist) && *attempts < maxCommitAttempts {
			continue // a listing that met files being removed
		}
		if err != nil {
			return nil, err
		}
		base, err := t.readManifest(ctx, parent)
		if errors.Is(err, os.ErrNotExist) && *attempts < maxCommitAttempts {
			continue // removed since the listing (a move, a rollback): list again
		}
		if err != nil {
			return nil, err
		}
		// Every commit of mvq's own re-encodes the manifest (the guards of
		// the operations refuse earlier, before writing data).
		if err := refuseStableRowIDs(t.id, base, "a commit"); err != nil {
			return nil, err
		}
		next, err := op(base.clone())
		if err != nil {
			return nil, err
		}
		if (base.IsExternal() || next.IsExternal()) && !externalWrite(ctx) {
			return nil, refuseExternal(t.id, next.Operation)
		}
		if err := checkWritten(next); err != nil {
			return nil, err
		}
		next.UUID = base.UUID // no operation changes a table's identity
		next.Version = base.Version + 1
		next.ParentVersion = base.Version
		next.TimestampMillis = time.Now().UnixMilli()
		next.parent = base
		data, err := next.Encode()
		next.parent = nil
		if err != nil {
			return nil, err
		}
		// Put within half the seal grace of the listing (seal.go).
		if !t.fresh(listed) {
			_, ok, err := t.revalidate(ctx, parent.Name)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		name := ManifestName(next.Version, NamingV2)
		err = t.c.wh.PutIfNotExists(ctx, t.versionsKey()+name, data)
		if err == nil {
			lost, lerr := t.lostToOtherScheme(ctx, next.Version, NamingV2, name)
			if lerr != nil {
				return nil, lerr
			}
			if !lost {
				return next, nil
			}
			err = ErrExists // a version/create under the V1 name: retry after it
		}
		if errors.Is(err, os.ErrNotExist) && *attempts < maxCommitAttempts {
			continue // the folder went (a move, a drop): list again
		}
		if !errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("commit %s v%d: %w", JoinID(t.id), next.Version, err)
		}
		// A move's seal took it: the table is going elsewhere.
		if err := t.sealedVersion(ctx, next.Version, name); err != nil {
			return nil, err
		}
		// A batch transaction may hold the version: wait for its outcome
		// (recovering it when its writer is overdue) before trying again.
		if err := t.settleVersion(ctx, next.Version); err != nil {
			return nil, err
		}
		if *attempts >= maxCommitAttempts {
			return nil, &errs.Error{Code: errs.CodeConcurrentModification, Message: fmt.Sprintf("commit %s: gave up after %d concurrent commits", JoinID(t.id), *attempts)}
		}
		// Back off a little so a crowd of writers spreads out.
		d := time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(*attempts, 20))))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
}

// CreateTable creates a table at version 1 from the records of rdr (which
// may yield none) with schema. mode: "create" (default; an existing table is
// an error), "exist_ok" (answers the existing table's latest version) or
// "overwrite" (replaces its data in a new version).
func (c *Catalog) CreateTable(ctx context.Context, id []string, schema *arrow.Schema, rdr array.RecordReader, mode string, props map[string]json.RawMessage) (*Table, *Manifest, error) {
	if len(id) == 0 {
		return nil, nil, errs.Errorf(errs.CodeInvalidInput, "a table identifier needs a name")
	}
	mode = strings.ToLower(mode)
	switch mode {
	case "", "create", "exist_ok", "existok", "overwrite":
	default:
		return nil, nil, errs.Errorf(errs.CodeInvalidInput, "mode %q: want create, exist_ok or overwrite", mode)
	}
	if err := c.requireNamespace(ctx, id[:len(id)-1]); err != nil {
		return nil, nil, err
	}
	if err := checkSchema(schema); err != nil {
		return nil, nil, err
	}
	t := c.handle(id)
	exists, err := c.tableExists(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if exists {
		switch mode {
		case "exist_ok", "existok":
			m, err := t.Load(ctx, 0)
			return t, m, err
		case "overwrite":
			if m, err := t.Load(ctx, 0); err != nil {
				return nil, nil, err
			} else if err := c.guardWrite(id, m, "overwrite"); err != nil {
				return nil, nil, err
			}
			frags, err := t.WriteFragments(ctx, schema, rdr, 0)
			if err != nil {
				return nil, nil, err
			}
			m, err := t.Commit(ctx, OverwriteOp(schema, frags, props))
			return t, m, err
		default:
			return nil, nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(id))
		}
	}
	frags, err := t.WriteFragments(ctx, schema, rdr, 0)
	if err != nil {
		return nil, nil, err
	}
	enc, err := encodeSchema(schema)
	if err != nil {
		return nil, nil, err
	}
	m := &Manifest{Version: 1, UUID: newIdentity(), TimestampMillis: time.Now().UnixMilli(), Operation: "create", Schema: enc,
		lance: c.opts.Format == FormatLance}
	m.Properties = rawProps(props)
	assignIDs(m, frags)
	data, err := m.Encode()
	if err != nil {
		return nil, nil, err
	}
	err = c.wh.PutIfNotExists(ctx, t.key+versionsDir+ManifestName(1, NamingV2), data)
	if errors.Is(err, ErrExists) {
		return nil, nil, errs.Errorf(errs.CodeTableAlreadyExists, "table %s already exists", JoinID(id))
	}
	if err != nil {
		return nil, nil, err
	}
	return t, m, nil
}

// DropTable removes the table folder. Its versions go first, so the table
// disappears at once even if removing data is interrupted.
func (c *Catalog) DropTable(ctx context.Context, id []string) error {
	t, err := c.OpenTable(ctx, id)
	if err != nil {
		return err
	}
	if err := c.wh.DeletePrefix(ctx, t.key+versionsDir); err != nil {
		return err
	}
	return c.wh.DeletePrefix(ctx, t.key)
}

func rawProps(props map[string]json.RawMessage) map[string]json.RawMessage {
	if len(props) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(props))
	for k, v := range props {
		out[k] = v
	}
	return out
}

func assignIDs(m *Manifest, frags []Fragment) {
	for _, f := range frags {
		f.ID = m.NextFragmentID
		m.NextFragmentID++
		m.Fragments = append(m.Fragments, f)
	}
}

// AppendOp adds fragments written with the schema the version base had
// when the writer read it (schema, as the manifest encodes it). It rebases
// on any concurrent commit that kept that schema and conflicts with one
// that changed it (an overwrite with other columns).
func AppendOp(schema string, frags []Fragment) Op {
	return func(base *Manifest) (*Manifest, error) {
		if base.Schema != schema {
			return nil, &errs.Error{Code: errs.CodeConcurrentModification, Message: "append: the table schema changed in a concurrent commit; retry"}
		}
		base.Operation = "append"
		assignIDs(base, frags)
		return base, nil
	}
}

// OverwriteOp replaces the schema and every fragment. props, when non-nil,
// replace the table properties.
func OverwriteOp(schema *arrow.Schema, frags []Fragment, props map[string]json.RawMessage) Op {
	return func(base *Manifest) (*Manifest, error) {
		enc, err := encodeSchema(schema)
		if err != nil {
			return nil, err
		}
		base.Operation = "overwrite"
		base.Schema = enc
		base.Fragments = nil
		base.carry = base.carry.restarted()
		if props != nil {
			base.Properties = rawProps(props)
		}
		assignIDs(base, frags)
		return base, nil
	}
}

// Replacement swaps fragment Old for New (nil: Old is dropped).
type Replacement struct {
	Old uint32
	New *Fragment
	// OldKey, when set, is the Fragment.Key the replaced fragment had when
	// read: a concurrent commit that gave it another deletion file (a
	// Lance writer's delete) is a conflict, not lost.
	OldKey string
	// InPlace: New is fragment Old itself with another deletion file
	// (withDeletions), so it keeps its id.
	InPlace bool
}

// errFragmentChanged is the cause of RewriteOp's conflict: a fragment it
// replaces was removed or changed by a concurrent commit. An operation
// that computes its replacements from the version it read (delete,
// update) can compute them again on the new one.
type fragmentChanged struct{ e *errs.Error }

func (e fragmentChanged) Error() string { return e.e.Error() }
func (e fragmentChanged) Unwrap() error { return e.e }

// isFragmentChanged reports whether err is RewriteOp's conflict.
func isFragmentChanged(err error) bool {
	var fc fragmentChanged
	return errors.As(err, &fc)
}

// RewriteOp swaps fragments for their rewritten copies (delete, update),
// each in the place of the one it replaces, so table order is kept. It
// conflicts when a concurrent commit already removed one of them;
// concurrent appends are kept.
func RewriteOp(operation string, reps []Replacement) Op {
	return func(base *Manifest) (*Manifest, error) {
		byOld := make(map[uint32]Replacement, len(reps))
		for _, r := range reps {
			byOld[r.Old] = r
		}
		out := base.Fragments[:0:0]
		for _, f := range base.Fragments {
			rep, swap := byOld[f.ID]
			if !swap {
				out = append(out, f)
				continue
			}
			if rep.OldKey != "" && rep.OldKey != f.Key() {
				return nil, fragmentChanged{&errs.Error{Code: errs.CodeConcurrentModification, Message: fmt.Sprintf("%s: fragment %d changed by a concurrent commit; retry", operation, f.ID)}}
			}
			delete(byOld, f.ID)
			if nf := rep.New; nf != nil {
				r := *nf
				if rep.InPlace {
					// The same data files with another deletion file:
					// how their columns map to the schema is the base's
					// (a concurrent drop, rename or added column changed
					// it since the fragment was read, not its data).
					r.ID = f.ID
					r.Columns, r.Parts, r.leaves = f.Columns, f.Parts, f.leaves
				} else {
					r.ID = base.NextFragmentID
					base.NextFragmentID++
				}
				out = append(out, r)
			}
		}
		if len(byOld) > 0 {
			return nil, fragmentChanged{&errs.Error{Code: errs.CodeConcurrentModification, Message: fmt.Sprintf("%s: fragments changed by a concurrent commit; retry", operation)}}
		}
		base.Operation = operation
		base.Fragments = out
		return base, nil
	}
}

// RestoreOp makes a new version with the content of an older one.
func RestoreOp(old *Manifest) Op {
	return func(base *Manifest) (*Manifest, error) {
		base.Operation = fmt.Sprintf("restore(%d)", old.Version)
		base.Schema = old.Schema
		base.Fragments = append([]Fragment(nil), old.Fragments...)
		base.carry = old.carry.restoredOver(base.carry)
		base.Properties = old.clone().Properties
		return base, nil
	}
}
