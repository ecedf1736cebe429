package service_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/internal/icebergtest"
)

const iceSpec = `{"chunker": "fixed", "input_column": "text", "output_column": "chunk", "chunk_size": 3, "chunk_overlap": 1, "unit": "words"}`

func iceRows(from, to int) []icebergtest.Row {
	var out []icebergtest.Row
	for i := from; i < to; i++ {
		words := make([]string, 2+i%7)
		for w := range words {
			words[w] = fmt.Sprintf("w%d_%d", i, w)
		}
		out = append(out, icebergtest.Row{ID: int64(i), Text: strings.Join(words, " ")})
	}
	return out
}

// iceOracle chunks the Iceberg table's rows as the view must hold them:
// "id/chunk index/chunk", sorted.
func iceOracle(t *testing.T, rows []icebergtest.Row) []string {
	s, err := chunker.Parse([]byte(iceSpec))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chunker.New(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if r.ID%4 == 3 {
			continue // the view's WHERE
		}
		for i, c := range ch.Chunk(r.Text, nil) {
			out = append(out, fmt.Sprintf("%d/%d/%q", r.ID, i, c))
		}
	}
	sort.Strings(out)
	return out
}

// iceView reads the view as iceOracle renders rows, and the source row
// address of each source id.
func (e *env) iceView(view string) ([]string, map[string]string) {
	e.t.Helper()
	var rows []map[string]any
	if st := e.post("/v1/table/"+view+"/query", map[string]any{}, &rows); st != 200 {
		e.t.Fatalf("query view %d", st)
	}
	var out []string
	addr := map[string]string{}
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%v/%v/%q", r["id"], r["__chunk_index"], fmt.Sprint(r["chunk"])))
		addr[fmt.Sprint(r["id"])] = fmt.Sprint(r["__source_row_id"])
	}
	sort.Strings(out)
	return out, addr
}

// notify sends a catalog notification and wants a 204.
func (e *env) notify(ns, table string, body []byte) {
	e.t.Helper()
	resp, err := http.Post(e.api+"/api/catalog/v1/mvq/namespaces/"+ns+"/tables/"+table+"/notifications", "application/json", strings.NewReader(string(body)))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		e.t.Fatalf("notification: %d %s", resp.StatusCode, b)
	}
}

// TestIcebergSourceEndToEnd: an Iceberg table written with iceberg-go
// (append, append, overwrite, delete with position delete files) and
// announced after each commit by a notification; a chunker view with
// auto_refresh over it, refreshed by the notifications (cause
// notification) through the real API, Redis and worker processes, holds
// exactly the chunks of the Iceberg table's rows after each; so do a
// query view (the rows) and a udtf view (an aggregate) over it.
func TestIcebergSourceEndToEnd(t *testing.T) {
	lakeDir := t.TempDir()
	lake := icebergtest.NewLake(t, lakeDir, "docs", true)
	e := startAPI(t, 1, "default", "MVQ_ALLOWED_LOCATIONS=file://"+lakeDir, "MVQ_AUTO_REFRESH_MIN_INTERVAL=0")
	e.post("/v1/namespace/lake/create", `{}`, nil)

	lake.Append(iceRows(0, 20)...)
	e.notify("lake", "docs", lake.Notification("CREATE", 1000))
	var n int
	if st := e.post("/v1/table/lake$docs/count_rows", map[string]any{}, &n); st != 200 || n != 20 {
		t.Fatalf("count_rows: %d %d", st, n)
	}
	var desc map[string]any
	if st := e.post("/v1/table/lake$docs/describe", map[string]any{}, &desc); st != 200 {
		t.Fatalf("describe: %d %v", st, desc)
	}

	sum := sha256.Sum256([]byte(iceSpec))
	var r map[string]any
	if st := e.post("/v1/materialized_view/lake$chunks/create", map[string]any{
		"kind":          "chunker",
		"source_query":  `SELECT id, text FROM "lake$docs" WHERE id % 4 <> 3`,
		"output_schema": "",
		"udtf_spec": map[string]any{"kind": "chunker", "udtf": base64.StdEncoding.EncodeToString([]byte(iceSpec)),
			"udtf_sha": hex.EncodeToString(sum[:]), "udtf_name": "fixed", "udtf_version": "1"},
		"auto_refresh": true,
	}, &r); st != 201 {
		t.Fatalf("create view: %d %v", st, r)
	}
	e.mustDone(r["job_id"].(string))
	// A query view and a udtf view over it too, following it the same way.
	if st := e.post("/v1/materialized_view/lake$copy/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, text FROM "lake$docs"`, "output_schema": "", "auto_refresh": true,
	}, &r); st != 201 {
		t.Fatalf("create query view: %d %v", st, r)
	}
	e.mustDone(r["job_id"].(string))
	if st := e.post("/v1/materialized_view/lake$agg/create", map[string]any{
		"kind": "udtf", "source_query": `SELECT count(*) AS n, sum(id) AS s FROM "lake$docs"`, "output_schema": "", "auto_refresh": true,
	}, &r); st != 201 {
		t.Fatalf("create udtf view: %d %v", st, r)
	}
	e.mustDone(r["job_id"].(string))
	others := func() bool {
		rows := lake.Rows()
		var want []string
		var sum int64
		for _, r := range rows {
			want = append(want, fmt.Sprintf("%d/%s", r.ID, r.Text))
			sum += r.ID
		}
		var got []map[string]any
		e.post("/v1/table/lake$copy/query", map[string]any{}, &got)
		var have []string
		for _, g := range got {
			have = append(have, fmt.Sprintf("%v/%v", g["id"], g["text"]))
		}
		sort.Strings(want)
		sort.Strings(have)
		var agg []map[string]any
		e.post("/v1/table/lake$agg/query", map[string]any{}, &agg)
		return fmt.Sprint(have) == fmt.Sprint(want) && len(agg) == 1 && num(agg[0]["n"]) == int64(len(rows)) && num(agg[0]["s"]) == sum
	}
	if !others() {
		t.Fatal("query or udtf view differs from the Iceberg table after create")
	}
	got, addr0 := e.iceView("lake$chunks")
	if want := iceOracle(t, lake.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after create: view\n%v\nwant\n%v", got, want)
	}

	var addr map[string]string
	follow := func(what string, ts int64) {
		t.Helper()
		e.notify("lake", "docs", lake.Notification("UPDATE", ts))
		want := iceOracle(t, lake.Rows())
		waitFor(t, 90*time.Second, "the view to follow "+what, func() bool {
			got, addr = e.iceView("lake$chunks")
			return fmt.Sprint(got) == fmt.Sprint(want) && others()
		})
	}
	lake.Append(iceRows(20, 30)...)
	follow("an append", 2000)
	for id, a := range addr0 {
		if addr[id] != a {
			t.Fatalf("row %s moved from source row %s to %s after an append", id, a, addr[id])
		}
	}
	lake.Overwrite([]int64{4, 25}, icebergtest.Row{ID: 4, Text: "four rewritten here now"}, icebergtest.Row{ID: 25, Text: "twenty five anew"})
	follow("an overwrite", 3000)
	lake.Delete(5, 22)
	if lake.DeleteFiles() == 0 {
		t.Fatal("the merge-on-read delete wrote no delete file")
	}
	follow("a delete", 4000)
	// The job that followed the delete says it recomputed data files.
	recomputed := false
	waitFor(t, 30*time.Second, "a job result with source_files_recomputed", func() bool {
		for _, j := range e.viewJobs("lake$chunks") {
			if res, _ := j["result"].(map[string]any); num(res["source_files_recomputed"]) > 0 {
				recomputed = true
			}
		}
		return recomputed
	})

	// The versions: one per snapshot, the last one recomputed the data
	// files the delete files touch.
	var vl struct {
		Versions []struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"versions"`
	}
	if st := e.post("/v1/table/lake$docs/version/list", map[string]any{}, &vl); st != 200 || len(vl.Versions) != 4 {
		t.Fatalf("version list: %d %v", st, vl)
	}
	last := vl.Versions[3].Metadata
	if last[iceberg.MetaSnapshotID] != fmt.Sprint(lake.SnapshotID()) || last[iceberg.MetaRecomputedFiles] == "0" {
		t.Fatalf("last version metadata %v (snapshot %d)", last, lake.SnapshotID())
	}

	// The automatic jobs say a notification caused them.
	notified := 0
	for _, j := range e.viewJobs("lake$chunks") {
		if j["cause"] == "notification" {
			notified++
			if trig, _ := j["trigger"].(map[string]any); trig["source"] != "lake$docs" || num(trig["version"]) < 2 {
				t.Fatalf("job %v trigger %v", j["job_id"], j["trigger"])
			}
		}
	}
	if notified == 0 {
		t.Fatal("no job with cause notification")
	}

	// DROP unregisters, though views read the table: the engine that
	// sent it dropped the table already. The views stay, their status and
	// describe say the source is gone, and their next refresh names it.
	e.notify("lake", "docs", lake.Notification("DROP", 5000))
	if st := e.post("/v1/table/lake$docs/describe", map[string]any{}, &desc); st != 404 {
		t.Fatalf("describe after DROP: %d", st)
	}
	var status map[string]any
	if code := e.getJSON("/v1/materialized_view/lake$chunks/status", &status); code != 200 {
		t.Fatalf("status after DROP: %d %v", code, status)
	}
	if src := status["sources"].([]any)[0].(map[string]any); src["exists"] != false || !strings.Contains(fmt.Sprint(status["problem"]), "lake$docs is gone") {
		t.Fatalf("status of a view whose Iceberg source was dropped: %v", status)
	}
	desc = nil
	if code := e.post("/v1/table/lake$chunks/describe", map[string]any{}, &desc); code != 200 {
		t.Fatalf("describe of the view after DROP: %d %v", code, desc)
	}
	if mv, _ := desc["materialized_view"].(map[string]any); mv == nil || !strings.Contains(fmt.Sprint(mv["problem"]), "lake$docs is gone") {
		t.Fatalf("describe of a view whose Iceberg source was dropped: %v", desc["materialized_view"])
	}
	// A view created under the dropped table's name over a view that
	// reads it: a cycle.
	if code := e.post("/v1/materialized_view/lake$docs/create", map[string]any{"kind": "query", "source_query": `SELECT id FROM "lake$copy"`,
		"output_schema": "", "with_no_data": true}, &r); code != 400 || !strings.Contains(fmt.Sprint(r["detail"]), "cycle") {
		t.Fatalf("a cycle: %d %v", code, r)
	}
	var fr map[string]any
	if st := e.post("/v1/materialized_view/lake$chunks/refresh", map[string]any{}, &fr); st != 409 || !strings.Contains(fmt.Sprint(fr["detail"]), "lake$docs") {
		t.Fatalf("refresh after DROP: %d %v, want 409 naming lake$docs", st, fr)
	}
}
