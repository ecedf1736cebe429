package refresh

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/table"
)

// checkHistory fails unless every version of table id references only
// data files that exist.
func (b *bundle) checkHistory(t *testing.T, id []string) {
	t.Helper()
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range vs {
		m, err := tb.Load(b.ctx, vf.Version)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m.Fragments {
			ok, err := b.cat.Warehouse().Exists(b.ctx, tb.Key(f.Path))
			if err != nil || !ok {
				t.Fatalf("%s v%d references %s, which is missing (%v)", table.JoinID(id), vf.Version, f.Path, err)
			}
		}
	}
}

// TestViewRecreatedDuringRefresh: a view dropped and created again while
// a refresh of it runs does not receive that refresh's rows: items run
// after the drop refuse to write, and the commit fails, not retryable,
// even once the new view has moved on.
func TestViewRecreatedDuringRefresh(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.source(t, frag0, frag1)
	id := b.chunkerView(t, "chunks")
	p := b.plan(t, id, "job-old", Options{SourceTaskSize: 2})
	if p.ViewUUID == "" || p.SourceUUID == "" || len(p.Items) < 2 {
		t.Fatalf("plan %+v", p)
	}
	results := b.expandAll(t, p)

	if err := b.cat.DropTable(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.chunkerView(t, "chunks")
	replaced := func(what string, err error) {
		t.Helper()
		if errs.CodeOf(err) != errs.CodeTableNotFound || !strings.Contains(err.Error(), "dropped and created again") {
			t.Fatalf("%s: %v, want the view-replaced error", what, err)
		}
	}
	// An item run after the drop, by another process: nothing staged.
	other := NewEngine(b.cat)
	_, err := other.Expand(b.ctx, p, 1)
	replaced("expand after re-creation", err)
	if n := b.stagedFiles(t, id, p.JobID); n != 0 {
		t.Fatalf("%d staged files of the old job in the new view", n)
	}
	// The commit, by the process that ran the items and by another.
	_, err = b.e.Commit(b.ctx, p, results)
	replaced("commit after re-creation", err)
	_, err = other.Commit(b.ctx, p, results)
	replaced("commit by another process", err)
	if m := b.manifest(t, id); m.Version != 1 || len(m.Fragments) != 0 {
		t.Fatalf("new view moved to v%d with %d fragments", m.Version, len(m.Fragments))
	}

	// The new view refreshes normally; the old job still cannot commit,
	// and says why rather than reporting a retryable conflict.
	_, res := b.refresh(t, id, "job-new", Options{})
	eqResult(t, res, Result{Mode: ModeFull, SourceVersion: 2, ViewVersion: 2, RowsAdded: 7})
	_, err = b.e.Commit(b.ctx, p, results)
	replaced("commit after the new view moved on", err)
	b.checkHistory(t, id)
	eqRows(t, "new view", b.rows(t, id), []string{
		"0:0|0|1|aaaa", "0:0|1|1|bbbb", "0:0|2|1|cc", "0:1|0|2|dddd", "1:0|0|5|eeee", "1:0|1|5|ffff", "1:1|0|6|g"})
}

// stagedFiles counts a job's staged files in view id's folder.
func (b *bundle) stagedFiles(t *testing.T, id []string, job string) int {
	t.Helper()
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := b.cat.Warehouse().List(b.ctx, tb.Key(stagingPrefix(job)))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// manifestPath is the file of version v of table id on the file://
// warehouse.
func (b *bundle) manifestPath(t *testing.T, id []string, v uint64) string {
	t.Helper()
	testenv.SkipUnlessFile(t)
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(strings.TrimPrefix(tb.Location(), "file://"), "_versions", table.ManifestName(v, table.NamingV2))
}

// rewriteManifests applies fn to every manifest of table id in place.
func (b *bundle) rewriteManifests(t *testing.T, id []string, fn func(m map[string]any)) {
	t.Helper()
	tb, err := b.cat.OpenTable(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range vs {
		p := b.manifestPath(t, id, vf.Version)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		fn(m)
		if data, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// corrupt replaces a file with torn JSON and returns the function that
// puts it back.
func corrupt(t *testing.T, path string) func() {
	t.Helper()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, orig[:len(orig)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// retryable is the orchestrator's rule (jobs.permanent): uncoded errors
// and internal, unavailable and conflict codes are retried.
func retryable(err error) bool {
	var te *errs.Error
	if !errors.As(err, &te) {
		return true
	}
	switch te.Code {
	case errs.CodeInternal, errs.CodeServiceUnavailable, errs.CodeConcurrentModification:
		return true
	}
	return false
}

// TestLegacyIdentities: a source and a watermark from before identities
// were stored keep incremental refreshes incremental; a legacy source
// whose version 1 cannot be read fails the plan, retryable, instead of
// turning it into a full recompute.
func TestLegacyIdentities(t *testing.T) {
	t.Parallel()
	// Tables from before identities were JSON manifests.
	b := setup(t, table.Options{Format: table.FormatParquet})
	src := b.source(t, frag0)
	b.rewriteManifests(t, srcID, func(m map[string]any) { delete(m, "uuid") })
	id := b.create(t, "en", CreateRequest{Kind: "query", SourceQuery: queryView})
	b.refresh(t, id, "j1", Options{})
	// The view's watermark as older versions wrote it.
	v1, err := src.Load(b.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.rewriteManifests(t, id, func(m map[string]any) {
		props, _ := m["properties"].(map[string]any)
		if w, ok := props[propWatermark].(map[string]any); ok {
			if w["source_uuid"] != table.LegacyIdentity(v1.TimestampMillis) {
				t.Fatalf("watermark source_uuid %v", w["source_uuid"])
			}
			delete(w, "source_uuid")
			w["source_created_millis"] = v1.TimestampMillis
		}
	})
	b.insert(t, src, frag1...)

	restore := corrupt(t, b.manifestPath(t, srcID, 1))
	_, err = b.e.Plan(b.ctx, id, "j2", Options{})
	if err == nil || !retryable(err) || errs.CodeOf(err) != errs.CodeServiceUnavailable {
		t.Fatalf("plan with the source's version 1 unreadable: %v (code %d), want a retryable failure", err, errs.CodeOf(err))
	}
	restore()
	p, res := b.refresh(t, id, "j2", Options{})
	if p.Mode != ModeIncremental {
		t.Fatalf("legacy source and watermark planned %s (%s)", p.Mode, p.Reason)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 2, ViewVersion: 3, RowsAdded: 2})
}

// TestStateReadErrorsAreRetryable: a manifest of the view or the source
// that cannot be decoded fails plan, expand and commit with a retryable
// error; once it reads again the refresh goes on, incremental.
func TestStateReadErrorsAreRetryable(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	src := b.source(t, frag0)
	id := b.chunkerView(t, "chunks")
	b.refresh(t, id, "j1", Options{})
	b.insert(t, src, frag1...)
	wantRetryable := func(what string, err error) {
		t.Helper()
		if err == nil || !retryable(err) {
			t.Fatalf("%s: %v (code %d), want a retryable failure", what, err, errs.CodeOf(err))
		}
	}
	for _, f := range []struct {
		what string
		path string
	}{
		{"source latest", b.manifestPath(t, srcID, 2)},
		{"view latest", b.manifestPath(t, id, 2)},
	} {
		restore := corrupt(t, f.path)
		_, err := b.e.Plan(b.ctx, id, "j2", Options{})
		wantRetryable("plan with "+f.what+" corrupt", err)
		restore()
	}
	p := b.plan(t, id, "j2", Options{})
	if p.Mode != ModeIncremental {
		t.Fatalf("plan %+v", p)
	}
	restore := corrupt(t, b.manifestPath(t, srcID, 2))
	_, err := NewEngine(b.cat).Expand(b.ctx, p, 0)
	wantRetryable("expand with the source corrupt", err)
	restore()
	results := b.expandAll(t, p)
	restore = corrupt(t, b.manifestPath(t, id, 2))
	_, err = b.e.Commit(b.ctx, p, results)
	wantRetryable("commit with the view corrupt", err)
	restore()
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	eqResult(t, res, Result{Mode: ModeIncremental, SourceVersion: 2, ViewVersion: 3, RowsAdded: 3})
}
