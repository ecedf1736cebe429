package refresh

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// runtimeBundleWith is setup with an engine that knows the runtimes of doc.
func runtimeBundleWith(t *testing.T, doc string) *bundle {
	t.Helper()
	b := setup(t, table.Options{})
	b.e = NewEngineWith(b.cat, EngineOptions{Runtimes: parseRuntimes(t, doc)})
	t.Cleanup(func() { b.e.Close() })
	return b
}

func parseRuntimes(t *testing.T, doc string) *udf.Registry {
	t.Helper()
	dir, _ := filepath.Abs(".")
	reg, err := udf.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestManifestEnvAndOverridesRefused: a manifest's env_vars hold only
// names the runtime allows and its overrides only lower the runtime's
// settings, on every path a manifest comes in by: a refresh's manifest, a
// view's stored one, a virtual column's and a backfill's. Each refusal is
// CodeInvalidInput naming the field.
func TestManifestEnvAndOverridesRefused(t *testing.T) {
	b := runtimeBundleWith(t, wordsRuntimes+shoutRuntimes[len("\nruntimes:"):])
	b.source(t, frag0)
	q := `SELECT lang, body FROM "docs$articles"`
	create := func(name, manifest string) error {
		_, err := b.e.CreateView(b.ctx, []string{"docs", name}, CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", manifest, "", "")})
		return err
	}
	for _, tc := range []struct{ manifest, want string }{
		{`{"env_vars": {"LD_PRELOAD": "/tmp/evil.so"}}`, "udtf_spec.manifest.env_vars.LD_PRELOAD: LD_PRELOAD is never passed to user code"},
		{`{"env_vars": {"PYTHONWARNINGS": "ignore::antigravity.x::0", "BROWSER": "sh -c id #%s"}}`, "udtf_spec.manifest.env_vars.BROWSER: "},
		{`{"env_vars": {"NOT_LISTED": "x"}}`, "udtf_spec.manifest.env_vars.NOT_LISTED: runtime words does not allow it"},
		{`{"mvq": {"timeout": "8760h"}}`, "udtf_spec.manifest.mvq.timeout: must be a positive duration of at most 24h"},
		{`{"mvq": {"timeout": "31s"}}`, "udtf_spec.manifest.mvq.timeout: 31s is above the timeout of runtime words (30s)"},
	} {
		wantErr(t, create("v", tc.manifest), errs.CodeInvalidInput, tc.want)
	}
	id := b.create(t, "v", CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", `{"env_vars": {"TAG": "ok"}}`, "", "")})
	for _, tc := range []struct{ manifest, want string }{
		{`{"env_vars": {"PYTHONWARNINGS": "ignore::antigravity.x::0", "BROWSER": "sh -c id #%s"}}`, "manifest.env_vars.BROWSER: "},
		{`{"env_vars": {"BASH_ENV": "/tmp/x"}}`, "manifest.env_vars.BASH_ENV: "},
		{`{"env_vars": {"TAG": "a\nb"}}`, "manifest.env_vars.TAG: value holds a NUL or line break"},
		{`{"mvq": {"max_in_flight": 1024}}`, "manifest.mvq.max_in_flight: 1024 is above the max_in_flight of runtime words (4)"},
		{`{"mvq": {"max_batch_rows": 3}}`, "manifest.mvq.max_batch_rows: 3 is above"},
		{`{"mvq": {"model": "theirs"}}`, `manifest.mvq.model: "theirs" is not a model of runtime words`},
		{`{"mvq": {"runtime": "shout", "env_vars": {}}}`, `manifest: unknown field`},
		{`{"mvq": {"runtime": "shout"}, "env_vars": {"TAG": "x"}}`, "manifest.env_vars.TAG: runtime shout does not allow it"},
	} {
		o := Options{Manifest: tc.manifest}
		wantErr(t, b.e.Prepare(b.ctx, id, &o), errs.CodeInvalidInput, tc.want)
	}
	ok := Options{Manifest: `{"env_vars": {"TAG": "fine"}, "mvq": {"timeout": "5s", "max_batch_rows": 1}}`}
	if err := b.e.Prepare(b.ctx, id, &ok); err != nil {
		t.Fatal(err)
	}

	_, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{shoutColumn("1", `{"env_vars": {"LD_PRELOAD": "/tmp/evil.so"}}`)})
	wantErr(t, err, errs.CodeInvalidInput, "new_columns[0].virtual_column.manifest.env_vars.LD_PRELOAD: ")
	_, _, err = b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{shoutColumn("1", `{"mvq": {"timeout": "1h"}}`)})
	wantErr(t, err, errs.CodeInvalidInput, "new_columns[0].virtual_column.manifest.mvq.timeout: 1h0m0s is above")
	if _, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{shoutColumn("1", `{"env_vars": {"SUFFIX": "!"}}`)}); err != nil {
		t.Fatal(err)
	}
	bf := Options{Manifest: `{"env_vars": {"PYTHONPATH": "/tmp"}}`, Backfill: &BackfillOptions{Column: "loud"}}
	wantErr(t, b.e.Prepare(b.ctx, srcID, &bf), errs.CodeInvalidInput, "manifest.env_vars.PYTHONPATH: ")
	bf = Options{Manifest: `{"env_vars": {"TAG": "x"}}`, Backfill: &BackfillOptions{Column: "loud"}}
	wantErr(t, b.e.Prepare(b.ctx, srcID, &bf), errs.CodeInvalidInput, "column shout: manifest.env_vars.TAG: runtime shout does not allow it")
}

// TestManifestCheckedAgainWhenItRuns: a stored manifest accepted under
// one runtimes file is checked against the workers' file when the job
// runs: a name the operator no longer allows fails the job.
func TestManifestCheckedAgainWhenItRuns(t *testing.T) {
	b := runtimeBundle(t)
	b.source(t, frag0)
	id := b.create(t, "v", CreateRequest{Kind: "udtf", SourceQuery: `SELECT lang, body FROM "docs$articles"`, OutputSchema: wordsSchemaB64,
		UDTFSpec: runtimeEntry(t, "words", `{"env_vars": {"TAG": "stored"}}`, "", "")})
	p := b.plan(t, id, "j1", Options{})
	stricter := strings.Replace(wordsRuntimes, "    allowed_env: [TAG]\n", "", 1)
	worker := NewEngineWith(b.cat, EngineOptions{Runtimes: parseRuntimes(t, stricter)})
	defer worker.Close()
	_, err := worker.Expand(b.ctx, p, 0)
	wantCoded(t, err, errs.CodeInvalidInput, "udtf_spec.manifest.env_vars.TAG: runtime words does not allow it")
}

// TestRuntimeTimeoutIsAUserError: a runtime that does not answer within
// its timeout fails the item with a message naming the runtime and the
// timeout, coded so that the orchestrator does not run the item again
// (not CodeInternal, which it retries and shows as "internal error").
func TestRuntimeTimeoutIsAUserError(t *testing.T) {
	b := runtimeBundleWith(t, `
runtimes:
  slow:
    kind: exec
    command: ["python3", "testdata/words.py"]
    protocol: ndjson
    timeout: 3s
`)
	src := b.source(t, frag0)
	b.insert(t, src, article{9, "Iota", "de", "hang"})
	id := b.create(t, "v", CreateRequest{Kind: "udtf", SourceQuery: `SELECT lang, body FROM "docs$articles"`, OutputSchema: wordsSchemaB64,
		UDTFSpec: runtimeEntry(t, "slow", "", "", "")})
	p := b.plan(t, id, "j1", Options{})
	start := time.Now()
	_, err := b.e.Expand(b.ctx, p, 0)
	wantCoded(t, err, errs.CodeInvalidInput, "runtime slow: no answer within the timeout of 3s")
	if el := time.Since(start); el > 60*time.Second {
		t.Fatalf("took %s", el)
	}
}

// wantCoded: err carries code and its message contains want.
func wantCoded(t *testing.T, err error, code errs.Code, want string) {
	t.Helper()
	if err == nil || errs.CodeOf(err) != code || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v (code %d), want code %d containing %q", err, errs.CodeOf(err), code, want)
	}
}
