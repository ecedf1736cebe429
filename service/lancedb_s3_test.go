package service_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/internal/testenv"
)

// TestLanceDBOnS3 (make test-s3): LanceDB's REST namespace client on an
// S3 warehouse (SeaweedFS) reaches the bucket with the storage_options
// describe and declare answer (MVQ_STORAGE_OPTIONS_FILE), creates and
// appends to a table whose every commit goes through version/create with
// the S3 object's ETag, and opens a view mvq refreshed over it; a
// principal with no configured options gets none, and asking for them
// is a 406.
func TestLanceDBOnS3(t *testing.T) {
	if !testenv.S3Mode() {
		t.Skip("S3 mode only: make test-s3")
	}
	o := oracle.Need(t)
	r, db := testenv.SharedRedis(t)
	e := &env{t: t, redisURL: r.URL(db), warehouse: testenv.Warehouse(t)}
	wh, err := url.Parse(e.warehouse)
	if err != nil || wh.Scheme != "s3" {
		t.Fatalf("warehouse %s is not on S3", e.warehouse)
	}
	opts := map[string]string{
		"aws_access_key_id":     os.Getenv("AWS_ACCESS_KEY_ID"),
		"aws_secret_access_key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"aws_region":            wh.Query().Get("region"),
		"aws_endpoint":          wh.Query().Get("endpoint"),
		"allow_http":            "true",
	}
	for k, v := range opts {
		if v == "" {
			t.Fatalf("no %s for the storage options (warehouse %s)", k, e.warehouse)
		}
	}
	rules, _ := json.Marshal(map[string]any{"storage_options": []any{map[string]any{"principal": "alice", "namespace": "docs", "options": opts}}})
	file := filepath.Join(t.TempDir(), "storage.json")
	if err := os.WriteFile(file, rules, 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := tokensFile(t)
	e.startWorker("default")
	e.api = "http://" + e.startProcess("api", "MVQ_TEST_API=1", "MVQ_LISTEN=127.0.0.1:0", "MVQ_AUTH=tokens",
		"MVQ_AUTH_TOKENS_FILE="+tokens, "MVQ_STORAGE_OPTIONS_FILE="+file, "MVQ_LOG_LEVEL=debug")
	e.token = aliceToken

	if got := e.lancedb(o, "create", "docs", "articles", "0", "300"); got["count"] != 300.0 {
		t.Fatalf("LanceDB created a table of %v rows", got["count"])
	}
	if got := e.lancedb(o, "add", "docs", "articles", "300", "350"); got["count"] != 350.0 || got["version"] != 2.0 {
		t.Fatalf("LanceDB add: %v", got)
	}
	var desc map[string]any
	if st := e.post("/v1/table/docs$articles/describe", map[string]any{"vend_credentials": true}, &desc); st != 200 {
		t.Fatalf("describe: %d %v", st, desc)
	}
	loc, _ := desc["location"].(string)
	so, _ := desc["storage_options"].(map[string]any)
	if desc["version"] != json.Number("2") || !strings.HasPrefix(loc, "s3://") || so["aws_endpoint"] != opts["aws_endpoint"] {
		t.Fatalf("describe after LanceDB's commits on S3: %v", desc)
	}
	// Every version LanceDB committed is a V2 manifest in the bucket.
	var versions map[string]any
	e.post("/v1/table/docs$articles/version/list", map[string]any{}, &versions)
	if vs, _ := versions["versions"].([]any); len(vs) != 2 {
		t.Fatalf("version/list: %v", versions)
	}

	var created map[string]any
	if st := e.post("/v1/materialized_view/docs$even/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, body FROM "docs$articles" WHERE id % 2 = 0`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create query view: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	got := e.lancedb(o, "read", "docs", "even", "id >= 340")
	if fmt.Sprint(ints(got["ids"])) != "[340 342 344 346 348]" || got["count"] != 5.0 {
		t.Fatalf("LanceDB reads the view on S3: %v", got)
	}
	e.lancedb(o, "add", "docs", "articles", "350", "360")
	e.mustDone(e.refresh("docs$even", map[string]any{}))
	if got := e.lancedb(o, "read", "docs", "even"); got["count"] != 180.0 {
		t.Fatalf("LanceDB reads the refreshed view on S3: %v rows, want 180", got["count"])
	}

	// LanceDB's addColumns on S3: a second data file in every fragment,
	// taken by version/create (both files checked in the bucket) and read
	// by mvq with ranged reads of each; a view over the new column.
	if got := e.lancedb(o, "addcol", "docs", "articles", "tens", "id * 10"); !slices.Contains(got["columns"].([]any), any("tens")) {
		t.Fatalf("LanceDB addColumns on S3: %v", got)
	}
	var rows []map[string]any
	if st := e.post("/v1/table/docs$articles/query", map[string]any{"filter": "id IN (7, 355)"}, &rows); st != 200 || len(rows) != 2 {
		t.Fatalf("mvq query of the added column on S3: %d %v", st, rows)
	}
	for _, r := range rows {
		if fmt.Sprint(r["tens"]) != fmt.Sprint(r["id"])+"0" {
			t.Fatalf("mvq reads tens = %v for id %v on S3", r["tens"], r["id"])
		}
	}
	if st := e.post("/v1/materialized_view/docs$tens/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, tens FROM "docs$articles" WHERE tens >= 3500`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create a view over the added column on S3: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	if got := e.lancedb(o, "read", "docs", "tens"); fmt.Sprint(ints(got["ids"])) != "[350 351 352 353 354 355 356 357 358 359]" {
		t.Fatalf("LanceDB reads the view over the added column on S3: %v", got)
	}

	// bob has no options: none answered, and asking for them is a 406.
	e.token = bobToken
	var problem map[string]any
	if st := e.post("/v1/table/other$t/describe", map[string]any{"vend_credentials": true}, &problem); st != 406 ||
		!strings.HasPrefix(fmt.Sprint(problem["detail"]), "vend_credentials:") {
		t.Fatalf("bob asks for credentials: %d %v", st, problem)
	}
}
