package httpapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The spec's branch field on the operations that change a table's
// schema, its indexes, its virtual columns, and on the entries of a
// batch: each works on the named branch's line of versions, the branch's
// own later reads see the change, and main is untouched. Exchanges go
// through the spec validator (sc.j, sc.send).

// described is what describe shows of a line: version, field names (and
// their metadata), schema metadata.
type described struct {
	version  float64
	fields   []string
	fieldMD  map[string]map[string]any
	schemaMD map[string]any
}

func describeLine(t *testing.T, sc *specClient, id, branch string) described {
	t.Helper()
	body := map[string]any{}
	if branch != "" {
		body["branch"] = branch
	}
	st, m := sc.j("/v1/table/"+id+"/describe", body)
	if st != 200 {
		t.Fatalf("describe %s on %q: %d %v", id, branch, st, m)
	}
	d := described{version: m["version"].(float64), fieldMD: map[string]map[string]any{}}
	schema := m["schema"].(map[string]any)
	for _, f := range schema["fields"].([]any) {
		f := f.(map[string]any)
		d.fields = append(d.fields, f["name"].(string))
		if md, ok := f["metadata"].(map[string]any); ok {
			d.fieldMD[f["name"].(string)] = md
		}
	}
	d.schemaMD, _ = schema["metadata"].(map[string]any)
	return d
}

func TestBranchSchemaEvolution(t *testing.T) {
	sc := setupSpec(t)
	c := sc.client
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$t/create", `[{"id": 1, "body": "a", "extra": 1.5}, {"id": 2, "body": "b", "extra": 2.5}]`)
	st, m := sc.j("/v1/table/docs$t/branches/create", map[string]any{"name": "dev"})
	sc.expect("branch create", st, m, 200)
	main0, dev0 := describeLine(t, sc, "docs$t", ""), describeLine(t, sc, "docs$t", "dev")

	st, m = sc.j("/v1/table/docs$t/alter_columns", map[string]any{"branch": "dev", "alterations": []any{map[string]any{"path": "body", "rename": "text"}}})
	sc.expect("alter_columns on dev", st, m, 200)
	st, m = sc.j("/v1/table/docs$t/drop_columns", map[string]any{"branch": "dev", "columns": []string{"extra"}})
	sc.expect("drop_columns on dev", st, m, 200)
	st, m = sc.j("/v1/table/docs$t/update_field_metadata", map[string]any{"branch": "dev", "updates": []any{map[string]any{"path": "id", "metadata": map[string]any{"unit": "n"}}}})
	sc.expect("update_field_metadata on dev", st, m, 200)
	st, out := sc.send("POST", "/v1/table/docs$t/schema_metadata/update?branch=dev", "application/json", []byte(`{"owner": "etl"}`), checkBoth)
	sc.expect("schema_metadata/update on dev", st, string(out), 200)

	dev := describeLine(t, sc, "docs$t", "dev")
	if dev.version != dev0.version+4 || strings.Join(dev.fields, ",") != "id,text" || dev.fieldMD["id"]["unit"] != "n" || dev.schemaMD["owner"] != "etl" {
		t.Fatalf("dev after four schema changes: %+v (was version %v)", dev, dev0.version)
	}
	main := describeLine(t, sc, "docs$t", "")
	if main.version != main0.version || strings.Join(main.fields, ",") != "id,body,extra" || len(main.fieldMD["id"]) != 0 || len(main.schemaMD) != 0 {
		t.Fatalf("main changed by schema changes on dev: %+v", main)
	}
	// The branch's reads use its schema; main's its own.
	st, rows, raw := queryRows(t, c, "docs$t", `{"branch": "dev", "filter": "text = 'b'", "k": 10, "vector": {}}`)
	if st != 200 || len(rows) != 1 || rows[0]["id"] != 2.0 || rows[0]["extra"] != nil {
		t.Fatalf("query dev by the renamed column: %d %s", st, raw)
	}
	if st, _, raw := queryRows(t, c, "docs$t", `{"filter": "text = 'b'", "k": 10, "vector": {}}`); st != 400 && st != 404 {
		t.Fatalf("main has no column text: %d %s", st, raw)
	}

	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"alter_columns", map[string]any{"branch": "nope", "alterations": []any{map[string]any{"path": "id", "rename": "x"}}}, 404},
		{"drop_columns", map[string]any{"branch": "nope", "columns": []string{"id"}}, 404},
		{"update_field_metadata", map[string]any{"branch": "a/b", "updates": []any{}}, 400},
		{"alter_columns", map[string]any{"branch": "main", "alterations": []any{map[string]any{"path": "extra", "rename": "extra2"}}}, 200},
	} {
		st, m := sc.j("/v1/table/docs$t/"+tc.path, tc.body)
		sc.expect(fmt.Sprintf("%s %v", tc.path, tc.body), st, m, tc.want)
	}
	st, out = sc.send("POST", "/v1/table/docs$t/schema_metadata/update?branch=nope", "application/json", []byte(`{"a": "1"}`), checkBoth)
	sc.expect("schema_metadata/update on a missing branch", st, string(out), 404)
	if d := describeLine(t, sc, "docs$t", "dev"); d.version != dev.version {
		t.Fatalf("a change on main moved dev: %v, was %v", d.version, dev.version)
	}
}

func indexNames(t *testing.T, sc *specClient, id string, body any) []string {
	t.Helper()
	st, m := sc.j("/v1/table/"+id+"/index/list", body)
	if st != 200 {
		t.Fatalf("index/list %v: %d %v", body, st, m)
	}
	var names []string
	for _, x := range m["indexes"].([]any) {
		names = append(names, x.(map[string]any)["index_name"].(string))
	}
	sort.Strings(names)
	return names
}

func TestBranchIndexes(t *testing.T) {
	sc := setupSpec(t)
	c := sc.client
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	rows := func(from, n int) string {
		var b []string
		for i := from; i < from+n; i++ {
			b = append(b, fmt.Sprintf(`{"id": %d, "body": "w%d"}`, i, i%3))
		}
		return "[" + strings.Join(b, ",") + "]"
	}
	c.expect(200, "/v1/table/docs$i/create", rows(0, 10))
	st, m := sc.j("/v1/table/docs$i/branches/create", map[string]any{"name": "dev"})
	sc.expect("branch create", st, m, 200)
	if st, out := c.do("POST", "/v1/table/docs$i/insert?branch=dev", "application/json", []byte(rows(100, 5))); st != 200 {
		t.Fatalf("insert on dev: %d %s", st, out)
	}
	mainV := describeLine(t, sc, "docs$i", "").version

	st, m = sc.j("/v1/table/docs$i/create_scalar_index", map[string]any{"branch": "dev", "column": "id", "index_type": "BTREE"})
	sc.expect("create_scalar_index on dev", st, m, 200)
	st, m = sc.j("/v1/table/docs$i/create_index", map[string]any{"column": "body", "index_type": "BITMAP", "name": "b_idx"})
	sc.expect("create_index on main", st, m, 200)
	if got := indexNames(t, sc, "docs$i", map[string]any{"branch": "dev"}); fmt.Sprint(got) != "[id_idx]" {
		t.Fatalf("dev's indexes: %v", got)
	}
	if got := indexNames(t, sc, "docs$i", map[string]any{}); fmt.Sprint(got) != "[b_idx]" {
		t.Fatalf("main's indexes: %v", got)
	}
	st, m = sc.j("/v1/table/docs$i/index/id_idx/stats", map[string]any{"branch": "dev"})
	if st != 200 || m["num_indexed_rows"] != 15.0 || m["num_unindexed_rows"] != 0.0 {
		t.Fatalf("dev stats: %d %v", st, m)
	}
	st, m = sc.j("/v1/table/docs$i/index/id_idx/stats", map[string]any{})
	sc.expect("main has no id_idx", st, m, 404)

	// A commit on dev extends dev's index, not main's.
	if st, out := c.do("POST", "/v1/table/docs$i/insert?branch=dev", "application/json", []byte(rows(200, 3))); st != 200 {
		t.Fatalf("insert on dev: %d %s", st, out)
	}
	st, m = sc.j("/v1/table/docs$i/index/id_idx/stats", map[string]any{"branch": "dev"})
	if st != 200 || m["num_indexed_rows"] != 18.0 || m["num_unindexed_rows"] != 0.0 {
		t.Fatalf("dev stats after a dev insert: %d %v", st, m)
	}
	st, got, raw := queryRows(t, c, "docs$i", `{"branch": "dev", "filter": "id >= 100 AND id < 202", "k": 100, "vector": {}}`)
	if st != 200 || len(got) != 7 {
		t.Fatalf("indexed filter on dev: %d %s", st, raw)
	}
	st, m = sc.j("/v1/table/docs$i/index/b_idx/stats", map[string]any{})
	if st != 200 || m["num_indexed_rows"] != 10.0 {
		t.Fatalf("main stats: %d %v", st, m)
	}

	st, out := sc.send("POST", "/v1/table/docs$i/index/id_idx/drop?branch=dev", "", nil, checkBoth)
	sc.expect("drop on dev", st, string(out), 200)
	if got := indexNames(t, sc, "docs$i", map[string]any{"branch": "dev"}); len(got) != 0 {
		t.Fatalf("dev's indexes after drop: %v", got)
	}
	st, out = sc.send("POST", "/v1/table/docs$i/index/b_idx/drop?branch=dev", "", nil, checkBoth)
	sc.expect("main's index dropped on dev", st, string(out), 404)
	if got := indexNames(t, sc, "docs$i", map[string]any{}); fmt.Sprint(got) != "[b_idx]" {
		t.Fatalf("main's indexes after drops on dev: %v", got)
	}
	if v := describeLine(t, sc, "docs$i", "").version; v != mainV {
		t.Fatalf("main moved: version %v, was %v", v, mainV)
	}
	st, m = sc.j("/v1/table/docs$i/index/list", map[string]any{"branch": "nope"})
	sc.expect("index/list on a missing branch", st, m, 404)
	st, m = sc.j("/v1/table/docs$i/create_index", map[string]any{"branch": "../x", "column": "id", "index_type": "BTREE"})
	sc.expect("create_index on a bad branch name", st, m, 400)
	// Deleting the branch takes its indexes with it.
	st, m = sc.j("/v1/table/docs$i/create_scalar_index", map[string]any{"branch": "dev", "column": "id", "index_type": "BTREE"})
	sc.expect("create_scalar_index on dev again", st, m, 200)
	st, m = sc.j("/v1/table/docs$i/branches/delete", map[string]any{"name": "dev"})
	sc.expect("branch delete", st, m, 200)
	if _, err := os.Stat(filepath.Join(c.dir, "docs", "i.lance", "tree", "dev", "_mvq_indices")); !os.IsNotExist(err) {
		t.Fatalf("the deleted branch's folder (indexes) is still there: %v", err)
	}
}

func TestBranchColumnsAndBackfill(t *testing.T) {
	sc := setupSpec(t)
	c := sc.client
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	c.expect(200, "/v1/table/docs$src/create", `[{"id": 1, "body": "abc"}, {"id": 2, "body": "hello"}]`)
	st, m := sc.j("/v1/table/docs$src/branches/create", map[string]any{"name": "dev"})
	sc.expect("branch create", st, m, 200)
	main0, dev0 := describeLine(t, sc, "docs$src", ""), describeLine(t, sc, "docs$src", "dev")

	st, m = sc.j("/v1/table/docs$src/add_columns", map[string]any{"branch": "dev", "new_columns": []any{map[string]any{"name": "n", "computed": "length(body)"}}})
	if st != 200 || m["version"] != dev0.version+1 {
		t.Fatalf("add_columns on dev: %d %v", st, m)
	}
	st, m = sc.j("/v1/table/docs$src/backfill_column", map[string]any{"branch": "dev", "column": "n"})
	if st != 202 {
		t.Fatalf("backfill on dev: %d %v", st, m)
	}
	res := c.waitDone(m["job_id"].(string))
	if res["rows_updated"] != 2.0 {
		t.Fatalf("backfill on dev: %v", res)
	}
	st, rows, raw := queryRows(t, c, "docs$src", `{"branch": "dev", "k": 10, "vector": {}, "columns": {"column_names": ["id", "n"]}}`)
	sort.Slice(rows, func(i, j int) bool { return rows[i]["id"].(float64) < rows[j]["id"].(float64) })
	if st != 200 || len(rows) != 2 || rows[0]["n"] != 3.0 || rows[1]["n"] != 5.0 {
		t.Fatalf("dev after the backfill: %d %s", st, raw)
	}
	if d := describeLine(t, sc, "docs$src", "dev"); d.version <= dev0.version+1 || strings.Join(d.fields, ",") != "id,body,n" {
		t.Fatalf("dev: %+v", d)
	}
	main := describeLine(t, sc, "docs$src", "")
	if main.version != main0.version || strings.Join(main.fields, ",") != "id,body" {
		t.Fatalf("main changed by columns on dev: %+v", main)
	}
	// main has no column n to fill; unknown branches are 404s, bad names 400s.
	st, m = sc.j("/v1/table/docs$src/backfill_column", map[string]any{"column": "n"})
	sc.expect("backfill n on main", st, m, 404)
	st, m = sc.j("/v1/table/docs$src/backfill_column", map[string]any{"branch": "nope", "column": "n"})
	sc.expect("backfill on a missing branch", st, m, 404)
	st, m = sc.j("/v1/table/docs$src/add_columns", map[string]any{"branch": "nope", "new_columns": []any{map[string]any{"name": "x", "computed": "1"}}})
	sc.expect("add_columns on a missing branch", st, m, 404)
	st, m = sc.j("/v1/table/docs$src/add_columns", map[string]any{"branch": "a/b", "new_columns": []any{map[string]any{"name": "x", "computed": "1"}}})
	sc.expect("add_columns on a bad branch name", st, m, 400)
}

// stageOnLine stages version latest+1 of a line of table ns$name (""
// for main) without its first fragment, as a client of version/create
// would, and answers the entry that publishes it.
func stageOnLine(t *testing.T, dir, ns, name, branch, tag string) map[string]any {
	t.Helper()
	folder := filepath.Join(dir, ns, name+".lance")
	versions := filepath.Join(folder, "_versions")
	if branch != "" {
		versions = filepath.Join(folder, "tree", branch, "_versions")
	}
	ents, err := os.ReadDir(versions)
	if err != nil {
		t.Fatal(err)
	}
	var latest string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".manifest") && len(e.Name()) == 29 && (latest == "" || e.Name() < latest) {
			latest = e.Name() // V2 names: the newest sorts first
		}
	}
	man := manifestJSON(t, filepath.Join(versions, latest))
	man["version"] = man["version"].(float64) + 1
	if frags, _ := man["fragments"].([]any); len(frags) > 0 {
		man["fragments"] = frags[1:]
	}
	staged, _ := json.Marshal(man)
	if err := os.MkdirAll(filepath.Join(folder, "staging"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(folder, "staging", tag+".manifest"), staged)
	e := map[string]any{"id": []string{ns, name}, "version": man["version"], "manifest_path": "staging/" + tag + ".manifest", "manifest_size": len(staged)}
	if branch != "" {
		e["branch"] = branch
	}
	return e
}

func TestBranchBatch(t *testing.T) {
	sc := setupSpec(t)
	c := sc.client
	c.expect(200, "/v1/namespace/docs/create", `{}`)
	ten := `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}, {"id": 6}, {"id": 7}, {"id": 8}, {"id": 9}, {"id": 10}]`
	for _, name := range []string{"a", "b"} {
		c.expect(200, "/v1/table/docs$"+name+"/create", ten)
	}
	st, m := sc.j("/v1/table/docs$a/branches/create", map[string]any{"name": "dev"})
	sc.expect("branch create", st, m, 200)
	count := func(name, branch string) int {
		t.Helper()
		st, out := c.do("POST", "/v1/table/docs$"+name+"/count_rows", "application/json", []byte(`{"branch": "`+branch+`"}`))
		n, err := strconv.Atoi(string(out))
		if st != 200 || err != nil {
			t.Fatalf("count %s on %q: %d %s", name, branch, st, out)
		}
		return n
	}
	versions := func(name, branch string) string {
		t.Helper()
		st, out := sc.send("POST", "/v1/table/docs$"+name+"/version/list?branch="+branch, "", nil, checkBoth)
		var m struct {
			Versions []struct {
				Version int `json:"version"`
			} `json:"versions"`
		}
		if st != 200 || json.Unmarshal(out, &m) != nil {
			t.Fatalf("version/list %s on %q: %d %s", name, branch, st, out)
		}
		var vs []string
		for _, v := range m.Versions {
			vs = append(vs, strconv.Itoa(v.Version))
		}
		sort.Strings(vs)
		return strings.Join(vs, ",")
	}

	// batch-create: a's dev and b's main in one transaction.
	ea, eb := stageOnLine(t, c.dir, "docs", "a", "dev", "a2"), stageOnLine(t, c.dir, "docs", "b", "", "b2")
	st, m = sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{ea, eb}})
	sc.expect("batch-create with a branch entry", st, m, 200)
	if count("a", "dev") != 6 || count("a", "") != 10 || count("b", "") != 6 {
		t.Fatalf("after batch-create: a dev %d, a main %d, b %d rows", count("a", "dev"), count("a", ""), count("b", ""))
	}
	if versions("a", "dev") != "1,2" || versions("a", "") != "1" {
		t.Fatalf("versions after batch-create: dev %s, main %s", versions("a", "dev"), versions("a", ""))
	}
	st, m = sc.j("/v1/transaction/"+m["transaction_id"].(string)+"/describe", map[string]any{})
	if st != 200 || m["properties"].(map[string]any)["mvq.tables"] != "docs$a@dev:2,docs$b@2" {
		t.Fatalf("describe: %d %v", st, m)
	}

	// batch-commit: a new version of a's dev and a deletion on it, each
	// on its line (one operation per table: the deletion on b's branch).
	st, m = sc.j("/v1/table/docs$b/branches/create", map[string]any{"name": "dev"})
	sc.expect("branch create b", st, m, 200)
	if st, out := c.do("POST", "/v1/table/docs$b/insert?branch=dev", "application/json", []byte(`[{"id": 11}]`)); st != 200 {
		t.Fatalf("insert on b dev: %d %s", st, out)
	}
	if versions("b", "dev") != "2,3" {
		t.Fatalf("b dev versions: %s", versions("b", "dev"))
	}
	ea3 := stageOnLine(t, c.dir, "docs", "a", "dev", "a3")
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{
		map[string]any{"create_table_version": ea3},
		map[string]any{"delete_table_versions": map[string]any{"id": []string{"docs", "b"}, "branch": "dev", "ranges": []any{map[string]any{"start_version": 2, "end_version": 3}}}},
	}})
	sc.expect("batch-commit on branches", st, m, 200)
	if got := m["results"].([]any)[1].(map[string]any)["delete_table_versions"].(map[string]any)["deleted_count"]; got != 1.0 {
		t.Fatalf("deleted_count %v", got)
	}
	if count("a", "dev") != 2 || count("a", "") != 10 || versions("a", "dev") != "1,2,3" || versions("a", "") != "1" {
		t.Fatalf("a after batch-commit: dev %d rows (%s), main %d (%s)", count("a", "dev"), versions("a", "dev"), count("a", ""), versions("a", ""))
	}
	if versions("b", "dev") != "3" || versions("b", "") != "1,2" || count("b", "dev") != 7 {
		t.Fatalf("b after batch-commit: dev %s (%d rows), main %s", versions("b", "dev"), count("b", "dev"), versions("b", ""))
	}

	// A missing branch is a 404 naming the entry, a bad name a 400; nothing
	// is applied.
	eb3 := stageOnLine(t, c.dir, "docs", "b", "", "b3")
	bad := stageOnLine(t, c.dir, "docs", "a", "", "a-main")
	bad["branch"] = "nope"
	st, m = sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{eb3, bad}})
	if st != 404 || !strings.Contains(fmt.Sprint(m["error"]), "entries[1]") {
		t.Fatalf("batch-create on a missing branch: %d %v", st, m)
	}
	bad["branch"] = "a/b"
	st, m = sc.j("/v1/table/version/batch-create", map[string]any{"entries": []any{eb3, bad}})
	if st != 400 || !strings.Contains(fmt.Sprint(m["error"]), "entries[1].branch") {
		t.Fatalf("batch-create on a bad branch name: %d %v", st, m)
	}
	st, m = sc.j("/v1/table/batch-commit", map[string]any{"operations": []any{
		map[string]any{"delete_table_versions": map[string]any{"id": []string{"docs", "a"}, "branch": "nope", "ranges": []any{map[string]any{"start_version": 2, "end_version": 2}}}},
	}})
	sc.expect("batch-commit delete on a missing branch", st, m, 404)
	if versions("b", "") != "1,2" || versions("a", "dev") != "1,2,3" {
		t.Fatalf("a refused batch applied something: b %s, a dev %s", versions("b", ""), versions("a", "dev"))
	}
}
