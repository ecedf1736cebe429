package httpapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// specMergeInsert drives merge_insert through the spec-validating client
// (TestSpecConformance calls it): table docs$t has columns id, name and
// holds id 3.
func specMergeInsert(t *testing.T, sc *specClient) {
	t.Helper()
	const arrowStream = "application/vnd.apache.arrow.stream"
	ipc := func(ids []int64, names []string) []byte { return arrowBody(t, ids, names) }
	merge := func(path string, q url.Values, body []byte, chk check) (int, map[string]any) {
		t.Helper()
		st, out := sc.send("POST", path+"/merge_insert?"+q.Encode(), arrowStream, body, chk)
		var m map[string]any
		_ = json.Unmarshal(out, &m)
		return st, m
	}
	upsert := url.Values{"on": {"id"}, "when_matched_update_all": {"true"}, "when_not_matched_insert_all": {"true"}}

	st, m := merge("/v1/table/docs$t", upsert, ipc([]int64{3, 100}, []string{"merged", "new"}), checkBoth)
	if st != 200 || m["num_updated_rows"] != 1.0 || m["num_inserted_rows"] != 1.0 || m["num_deleted_rows"] != 0.0 || m["version"] == nil {
		t.Fatalf("merge_insert: %d %v", st, m)
	}
	st, out := sc.send("POST", "/v1/table/docs$t/count_rows", "application/json", []byte(`{"predicate": "(id = 3 AND name = 'merged') OR (id = 100 AND name = 'new')"}`), checkBoth)
	if st != 200 || string(out) != "2" {
		t.Fatalf("rows after merge_insert: %d %s", st, out)
	}
	filtered := url.Values{"on": {"id"}, "when_matched_update_all": {"true"}, "when_matched_update_all_filt": {"source.name > target.name"},
		"when_not_matched_by_source_delete": {"false"}, "timeout": {"30s"}, "use_index": {"false"}}
	st, m = merge("/v1/table/docs$t", filtered, ipc([]int64{3}, []string{"a"}), checkBoth)
	if st != 200 || m["num_updated_rows"] != 0.0 {
		t.Fatalf("filtered merge_insert: %d %v", st, m)
	}

	for _, c := range []struct {
		what  string
		path  string
		q     url.Values
		body  []byte
		want  int
		names string
	}{
		{"duplicate keys", "/v1/table/docs$t", upsert, ipc([]int64{7, 7}, []string{"a", "b"}), 400, "same key (id=7)"},
		{"unknown key column", "/v1/table/docs$t", url.Values{"on": {"nope"}, "when_not_matched_insert_all": {"true"}}, ipc([]int64{1}, []string{"a"}), 400, `"nope"`},
		{"no action", "/v1/table/docs$t", url.Values{"on": {"id"}}, ipc([]int64{1}, []string{"a"}), 400, "does nothing"},
		{"bad filter", "/v1/table/docs$t", url.Values{"on": {"id"}, "when_matched_update_all": {"true"}, "when_matched_update_all_filt": {"source.nope >"}}, ipc([]int64{1}, []string{"a"}), 400, "when_matched_update_all_filt"},
		{"bad boolean", "/v1/table/docs$t", url.Values{"on": {"id"}, "when_matched_update_all": {"yes please"}}, ipc([]int64{1}, []string{"a"}), 400, "when_matched_update_all"},
		{"bad timeout", "/v1/table/docs$t", url.Values{"on": {"id"}, "when_matched_update_all": {"true"}, "timeout": {"soon"}}, ipc([]int64{1}, []string{"a"}), 400, "timeout"},
		{"bad body", "/v1/table/docs$t", upsert, []byte("not arrow"), 400, "body"},
		{"missing table", "/v1/table/docs$nope", upsert, ipc([]int64{1}, []string{"a"}), 404, "not found"},
	} {
		chk := checkBoth
		if c.what == "bad boolean" {
			chk = checkResponse // the request itself breaks the spec
		}
		st, m := merge(c.path, c.q, c.body, chk)
		if st != c.want || !strings.Contains(m["error"].(string), c.names) {
			t.Errorf("merge_insert %s: %d %v, want %d naming %q", c.what, st, m, c.want, c.names)
		}
	}
	// Without on the request itself breaks the spec: only the answer is checked.
	st, m = merge("/v1/table/docs$t", url.Values{"when_matched_update_all": {"true"}}, ipc([]int64{1}, []string{"a"}), checkResponse)
	if st != 400 || !strings.Contains(m["error"].(string), "on") {
		t.Errorf("merge_insert without on: %d %v", st, m)
	}
	// A table declared without data is created by its first merge_insert.
	st, m = sc.j("/v1/table/docs$zmerge/declare", map[string]any{})
	sc.expect("declare for merge_insert", st, m, 200)
	st, m = merge("/v1/table/docs$zmerge", upsert, ipc([]int64{1, 2}, []string{"a", "b"}), checkBoth)
	if st != 200 || m["version"] != 1.0 || m["num_inserted_rows"] != 2.0 {
		t.Fatalf("merge_insert into a declared table: %d %v", st, m)
	}
}
