package service_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// lancedb runs one command of lance/oracle/namespace.mjs: LanceDB 0.31's
// REST namespace client (connectNamespace("rest")) against this API, with
// the env's Bearer token.
func (e *env) lancedb(o *oracle.Oracle, args ...string) map[string]any {
	e.t.Helper()
	out, err := o.RunScript("namespace.mjs", append([]string{args[0], e.api, e.token}, args[1:]...)...)
	if err != nil {
		e.t.Fatalf("LanceDB %v: %v", args, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		e.t.Fatalf("LanceDB %v: %q: %v", args, out, err)
	}
	return m
}

func ints(v any) []int64 {
	var out []int64
	for _, x := range v.([]any) {
		out = append(out, int64(x.(float64)))
	}
	return out
}

// TestLanceDBThroughRESTNamespace: LanceDB's own client, pointed at mvq
// with auth on, creates a namespace and a table, appends, lists versions
// and checks out an older one; every commit goes through version/create
// (the table answers managed_versioning). Views mvq materializes over that
// table are then opened by LanceDB through the same namespace and read as
// mvq reads them; after LanceDB appends, a refresh brings the views up to
// date and LanceDB sees their new versions.
func TestLanceDBThroughRESTNamespace(t *testing.T) {
	o := oracle.Need(t)
	e := startWithTokens(t, 1)

	if got := e.lancedb(o, "create", "docs", "articles", "0", "300"); got["count"] != 300.0 {
		t.Fatalf("LanceDB created a table of %v rows", got["count"])
	}
	if got := e.lancedb(o, "add", "docs", "articles", "300", "350"); got["count"] != 350.0 || got["version"] != 2.0 {
		t.Fatalf("LanceDB add: %v", got)
	}
	if got := e.lancedb(o, "versions", "docs", "articles", "1"); fmt.Sprint(got["versions"]) != "[1 2]" || got["count"] != 300.0 {
		t.Fatalf("LanceDB versions and checkout(1): %v", got)
	}
	// mvq sees both commits: they came through it.
	var desc map[string]any
	if st := e.post("/v1/table/docs$articles/describe", map[string]any{}, &desc); st != 200 {
		t.Fatalf("describe: %d %v", st, desc)
	}
	if desc["version"] != json.Number("2") || desc["managed_versioning"] != true {
		t.Fatalf("describe after LanceDB's commits: %v", desc)
	}
	var versions map[string]any
	e.post("/v1/table/docs$articles/version/list", map[string]any{}, &versions)
	for _, v := range versions["versions"].([]any) {
		p := v.(map[string]any)["manifest_path"].(string)
		if p == "" || p[0] == '/' || !slices.Contains([]string{"18446744073709551614.manifest", "18446744073709551613.manifest"}, p[len(p)-len("18446744073709551614.manifest"):]) {
			t.Fatalf("version/list manifest_path %q is not a path from the store's root to a V2 manifest", p)
		}
	}

	// A chunker view and a query view over the LanceDB table.
	e.createChunkerView("docs$chunks", "docs$articles")
	var created map[string]any
	if st := e.post("/v1/materialized_view/docs$even/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, body FROM "docs$articles" WHERE id % 2 = 0`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create query view: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	e.mustDone(e.refresh("docs$chunks", map[string]any{}))

	check := func(view string, wantVersion float64) {
		t.Helper()
		var rows []map[string]any
		e.post("/v1/table/"+view+"/query", map[string]any{}, &rows)
		var want []int64
		for _, r := range rows {
			n, _ := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
			want = append(want, n)
		}
		sort.Slice(want, func(a, b int) bool { return want[a] < want[b] })
		got := e.lancedb(o, "read", "docs", view[len("docs$"):])
		if got["count"] != float64(len(want)) || fmt.Sprint(ints(got["ids"])) != fmt.Sprint(want) {
			t.Fatalf("LanceDB reads view %s as %v rows, mvq as %d", view, got["count"], len(want))
		}
		if wantVersion != 0 && got["version"] != wantVersion {
			t.Fatalf("LanceDB opened view %s at version %v, want %v", view, got["version"], wantVersion)
		}
	}
	check("docs$even", 2) // created empty, then its first refresh
	check("docs$chunks", 2)
	if got := e.lancedb(o, "read", "docs", "even", "id < 10"); fmt.Sprint(ints(got["ids"])) != "[0 2 4 6 8]" {
		t.Fatalf("LanceDB where over the view: %v", got)
	}
	// vectorSearch over the 384-dimensional embedding column of a view:
	// row i's vector is i*384+k, so the nearest rows are the nearest ids.
	if st := e.post("/v1/materialized_view/docs$vecs/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, vec FROM "docs$articles" WHERE id % 3 = 0`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create vector view: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	if got := e.lancedb(o, "search", "docs", "vecs", "31", "3"); fmt.Sprint(ints(got["ids"])) != "[27 30 33]" {
		t.Fatalf("LanceDB vectorSearch over the view: %v", got)
	}

	// LanceDB appends; a refresh reads only the new fragment and LanceDB
	// sees the views' new versions.
	e.lancedb(o, "add", "docs", "articles", "350", "400")
	j := e.mustDone(e.refresh("docs$even", map[string]any{}))
	if r := j["result"].(map[string]any); r["mode"] != "incremental" {
		t.Fatalf("refresh after LanceDB's append: %v", r)
	}
	e.mustDone(e.refresh("docs$chunks", map[string]any{}))
	check("docs$even", 3)
	check("docs$chunks", 3)
	if got := e.lancedb(o, "read", "docs", "even", "id >= 390"); fmt.Sprint(ints(got["ids"])) != "[390 392 394 396 398]" {
		t.Fatalf("LanceDB reads the refreshed view: %v", got)
	}

	// LanceDB deletes (a deletion file, through version/create); the next
	// refresh removes just those rows' view rows and expands nothing.
	if got := e.lancedb(o, "delete", "docs", "articles", "id % 100 = 2 OR id = 396"); got["count"] != 395.0 {
		t.Fatalf("LanceDB delete: %v", got)
	}
	j = e.mustDone(e.refresh("docs$even", map[string]any{}))
	if r := j["result"].(map[string]any); r["mode"] != "incremental" || fmt.Sprint(r["rows_removed"]) != "5" ||
		fmt.Sprint(j["progress"].(map[string]any)["work_items_total"]) != "0" {
		t.Fatalf("refresh after LanceDB's delete: %v, progress %v", r, j["progress"])
	}
	e.mustDone(e.refresh("docs$chunks", map[string]any{}))
	check("docs$even", 4)
	check("docs$chunks", 4)
	if got := e.lancedb(o, "read", "docs", "even", "id >= 390 OR id < 5"); fmt.Sprint(ints(got["ids"])) != "[0 4 390 392 394 398]" {
		t.Fatalf("LanceDB reads the view after the delete: %v", got)
	}

	// update, mergeInsert and createIndex commit through mvq too; the
	// views follow after a refresh.
	if got := e.lancedb(o, "update", "docs", "articles", "id = 4", "four words in here"); got["count"] != 395.0 {
		t.Fatalf("LanceDB update: %v", got)
	}
	if got := e.lancedb(o, "upsert", "docs", "articles", "395", "405"); got["count"] != 401.0 {
		t.Fatalf("LanceDB mergeInsert: %v", got)
	}
	if got := e.lancedb(o, "index", "docs", "articles"); fmt.Sprint(got["indices"]) != "[id_idx]" {
		t.Fatalf("LanceDB createIndex: %v", got)
	}
	var rows []map[string]any
	e.post("/v1/table/docs$articles/query", map[string]any{"filter": "id IN (4, 398, 404)"}, &rows)
	bodies := map[string]string{}
	for _, r := range rows {
		bodies[fmt.Sprint(r["id"])] = fmt.Sprint(r["body"])
	}
	if len(rows) != 3 || bodies["4"] != "four words in here" || !strings.HasSuffix(bodies["398"], " upserted") || !strings.HasSuffix(bodies["404"], " upserted") {
		t.Fatalf("mvq reads LanceDB's update and mergeInsert as %v", rows)
	}
	e.mustDone(e.refresh("docs$even", map[string]any{}))
	e.mustDone(e.refresh("docs$chunks", map[string]any{}))
	check("docs$even", 5)
	check("docs$chunks", 5)

	// Schema changes through the namespace: addColumns writes a second
	// data file in every fragment (a Merge), alterColumns a third for the
	// cast column, dropColumns only changes the schema. mvq publishes each
	// and reads them, a view over the new column refreshes, and LanceDB
	// reads that view.
	if got := e.lancedb(o, "addcol", "docs", "articles", "tens", "CAST(id * 10 AS DOUBLE)"); !slices.Contains(got["columns"].([]any), any("tens")) {
		t.Fatalf("LanceDB addColumns: %v", got)
	}
	if got := e.lancedb(o, "altercol", "docs", "articles", "tens", "float32"); got["type"] != "Float32" {
		t.Fatalf("LanceDB alterColumns: %v", got)
	}
	if got := e.lancedb(o, "dropcol", "docs", "articles", "lang"); slices.Contains(got["columns"].([]any), any("lang")) {
		t.Fatalf("LanceDB dropColumns: %v", got)
	}
	rows = nil
	if st := e.post("/v1/table/docs$articles/query", map[string]any{"filter": "id IN (4, 404)"}, &rows); st != 200 || len(rows) != 2 {
		t.Fatalf("mvq query of the new column: %d %v", st, rows)
	}
	for _, r := range rows {
		tens, _ := strconv.ParseFloat(fmt.Sprint(r["tens"]), 64)
		id, _ := strconv.ParseFloat(fmt.Sprint(r["id"]), 64)
		if tens != id*10 {
			t.Fatalf("mvq reads tens = %v for id %v", r["tens"], r["id"])
		}
	}
	if st := e.post("/v1/materialized_view/docs$tens/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, tens FROM "docs$articles" WHERE tens >= 3000`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create a view over the added column: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	check("docs$tens", 2)
	e.mustDone(e.refresh("docs$even", map[string]any{}))
	check("docs$even", 0)

	// A column rewritten in place: LanceDB casts frac (tenths: most are
	// not float32s) to float32 and back, new data files under the same
	// fragment ids and no deletion. The view reading it refreshes whole
	// and holds the new values.
	e.lancedb(o, "addcol", "docs", "articles", "frac", "CAST(id AS DOUBLE) / 10")
	if st := e.post("/v1/materialized_view/docs$frac/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, frac FROM "docs$articles" WHERE id < 10`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create a view over frac: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))
	e.lancedb(o, "altercol", "docs", "articles", "frac", "float32")
	e.lancedb(o, "altercol", "docs", "articles", "frac", "float64")
	j = e.mustDone(e.refresh("docs$frac", map[string]any{}))
	if r := j["result"].(map[string]any); r["mode"] != "full" {
		t.Fatalf("refresh after LanceDB rewrote frac: %v", r)
	}
	fracs := func(tbl string) map[string]string {
		var rows []map[string]any
		e.post("/v1/table/"+tbl+"/query", map[string]any{"filter": "id < 10"}, &rows)
		out := map[string]string{}
		for _, r := range rows {
			out[fmt.Sprint(r["id"])] = fmt.Sprint(r["frac"])
		}
		return out
	}
	src, view := fracs("docs$articles"), fracs("docs$frac")
	if len(view) == 0 || fmt.Sprint(view) != fmt.Sprint(src) || src["1"] == "0.1" {
		t.Fatalf("view frac %v, source %v (id 1 must no longer be 0.1)", view, src)
	}
}
