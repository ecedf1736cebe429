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
)

// Branches are lines of versions of a table besides main, in the Lance
// layout: branch b keeps its manifests under tree/{b}/_versions/ (same
// naming schemes as main's _versions/) and its record under
// _refs/branches/{b}.json. A branch starts from a source ref (main or
// another branch, at a version: the latest by default): its first
// manifest is a copy of the source version's, under the same version
// number, and its later commits number on from there, put-if-not-exists
// like main's. Data files are shared: every line writes into the table's
// data/ folder, and a manifest lists every fragment of its version, so a
// branch's versions never depend on the source's manifests staying (the
// source's versions may be deleted, cleanup keeps every file any line
// references). Writes on a branch change no other line; commit hooks
// (auto-refresh) fire for main only.
//
// A Table handle is on one line (Table.Branch); OnBranch returns a handle
// on another. Tags stay table-wide in _refs/tags/ and record the branch
// of the version they name.

const (
	branchTreeDir = "tree/"
	branchRefsDir = "_refs/branches/"
	// MainBranch is the name that stands for the main line in requests.
	MainBranch = "main"
)

// BranchInfo is a branch's record: where it started.
type BranchInfo struct {
	// ParentBranch is the branch it was created from ("": main).
	ParentBranch string `json:"parent_branch,omitempty"`
	// ParentVersion is the version of the parent it was created from.
	ParentVersion uint64 `json:"parent_version"`
	// CreateAt is the creation time, Unix seconds.
	CreateAt int64 `json:"create_at"`
	// ManifestSize is the size of the branch's first manifest.
	ManifestSize int64 `json:"manifest_size"`
	// ID tells a branch apart from an earlier one of the same name
	// (deleted, then created again): a UUID set at creation.
	ID string `json:"id,omitempty"`
}

// MaxBranchName bounds a branch name, in bytes.
const MaxBranchName = 200

// ValidateBranch checks a branch name: the rules of tag names (1-200
// letters, digits, '.', '_' and '-', not starting with '.', no ".."), and
// not "main", which names the main line.
func ValidateBranch(name string) error {
	if err := validateRefName("branch", name, MaxBranchName); err != nil {
		return err
	}
	if name == MainBranch {
		return errs.Errorf(errs.CodeInvalidInput, "branch %q: names the main line", name)
	}
	return nil
}

// Branch is the line the handle is on ("": main).
func (t *Table) Branch() string { return t.branch }

// Main returns a handle on the table's main line.
func (t *Table) Main() *Table {
	m := *t
	m.branch = ""
	return &m
}

// versionsKey is the folder of the handle's manifests.
func (t *Table) versionsKey() string {
	if t.branch == "" {
		return t.key + versionsDir
	}
	return t.key + branchTreeDir + t.branch + "/" + versionsDir
}

// ManifestPath is the path of a version file relative to the table folder.
func (t *Table) ManifestPath(vf VersionFile) string {
	return strings.TrimPrefix(t.versionsKey(), t.key) + vf.Name
}

func (t *Table) branchRefKey(name string) string { return t.key + branchRefsDir + name + ".json" }

// noVersions is the error for a line without versions.
func (t *Table) noVersions() error {
	if t.branch == "" {
		return errs.Errorf(errs.CodeTableNotFound, "table %s not found", JoinID(t.id))
	}
	return errs.Errorf(errs.CodeTableBranchNotFound, "table %s has no branch %q (deleted, or its creation was interrupted)", JoinID(t.id), t.branch)
}

// notify runs the catalog's commit hook for a commit on main; commits on
// a branch are not the table's (views refresh from main unless told), and
// only extend the branch's own indexes (branch_line.go).
func (t *Table) notify(ctx context.Context, m *Manifest) { t.c.committedOn(ctx, t, m) }

// OnBranch returns a handle on branch name of the table; "" and "main"
// are main. An unknown branch is errs.CodeTableBranchNotFound.
func (t *Table) OnBranch(ctx context.Context, name string) (*Table, error) {
	if name == "" || name == MainBranch {
		return t.Main(), nil
	}
	if _, err := t.BranchInfo(ctx, name); err != nil {
		return nil, err
	}
	b := *t
	b.branch = name
	return &b, nil
}

// BranchInfo returns the record of branch name.
func (t *Table) BranchInfo(ctx context.Context, name string) (BranchInfo, error) {
	if err := ValidateBranch(name); err != nil {
		return BranchInfo{}, err
	}
	raw, err := t.c.wh.Read(ctx, t.branchRefKey(name))
	if errors.Is(err, os.ErrNotExist) {
		return BranchInfo{}, errs.Errorf(errs.CodeTableBranchNotFound, "table %s has no branch %q", JoinID(t.id), name)
	}
	if err != nil {
		return BranchInfo{}, err
	}
	var bi BranchInfo
	if err := json.Unmarshal(raw, &bi); err != nil {
		return BranchInfo{}, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("branch %q of %s is corrupt", name, JoinID(t.id)), Err: err}
	}
	return bi, nil
}

// Branches returns every branch of the table by name.
func (t *Table) Branches(ctx context.Context) (map[string]BranchInfo, error) {
	return readRefs(ctx, t, branchRefsDir, ValidateBranch, t.BranchInfo, errs.CodeTableBranchNotFound)
}

// BranchNames returns the branch names, sorted.
func BranchNames(bs map[string]BranchInfo) []string {
	names := make([]string, 0, len(bs))
	for n := range bs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CreateBranch creates branch name from version fromVersion (0: the
// latest) of branch fromBranch ("" or "main": main). An existing branch
// is errs.CodeTableBranchAlreadyExists, an unknown source branch
// errs.CodeTableBranchNotFound, an unknown version errs.CodeTableVersionNotFound.
// The record is claimed first (put-if-not-exists: of two concurrent
// creates exactly one wins), then the first manifest is written; a create
// killed between the two leaves a branch without versions, which reads as
// not found and which delete removes.
func (t *Table) CreateBranch(ctx context.Context, name, fromBranch string, fromVersion uint64) (BranchInfo, error) {
	if err := ValidateBranch(name); err != nil {
		return BranchInfo{}, err
	}
	src, err := t.OnBranch(ctx, fromBranch)
	if err != nil {
		return BranchInfo{}, err
	}
	m, err := src.Load(ctx, fromVersion)
	if err != nil {
		return BranchInfo{}, err
	}
	data, err := m.Encode()
	if err != nil {
		return BranchInfo{}, err
	}
	bi := BranchInfo{ParentBranch: src.branch, ParentVersion: m.Version, CreateAt: time.Now().Unix(), ManifestSize: int64(len(data)), ID: newIdentity()}
	ref, _ := json.Marshal(bi)
	err = t.c.wh.PutIfNotExists(ctx, t.branchRefKey(name), ref)
	if errors.Is(err, ErrExists) {
		return BranchInfo{}, errs.Errorf(errs.CodeTableBranchAlreadyExists, "table %s already has a branch %q", JoinID(t.id), name)
	}
	if err != nil {
		return BranchInfo{}, err
	}
	b := *t
	b.branch = name
	// Manifests a commit racing an earlier delete of a branch of this name
	// may have left must not become versions of the new one.
	if err := t.c.wh.DeletePrefix(ctx, b.key+branchTreeDir+name+"/"); err != nil {
		return BranchInfo{}, err
	}
	if err := t.c.wh.PutIfNotExists(ctx, b.versionsKey()+ManifestName(m.Version, NamingV2), data); err != nil {
		return BranchInfo{}, fmt.Errorf("create branch %q of %s: %w", name, JoinID(t.id), err)
	}
	// A move that walked the folder before this create: take it back.
	if err := t.guardMove(ctx, func(ctx context.Context) error {
		if err := t.c.wh.DeletePrefix(ctx, b.key+branchTreeDir+name+"/"); err != nil {
			return err
		}
		return ignoreMissing(t.c.wh.Delete(ctx, t.branchRefKey(name)))
	}); err != nil {
		return BranchInfo{}, err
	}
	return bi, nil
}

// DeleteBranch removes branch name: its manifests first (it is gone from
// then on), then its record. A branch other branches were created from,
// or one a tag points into, is refused (errs.CodeInvalidInput naming them):
// their records would name a branch that is gone. Data files stay until
// cleanup finds them unreferenced.
func (t *Table) DeleteBranch(ctx context.Context, name string) error {
	if _, err := t.BranchInfo(ctx, name); err != nil {
		return err
	}
	bs, err := t.Branches(ctx)
	if err != nil {
		return err
	}
	var children []string
	for _, n := range BranchNames(bs) {
		if bs[n].ParentBranch == name {
			children = append(children, n)
		}
	}
	if len(children) > 0 {
		return errs.Errorf(errs.CodeInvalidInput, "name: branch %q of %s has branches created from it (%s); delete them first", name, JoinID(t.id), strings.Join(children, ", "))
	}
	tags, err := t.Tags(ctx)
	if err != nil {
		return err
	}
	var tagged []string
	for _, n := range TagNames(tags) {
		if tags[n].Branch == name {
			tagged = append(tagged, n)
		}
	}
	if len(tagged) > 0 {
		return errs.Errorf(errs.CodeInvalidInput, "name: branch %q of %s has tagged versions (tags %s); delete the tags first", name, JoinID(t.id), strings.Join(tagged, ", "))
	}
	// A move copies the branch's folder: the deletion holds the table's
	// name as a batch does (claim.go), so a move waits for it and a
	// deletion during a move is a conflict, never a branch deleted here
	// and alive under the new name.
	release, err := t.c.claims().Shared(ctx, newIdentity(), time.Now().Add(t.c.opts.TxnTimeout), []string{t.key})
	if err != nil {
		return err
	}
	defer release()
	if _, err := t.BranchInfo(ctx, name); err != nil {
		return err // deleted meanwhile, or moved with the table
	}
	b := *t
	b.branch = name
	if err := t.c.wh.DeletePrefix(ctx, b.versionsKey()); err != nil {
		return err
	}
	if err := t.c.wh.DeletePrefix(ctx, t.key+branchTreeDir+name+"/"); err != nil {
		return err
	}
	if err := t.c.wh.Delete(ctx, t.branchRefKey(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// branchPaths adds to used the data and deletion files every version of every line
// other than t's references (main, every folder under tree/, with or
// without a record: a half-deleted branch's files are kept until its
// manifests are gone).
func (t *Table) branchPaths(ctx context.Context, used map[string]bool) error {
	lines := []*Table{}
	if t.branch != "" {
		lines = append(lines, t.Main())
	}
	entries, err := t.c.wh.List(ctx, t.key+branchTreeDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir || e.Name == t.branch {
			continue
		}
		b := *t
		b.branch = e.Name
		lines = append(lines, &b)
	}
	for _, l := range lines {
		vs, err := l.Versions(ctx)
		if err != nil {
			return err
		}
		for _, vf := range vs {
			m, err := l.readManifest(ctx, vf)
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted since the listing
			}
			if err != nil {
				return err
			}
			fragmentFiles(m, used)
		}
	}
	return nil
}
