package refresh

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

const wordsRuntimes = `
runtimes:
  words:
    kind: exec
    command: ["python3", "testdata/words.py"]
    protocol: ndjson
    timeout: 30s
    max_batch_rows: 2
    allowed_env: [TAG]
`

// runtimeBundle is setup with an engine that knows the test runtimes.
func runtimeBundle(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, table.Options{})
	dir, _ := filepath.Abs(".")
	reg, err := udf.Parse([]byte(wordsRuntimes), dir)
	if err != nil {
		t.Fatal(err)
	}
	b.e = NewEngineWith(b.cat, EngineOptions{Runtimes: reg})
	t.Cleanup(func() { b.e.Close() })
	return b
}

func runtimeEntry(t *testing.T, runtime, manifest string, partitionBy string, onError string) *UDTFEntry {
	doc := `{"runtime": "` + runtime + `"}`
	sum := sha256.Sum256([]byte(doc))
	u := &UDTFEntry{Kind: "udtf", UDTF: base64.StdEncoding.EncodeToString([]byte(doc)), UDTFSha: hex.EncodeToString(sum[:]), UDTFName: "words", UDTFVersion: "1"}
	if manifest != "" {
		u.Manifest = &manifest
	}
	if partitionBy != "" {
		u.PartitionBy = &partitionBy
	}
	if onError != "" {
		u.ErrorHandling = json.RawMessage(onError)
	}
	return u
}

var wordsSchemaB64 = func() string {
	s, err := table.EncodeSchema(arrow.NewSchema([]arrow.Field{
		{Name: "lang", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "word", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tag", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	if err != nil {
		panic(err)
	}
	return s
}()

func TestRuntimeUDTFViewAndManifestOverride(t *testing.T) {
	b := runtimeBundle(t)
	src := b.source(t, frag0, frag1)
	stored := `{"name": "words", "env_vars": {"TAG": "stored"}, "pip": ["nltk"]}`
	id := b.create(t, "words", CreateRequest{Kind: "udtf", SourceQuery: `SELECT lang, body FROM "docs$articles" WHERE id <= 2 OR id = 5`,
		OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", stored, "lang", "")})

	p, res := b.refresh(t, id, "j1", Options{})
	if p.Mode != ModeFull || len(p.Options.ManifestNotHonoured) != 1 || p.Options.ManifestNotHonoured[0] != "pip" {
		t.Fatalf("plan %+v", p)
	}
	if res.ManifestChecksum != ManifestChecksum(stored) || res.RowsAdded != 3 {
		t.Fatalf("result %+v", res)
	}
	// Partitions in order of first appearance (en, fr), rows in source order.
	eqRows(t, "view", b.rows(t, id), []string{"en|aaaabbbbcc|stored", "en|eeeeffff|stored", "fr|dddd|stored"})
	if m := b.manifest(t, id); m.Metadata[metaManifestChecksum] != ManifestChecksum(stored) {
		t.Fatalf("version metadata %v", m.Metadata)
	}

	// Unchanged source: no_op.
	if p := b.plan(t, id, "j2", Options{}); p.Mode != ModeNoOp {
		t.Fatalf("plan %+v", p)
	}

	// An inline manifest replaces the stored one for this refresh only.
	b.insert(t, src, article{7, "Eta", "en", "x y"})
	once := `{"env_vars": {"TAG": "once"}, "mvq": {"max_batch_rows": 1}}`
	_, res = b.refresh(t, id, "j3", Options{Manifest: once})
	if res.ManifestChecksum != ManifestChecksum(once) {
		t.Fatalf("result %+v", res)
	}
	eqRows(t, "view with the override", b.rows(t, id), []string{"en|aaaabbbbcc|once", "en|eeeeffff|once", "fr|dddd|once"})
	b.insert(t, src, article{8, "Theta", "en", "z"})
	b.refresh(t, id, "j4", Options{})
	eqRows(t, "view back on the stored manifest", b.rows(t, id), []string{"en|aaaabbbbcc|stored", "en|eeeeffff|stored", "fr|dddd|stored"})
}

func TestRuntimeUDTFErrorHandling(t *testing.T) {
	b := runtimeBundle(t)
	src := b.source(t, frag0, frag1)
	q := `SELECT lang, body FROM "docs$articles" WHERE id IN (1, 2, 9)`
	fail := b.create(t, "fail", CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", "", "lang", "")})
	skip := b.create(t, "skip", CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", "", "lang", `{"mode": "skip"}`)})
	retry := b.create(t, "retry", CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", "", "lang", `{"mode": "retry", "retries": 2}`)})
	b.refresh(t, fail, "f1", Options{})
	before := b.rows(t, fail)
	b.insert(t, src, article{9, "Iota", "de", "boom"})

	p := b.plan(t, fail, "f2", Options{})
	_, err := b.e.Expand(b.ctx, p, 0)
	if errs.CodeOf(err) != errs.CodeInvalidInput || !strings.Contains(err.Error(), "runtime words") || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("a crashing udf: %v", err)
	}
	eqRows(t, "a failed refresh leaves the view", b.rows(t, fail), before)

	p = b.plan(t, retry, "r1", Options{})
	if _, err := b.e.Expand(b.ctx, p, 0); errs.CodeOf(err) != errs.CodeInvalidInput {
		t.Fatalf("retry 2 of a partition that always crashes: %v", err)
	}

	_, res := b.refresh(t, skip, "s1", Options{})
	if res.SkippedPartitions != 1 {
		t.Fatalf("result %+v, want one skipped partition", res)
	}
	eqRows(t, "skip keeps the other partitions", b.rows(t, skip), []string{"en|aaaabbbbcc|", "fr|dddd|"})
}

func TestRuntimeAndManifestValidation(t *testing.T) {
	b := runtimeBundle(t)
	b.source(t, frag0)
	q := `SELECT lang, body FROM "docs$articles"`
	create := func(u *UDTFEntry, schema string) error {
		_, err := b.e.CreateView(b.ctx, []string{"docs", "v"}, CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: schema, UDTFSpec: u})
		return err
	}
	wantErr(t, create(runtimeEntry(t, "nope", "", "", ""), wordsSchemaB64), errs.CodeInvalidInput, `udtf_spec.udtf: runtime "nope" is not a runtime`)
	wantErr(t, create(runtimeEntry(t, "words", "", "", ""), ""), errs.CodeInvalidInput, "output_schema: required")
	wantErr(t, create(runtimeEntry(t, "words", "", "nope", ""), wordsSchemaB64), errs.CodeInvalidInput, "udtf_spec.partition_by")
	wantErr(t, create(runtimeEntry(t, "words", "", "", `{"mode": "maybe"}`), wordsSchemaB64), errs.CodeInvalidInput, "udtf_spec.error_handling.mode")
	wantErr(t, create(runtimeEntry(t, "words", `{"colour": "red"}`, "", ""), wordsSchemaB64), errs.CodeInvalidInput, "udtf_spec.manifest: unknown field \"colour\"")
	wantErr(t, create(runtimeEntry(t, "words", `{"env_vars": {"A": 1}}`, "", ""), wordsSchemaB64), errs.CodeInvalidInput, "udtf_spec.manifest: env_vars")
	wantErr(t, create(runtimeEntry(t, "words", `{"mvq": {"runtime": "gpu"}}`, "", ""), wordsSchemaB64), errs.CodeInvalidInput, `udtf_spec.manifest: mvq.runtime "gpu"`)
	u := runtimeEntry(t, "words", `{"name": "n", "version": "1"}`, "", "")
	bad := "00"
	u.ManifestChecksum = &bad
	wantErr(t, create(u, wordsSchemaB64), errs.CodeInvalidInput, "udtf_spec.manifest_checksum")
	// The canonical form: sorted keys, no spaces.
	good := ManifestChecksum(`{"version":"1","name":"n"}`)
	if good != sha256Hex(`{"name":"n","version":"1"}`) {
		t.Fatalf("checksum %s is not of the canonical JSON", good)
	}
	u.ManifestChecksum = &good
	if err := create(u, wordsSchemaB64); err != nil {
		t.Fatal(err)
	}
	id := []string{"docs", "v"}
	for _, tc := range []struct{ manifest, want string }{
		{`{"mvq": {"runtime": "gpu"}}`, `manifest: mvq.runtime "gpu"`},
		{`{"mvq": {"timeout": 5}}`, "manifest: mvq.timeout"},
		{`{"mvq": {"max_batch_rows": -1}}`, "manifest.mvq.max_batch_rows"},
		{`{"image": "x"}`, `manifest: unknown field "image"`},
	} {
		o := Options{Manifest: tc.manifest}
		wantErr(t, b.e.Prepare(b.ctx, id, &o), errs.CodeInvalidInput, tc.want)
	}
}

// A partitioned runtime view gets one work item per partition_by value
// (NULL included), the items expand concurrently, skip counts the
// partitions left out, and the commit holds every other partition's rows.
func TestRuntimeUDTFPartitionItems(t *testing.T) {
	b := runtimeBundle(t)
	src := b.source(t, frag0, frag1)
	b.insert(t, src, article{7, "Eta", "de", "boom"}, article{8, "Theta", "it", "ciao mondo"}, article{9, "Iota", "xx", "nul part"})
	q := `SELECT NULLIF(lang, 'xx') AS lang, body FROM "docs$articles"`
	skip := b.create(t, "skip", CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", "", "lang", `{"mode": "skip"}`)})
	fail := b.create(t, "fail", CreateRequest{Kind: "udtf", SourceQuery: q, OutputSchema: wordsSchemaB64, UDTFSpec: runtimeEntry(t, "words", "", "lang", "")})
	// Values in text order, NULL first: NULL, de, en, fr, it.
	want := []string{"∅|nul|", "∅|part|", "en|aaaabbbbcc|", "en|eeeeffff|", "en|g|", "fr|dddd|", "it|ciao|", "it|mondo|"}

	// expand runs every item of p at once, as workers would.
	expand := func(p *Plan) ([]ItemResult, []error) {
		res, errList := make([]ItemResult, len(p.Items)), make([]error, len(p.Items))
		var wg sync.WaitGroup
		for i := range p.Items {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errList[i] = b.e.Expand(b.ctx, p, i)
			}()
		}
		wg.Wait()
		return res, errList
	}

	p := b.plan(t, skip, "s1", Options{})
	if p.Mode != ModeFull || len(p.Items) != 5 || !strings.Contains(p.Reason, `5 values of partition_by "lang", in 5 work items`) {
		t.Fatalf("plan %+v, want 5 items", p)
	}
	for i, it := range p.Items {
		if it.Index != i || it.Rows != 9 || len(it.Ranges) != 3 {
			t.Fatalf("item %d: %+v, want the whole source", i, it)
		}
	}
	results, errList := expand(p)
	wantWritten := []int64{2, 0, 3, 1, 2}
	for i, r := range results {
		if errList[i] != nil {
			t.Fatalf("item %d: %v", i, errList[i])
		}
		if r.RowsWritten != wantWritten[i] || r.SkippedPartitions != int64(b2i(i == 1)) {
			t.Fatalf("item %d: %+v, want %d rows written", i, r, wantWritten[i])
		}
	}
	res, err := b.e.Commit(b.ctx, p, results)
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedPartitions != 1 || res.RowsAdded != int64(len(want)) {
		t.Fatalf("result %+v, want one skipped partition", res)
	}
	eqRows(t, "partitioned view", b.rows(t, skip), want)
	if p := b.plan(t, skip, "s2", Options{}); p.Mode != ModeNoOp || len(p.Items) != 0 {
		t.Fatalf("plan over the refreshed version %+v, want no_op", p)
	}

	// fail: only the item of the failing partition fails; nothing commits.
	b.refresh(t, fail, "f0", Options{SrcVersion: 1})
	before := b.rows(t, fail)
	p = b.plan(t, fail, "f1", Options{})
	_, errList = expand(p)
	for i, err := range errList {
		if (i == 1) != (err != nil) || i == 1 && errs.CodeOf(err) != errs.CodeInvalidInput {
			t.Fatalf("item %d: %v, want only item 1 (de) to fail", i, err)
		}
	}
	eqRows(t, "a failed refresh leaves the view", b.rows(t, fail), before)

	// Past maxPartitionItems, runs of consecutive values share an item:
	// five values in two items, (NULL, de, en) and (fr, it).
	defer func(n int) { maxPartitionItems = n }(maxPartitionItems)
	maxPartitionItems = 2
	b.insert(t, src, article{10, "Kappa", "fr", "encore"})
	p = b.plan(t, skip, "s3", Options{})
	if len(p.Items) != 2 || !strings.Contains(p.Reason, "more than 2 values") {
		t.Fatalf("plan %+v, want 2 items", p)
	}
	results, errList = expand(p)
	if errors.Join(errList...) != nil || results[0].RowsWritten != 5 || results[0].SkippedPartitions != 1 || results[1].RowsWritten != 4 {
		t.Fatalf("items %+v, errors %v", results, errList)
	}
	if res, err = b.e.Commit(b.ctx, p, results); err != nil || res.SkippedPartitions != 1 {
		t.Fatalf("commit %+v, %v", res, err)
	}
	eqRows(t, "partitioned view in 2 items", b.rows(t, skip), slices.Insert(slices.Clone(want), 6, "fr|encore|"))
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}
