package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/auth"
)

// TestRefresherReadsItsJobsWithoutTheManifest: a principal with only
// refresh on a view reads the jobs it starts (get, describe, list,
// events), as one with read does; neither sees the request's manifest,
// which a principal with write on the view does. Another namespace's
// refresher reads none of them.
func TestRefresherReadsItsJobsWithoutTheManifest(t *testing.T) {
	s := startAuthServer(t, jwtAuth(t))
	all := []auth.Action{auth.Read, auth.Write, auth.Refresh, auth.Admin}
	root := bearer(mint(t, jwtSecret, "root", time.Hour, grant("*", all...)))
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/create", `{}`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/table/team_a$src/create", `[{"id": 1, "body": "a b"}]`, root...), 200)
	mustStatus(t, s.do("POST", "/v1/materialized_view/team_a$v/create", `{"kind": "query", "source_query": "SELECT id, body FROM \"team_a$src\"", "output_schema": "", "with_no_data": true}`, root...), 201)
	refresher := bearer(mint(t, jwtSecret, "refresher", time.Hour, grant("team_a", auth.Refresh)))
	reader := bearer(mint(t, jwtSecret, "reader", time.Hour, grant("team_a", auth.Read)))
	writer := bearer(mint(t, jwtSecret, "writer", time.Hour, grant("team_a", auth.Read, auth.Write)))
	stranger := bearer(mint(t, jwtSecret, "other", time.Hour, grant("team_b", all...), grant("team_a$src", all...)))

	const secret = "hunter2-manifest-secret"
	r := s.do("POST", "/v1/materialized_view/team_a$v/refresh", `{"manifest": "{\"name\": \"`+secret+`\"}"}`, refresher...)
	mustStatus(t, r, 202)
	job := r.json["job_id"].(string)

	reads := func(who []string) []reply {
		return []reply{
			s.do("GET", "/v1/job/"+job, ``, who...),
			s.do("POST", "/v1/jobs/describe", `{"job_id": "`+job+`"}`, who...),
			s.do("POST", "/v1/jobs/list", `{"view": "team_a$v"}`, who...),
			s.do("POST", "/v1/jobs/list", `{}`, who...),
		}
	}
	for _, who := range []struct {
		name  string
		hdr   []string
		whole bool
	}{{"refresher", refresher, false}, {"reader", reader, false}, {"writer", writer, true}} {
		for i, rr := range reads(who.hdr) {
			if rr.status != 200 || !strings.Contains(string(rr.body), job) {
				t.Fatalf("%s, read %d: %d %s", who.name, i, rr.status, rr.body)
			}
			if got := strings.Contains(string(rr.body), secret); got != who.whole {
				t.Errorf("%s, read %d: manifest shown %v, want %v: %s", who.name, i, got, who.whole, rr.body)
			}
			if !who.whole && !strings.Contains(string(rr.body), "manifest_checksum") {
				t.Errorf("%s, read %d: no manifest_checksum: %s", who.name, i, rr.body)
			}
		}
		mustStatus(t, s.do("GET", "/v1/job/"+job+"/events", ``, who.hdr...), 200)
	}
	for i, rr := range reads(stranger) {
		want := 403
		if i == 3 {
			want = 200 // the list without a view holds none of team_a's jobs
		}
		if rr.status != want || want == 200 && strings.Contains(string(rr.body), job) {
			t.Errorf("another namespace's principal, read %d: %d %s", i, rr.status, rr.body)
		}
	}
	mustStatus(t, s.do("GET", "/v1/job/"+job+"/events", ``, stranger...), 403)
}
