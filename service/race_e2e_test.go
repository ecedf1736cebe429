package service_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
)

// raceRows are rows of the LanceDB table's shape (id, lang, body, vec) as
// JSON, the same rows race.mjs makes for these ids.
func raceRows(from, to int, suffix string) []map[string]any {
	var out []map[string]any
	for i := from; i < to; i++ {
		r := doc(i)
		r["body"] = r["body"].(string) + suffix
		vec := make([]float64, 384) // namespace.mjs's dimension
		for k := range vec {
			vec[k] = float64(i*384 + k)
		}
		r["vec"] = vec
		out = append(out, r)
	}
	return out
}

// send posts body as JSON and returns the status and the body; unlike
// post it never fails the test, so goroutines may call it.
func (e *env) send(path string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	return e.do("POST", path, bytes.NewReader(b))
}

// do sends one request with the env's token (and a JSON body when body
// is set) and returns the status and the response body.
func (e *env) do(method, path string, body io.Reader) (int, []byte, error) {
	req, _ := http.NewRequest(method, e.api+path, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

type raceAppends struct {
	Acked  [][2]int `json:"acked"`
	Failed []struct {
		From  int    `json:"from"`
		To    int    `json:"to"`
		Error string `json:"error"`
	} `json:"failed"`
	Versions []int64 `json:"versions"`
}

// TestConcurrentWritersLanceDBAndMVQ: LanceDB appends to a table through
// mvq's REST namespace (each commit a version/create) while mvq, through
// its HTTP API, inserts into and merge_inserts the same table and
// refreshes a view over it. The writers race for the same next version:
// the loser of a version/create gets 409 and LanceDB rebases and retries;
// mvq's own writes retry inside the table. At the end every row a writer
// was told is committed is there exactly once, read by mvq and by LanceDB
// at the final version, with the upserted bodies; the view, refreshed once
// more, matches the table.
func TestConcurrentWritersLanceDBAndMVQ(t *testing.T) {
	o := oracle.Need(t)
	e := startWithTokens(t, 1)
	if got := e.lancedb(o, "create", "docs", "race", "0", "100"); got["count"] != 100.0 {
		t.Fatalf("LanceDB created a table of %v rows", got["count"])
	}
	var created map[string]any
	if st := e.post("/v1/materialized_view/docs$race_even/create", map[string]any{
		"kind": "query", "source_query": `SELECT id, body FROM "docs$race" WHERE id % 2 = 0`, "output_schema": "",
	}, &created); st != 201 {
		t.Fatalf("create query view: %d %v", st, created)
	}
	e.mustDone(created["job_id"].(string))

	const (
		lanceFrom, lanceAdds, lanceBatch = 1000, 12, 10
		mvqFrom, mvqBatch, minMVQWrites  = 5000, 10, 8
	)
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		acked       = map[int]string{} // id -> the body suffix its last acknowledged write gave it
		problems    []string
		lance       raceAppends
		conflicts   int
		mvqVersions []int64
		lanceDone   = make(chan struct{})
	)
	ack := func(from, to int, suffix string) {
		mu.Lock()
		defer mu.Unlock()
		for i := from; i < to; i++ {
			acked[i] = suffix
		}
	}
	problem := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(f, a...))
	}
	for i := 0; i < 100; i++ {
		acked[i] = ""
	}
	wg.Add(3)
	go func() { // LanceDB appends, one version/create each
		defer wg.Done()
		defer close(lanceDone)
		out, err := o.RunScript("race.mjs", "appends", e.api, e.token, "docs", "race",
			strconv.Itoa(lanceFrom), strconv.Itoa(lanceAdds), strconv.Itoa(lanceBatch))
		if err != nil {
			problem("LanceDB appends: %v", err)
			return
		}
		if err := json.Unmarshal([]byte(out), &lance); err != nil {
			problem("LanceDB appends: %q: %v", out, err)
			return
		}
		for _, r := range lance.Acked {
			ack(r[0], r[1], "")
		}
	}()
	go func() { // mvq inserts and merge_inserts (updating rows it inserted, adding new ones) until LanceDB is done
		defer wg.Done()
		write := func(path string, body any) bool {
			for try := 0; try < 20; try++ {
				st, b, err := e.send(path, body)
				if err != nil {
					problem("%s: %v", path, err)
					return false
				}
				if st == 200 {
					var r struct{ Version int64 }
					json.Unmarshal(b, &r)
					mu.Lock()
					mvqVersions = append(mvqVersions, r.Version)
					mu.Unlock()
					return true
				}
				if st != 409 {
					problem("%s: %d %s", path, st, b)
					return false
				}
				mu.Lock()
				conflicts++
				mu.Unlock()
			}
			problem("%s: still 409 after 20 tries", path)
			return false
		}
		for k := 0; k < 300; k++ {
			select {
			case <-lanceDone:
				if k >= minMVQWrites {
					return
				}
			default:
			}
			lo := mvqFrom + k*mvqBatch
			if k%2 == 0 || k < 2 {
				if write("/v1/table/docs$race/insert", raceRows(lo, lo+mvqBatch, "")) {
					ack(lo, lo+mvqBatch, "")
				}
				continue
			}
			// Half of the batch updates rows an earlier insert added, half is new.
			upd := mvqFrom + (k-1)*mvqBatch
			rows := append(raceRows(upd, upd+5, " upserted"), raceRows(lo, lo+5, " upserted")...)
			if write("/v1/table/docs$race/merge_insert?on=id&when_matched_update_all=true&when_not_matched_insert_all=true", rows) {
				ack(upd, upd+5, " upserted")
				ack(lo, lo+5, " upserted")
			}
		}
	}()
	go func() { // view refreshes commit to the view while the table moves
		defer wg.Done()
		for k := 0; k < 4; k++ {
			st, b, err := e.send("/v1/materialized_view/docs$race_even/refresh", map[string]any{})
			if err != nil || st != 202 {
				problem("refresh: %d %s %v", st, b, err)
				return
			}
			var r map[string]any
			json.Unmarshal(b, &r)
			id, _ := r["job_id"].(string)
			deadline := time.Now().Add(180 * time.Second)
			for {
				st, b, err := e.getRaw("/v1/job/" + id)
				var j map[string]any
				if err == nil && st == 200 && json.Unmarshal(b, &j) == nil {
					if s := j["state"]; s == "DONE" {
						break
					} else if s == "FAILED" || s == "CANCELLED" {
						problem("refresh job %s: %v %v", id, s, j["failure"])
						return
					}
				}
				if time.Now().After(deadline) {
					problem("refresh job %s not done in 180s", id)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("writers: %v", problems)
	}
	if len(lance.Failed) > 0 {
		t.Errorf("LanceDB gave up on %d of %d appends (acknowledged %d): first %+v", len(lance.Failed), lanceAdds, len(lance.Acked), lance.Failed[0])
	}
	t.Logf("LanceDB acknowledged %d appends at versions %v; mvq committed versions %v (%d answers 409)", len(lance.Acked), lance.Versions, mvqVersions, conflicts)
	// How version/create answered LanceDB (a 409 is a race it lost and
	// retried after rebasing).
	if st, b, err := e.getRaw("/metrics"); err == nil && st == 200 {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "mvq_http_requests") && strings.Contains(l, "version/create") {
				t.Log(l)
			}
		}
	}
	// The writers did race: mvq committed between LanceDB's first and
	// last commit, so LanceDB's later adds were based on a version that
	// was no longer the latest.
	if len(lance.Versions) > 0 && !slices.ContainsFunc(mvqVersions, func(v int64) bool {
		return v > lance.Versions[0] && v < lance.Versions[len(lance.Versions)-1]
	}) {
		t.Fatalf("no mvq commit landed between LanceDB's versions %v (mvq's: %v): the writers did not overlap", lance.Versions, mvqVersions)
	}

	want := make([]int64, 0, len(acked))
	for id := range acked {
		want = append(want, int64(id))
	}
	slices.Sort(want)

	// mvq's reading: every acknowledged id exactly once, with its body.
	var rows []map[string]any
	if st := e.post("/v1/table/docs$race/query", map[string]any{}, &rows); st != 200 {
		t.Fatalf("query: %d", st)
	}
	var got []int64
	for _, r := range rows {
		id, _ := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
		got = append(got, id)
		if suffix, ok := acked[int(id)]; ok {
			if wantBody := doc(int(id))["body"].(string) + suffix; r["body"] != wantBody {
				t.Errorf("mvq reads id %d with body %q, want %q", id, r["body"], wantBody)
			}
		}
	}
	slices.Sort(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("mvq reads %d rows, %d acknowledged: %s", len(got), len(want), idDiff(got, want))
	}
	// LanceDB's reading of the final version.
	var desc map[string]any
	e.post("/v1/table/docs$race/describe", map[string]any{}, &desc)
	lr := e.lancedb(o, "read", "docs", "race")
	if l := ints(lr["ids"]); fmt.Sprint(l) != fmt.Sprint(want) {
		t.Fatalf("LanceDB reads %d rows, %d acknowledged: %s", len(l), len(want), idDiff(l, want))
	}
	if fmt.Sprint(lr["version"]) != fmt.Sprint(desc["version"]) {
		t.Fatalf("LanceDB read version %v, mvq's latest is %v", lr["version"], desc["version"])
	}
	// The view, refreshed after the race, has exactly the even ids.
	e.mustDone(e.refresh("docs$race_even", map[string]any{}))
	ve := e.lancedb(o, "read", "docs", "race_even")
	var even []int64
	for _, id := range want {
		if id%2 == 0 {
			even = append(even, id)
		}
	}
	if v := ints(ve["ids"]); fmt.Sprint(v) != fmt.Sprint(even) {
		t.Fatalf("LanceDB reads the view as %d rows, want %d: %s", len(v), len(even), idDiff(v, even))
	}
}

func (e *env) getRaw(path string) (int, []byte, error) { return e.do("GET", path, nil) }

// idDiff names the ids missing from got and the ones it has twice or
// without being wanted (both sorted).
func idDiff(got, want []int64) string {
	count := map[int64]int{}
	for _, id := range got {
		count[id]++
	}
	var missing, extra []int64
	for _, id := range want {
		if count[id] == 0 {
			missing = append(missing, id)
		}
		count[id]--
	}
	for id, n := range count {
		if n > 0 {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	return fmt.Sprintf("missing %v, duplicated or unexpected %v", missing, extra)
}
