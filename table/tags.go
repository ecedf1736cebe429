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

// Tags name versions of a table. A tag is a file _refs/tags/{tag}.json in
// the table folder (the Lance layout), holding the version and its
// manifest size. A tagged version is never deleted (DeleteVersions refuses
// it) and its data files are referenced like any version's, so cleanup
// keeps them.

const tagsDir = "_refs/tags/"

// Tag is what a tag points at.
type Tag struct {
	Version      uint64 `json:"version"`
	ManifestSize int64  `json:"manifestSize"`
	// Branch is the branch the version is on ("": main).
	Branch string `json:"branch,omitempty"`
}

// MaxTagName bounds a tag name, in bytes.
const MaxTagName = 200

// ValidateTag checks a tag name: 1-200 characters of letters, digits,
// '.', '_' and '-', not starting with '.' and without "..".
func ValidateTag(tag string) error { return validateRefName("tag", tag, MaxTagName) }

// validateRefName checks the name of a tag or branch (kind names it in the
// error): 1-max bytes of letters, digits, '.', '_' and '-', not starting
// with '.' and without "..", so it is one safe path segment.
func validateRefName(kind, name string, max int) error {
	if name == "" {
		return errs.Errorf(errs.CodeInvalidInput, "%s: required", kind)
	}
	if len(name) > max {
		return errs.Errorf(errs.CodeInvalidInput, "%s: longer than %d bytes", kind, max)
	}
	if name[0] == '.' || strings.Contains(name, "..") {
		return errs.Errorf(errs.CodeInvalidInput, "%s %q: may not start with '.' or contain \"..\"", kind, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errs.Errorf(errs.CodeInvalidInput, "%s %q: only letters, digits, '.', '_' and '-' are allowed", kind, name)
		}
	}
	return nil
}

func (t *Table) tagKey(tag string) string { return t.key + tagsDir + tag + ".json" }

// Tags returns every tag of the table.
func (t *Table) Tags(ctx context.Context) (map[string]Tag, error) {
	return readRefs(ctx, t, tagsDir, nil, t.TagVersion, errs.CodeTableTagNotFound)
}

// readRefs reads every ref (tag or branch record) named {name}.json in dir
// of the table, skipping names valid refuses and refs deleted since the
// listing (read answers notFound).
func readRefs[V any](ctx context.Context, t *Table, dir string, valid func(string) error, read func(context.Context, string) (V, error), notFound errs.Code) (map[string]V, error) {
	entries, err := t.c.wh.List(ctx, t.key+dir)
	if err != nil {
		return nil, err
	}
	out := map[string]V{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name, ".json")
		if e.IsDir || !ok || (valid != nil && valid(name) != nil) {
			continue
		}
		v, err := read(ctx, name)
		if errs.CodeOf(err) == notFound {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// TagNames returns the tag names, sorted.
func TagNames(tags map[string]Tag) []string {
	names := make([]string, 0, len(tags))
	for n := range tags {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TagVersion returns what tag points at.
func (t *Table) TagVersion(ctx context.Context, tag string) (Tag, error) {
	if err := ValidateTag(tag); err != nil {
		return Tag{}, err
	}
	b, err := t.c.wh.Read(ctx, t.tagKey(tag))
	if errors.Is(err, os.ErrNotExist) {
		return Tag{}, errs.Errorf(errs.CodeTableTagNotFound, "table %s has no tag %q", JoinID(t.id), tag)
	}
	if err != nil {
		return Tag{}, err
	}
	var tg Tag
	if err := json.Unmarshal(b, &tg); err != nil {
		return Tag{}, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("tag %q of %s is corrupt", tag, JoinID(t.id)), Err: err}
	}
	return tg, nil
}

func (t *Table) tagOf(ctx context.Context, v uint64) (Tag, VersionFile, error) {
	vf, err := t.Version(ctx, v)
	if err != nil {
		return Tag{}, vf, err
	}
	return Tag{Version: v, ManifestSize: vf.Size, Branch: t.branch}, vf, nil
}

// CreateTag points a new tag at version v; an existing tag is a conflict,
// and so is a version deleted meanwhile (tagguard.go).
func (t *Table) CreateTag(ctx context.Context, tag string, v uint64) error {
	if err := ValidateTag(tag); err != nil {
		return err
	}
	tg, vf, err := t.tagOf(ctx, v)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(tg)
	err = t.c.wh.PutIfNotExists(ctx, t.tagKey(tag), b)
	if errors.Is(err, ErrExists) {
		return errs.Errorf(errs.CodeTableTagAlreadyExists, "table %s already has a tag %q", JoinID(t.id), tag)
	}
	if err != nil {
		return err
	}
	undo := func(ctx context.Context) error {
		return ignoreMissing(t.c.wh.Delete(ctx, t.tagKey(tag)))
	}
	if err := t.confirmTag(ctx, tag, vf, undo); err != nil {
		return err
	}
	return t.guardMove(ctx, undo) // seal.go
}

// UpdateTag points an existing tag at version v; a version deleted
// meanwhile is a conflict and leaves the tag as it was.
func (t *Table) UpdateTag(ctx context.Context, tag string, v uint64) error {
	if _, err := t.TagVersion(ctx, tag); err != nil {
		return err
	}
	old, err := t.c.wh.Read(ctx, t.tagKey(tag))
	if errors.Is(err, os.ErrNotExist) {
		return errs.Errorf(errs.CodeTableTagNotFound, "table %s has no tag %q", JoinID(t.id), tag)
	}
	if err != nil {
		return err
	}
	tg, vf, err := t.tagOf(ctx, v)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(tg)
	if err := t.c.wh.Write(ctx, t.tagKey(tag), b); err != nil {
		return err
	}
	undo := func(ctx context.Context) error {
		return t.c.wh.Write(ctx, t.tagKey(tag), old)
	}
	if err := t.confirmTag(ctx, tag, vf, undo); err != nil {
		return err
	}
	return t.guardMove(ctx, undo) // seal.go: a move may have copied the old tag
}

// DeleteTag removes a tag (not its version). During a move of the table
// the tag is put back and the delete answers the move's conflict (the
// move may have copied it already; apply the delete under the new name).
func (t *Table) DeleteTag(ctx context.Context, tag string) error {
	if _, err := t.TagVersion(ctx, tag); err != nil {
		return err
	}
	old, err := t.c.wh.Read(ctx, t.tagKey(tag))
	if errors.Is(err, os.ErrNotExist) {
		return errs.Errorf(errs.CodeTableTagNotFound, "table %s has no tag %q", JoinID(t.id), tag)
	}
	if err != nil {
		return err
	}
	if err := t.c.wh.Delete(ctx, t.tagKey(tag)); err != nil {
		return err
	}
	return t.guardMove(ctx, func(ctx context.Context) error {
		return t.c.wh.Write(ctx, t.tagKey(tag), old)
	})
}

// VersionRange is a range of versions, start inclusive, end exclusive;
// End -1 is through the latest.
type VersionRange struct {
	Start int64
	End   int64
}

// DeleteVersions removes the manifests of the versions in ranges and
// returns how many it removed; their data files stay until cleanup finds
// them unreferenced. The latest version, a tagged version, and version 1
// of a table created before identities were stored (it carries the
// identity) are never removed: a range that covers one is refused whole.
func (t *Table) DeleteVersions(ctx context.Context, ranges []VersionRange) (int64, error) {
	doomed, err := t.planDelete(ctx, ranges)
	if err != nil {
		return 0, err
	}
	// Announced first, so a tag written meanwhile gives way or stops it
	// (tagguard.go).
	done, deadline, err := t.announceDelete(ctx, doomed)
	if err != nil {
		return 0, err
	}
	defer done()
	if testHookDeleteAnnounced != nil {
		testHookDeleteAnnounced()
	}
	if time.Now().After(deadline) {
		return 0, errs.Errorf(errs.CodeServiceUnavailable, "deleting versions of %s: not started before its deadline (%s); nothing deleted", JoinID(t.id), t.c.opts.TxnTimeout)
	}
	var n int64
	for _, vf := range doomed {
		if err := t.c.wh.Delete(ctx, t.versionsKey()+vf.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// planDelete is the versions DeleteVersions removes for ranges, each once,
// or why it refuses.
func (t *Table) planDelete(ctx context.Context, ranges []VersionRange) ([]VersionFile, error) {
	vs, err := t.Versions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, errs.Errorf(errs.CodeTableNotFound, "table %s not found", JoinID(t.id))
	}
	latest := vs[len(vs)-1]
	tags, err := t.Tags(ctx)
	if err != nil {
		return nil, err
	}
	tagged := map[uint64]string{}
	for _, n := range TagNames(tags) {
		if tags[n].Branch != t.branch {
			continue // a tag of another branch's version of that number
		}
		if _, ok := tagged[tags[n].Version]; !ok {
			tagged[tags[n].Version] = n
		}
	}
	lm, err := t.readManifest(ctx, latest)
	if err != nil {
		return nil, err
	}
	var doomed []VersionFile
	for i, r := range ranges {
		if r.Start < 0 || r.End < -1 || (r.End != -1 && r.End < r.Start) {
			return nil, errs.Errorf(errs.CodeInvalidInput, "ranges[%d]: want 0 <= start_version <= end_version, or end_version -1 (got %d, %d)", i, r.Start, r.End)
		}
		for _, vf := range vs {
			if vf.Version < uint64(r.Start) || (r.End != -1 && vf.Version >= uint64(r.End)) {
				continue
			}
			switch {
			case vf.Version == latest.Version:
				return nil, errs.Errorf(errs.CodeInvalidInput, "ranges[%d]: version %d is the latest; a table keeps its latest version (drop the table instead)", i, vf.Version)
			case tagged[vf.Version] != "":
				return nil, errs.Errorf(errs.CodeInvalidInput, "ranges[%d]: version %d is tagged %q; delete the tag first", i, vf.Version, tagged[vf.Version])
			case vf.Version == 1 && lm.UUID == "" && t.branch == "":
				return nil, errs.Errorf(errs.CodeInvalidInput, "ranges[%d]: version 1 carries the identity of this table (created before identities were stored in every version)", i)
			}
			doomed = append(doomed, vf)
		}
	}
	seen := map[uint64]bool{}
	out := doomed[:0]
	for _, vf := range doomed {
		if !seen[vf.Version] {
			seen[vf.Version] = true
			out = append(out, vf)
		}
	}
	return out, nil
}
