package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/httpapi"
)

// TestRouterAnswers: an unknown route is a 404 and a wrong method a 405
// with Allow, both problem bodies; the jobs console is served at /ui/.
func TestRouterAnswers(t *testing.T) {
	c := setup(t, httpapi.Config{TraceURLTemplate: "https://grafana.invalid/t/{trace_id}"})
	for _, tc := range []struct {
		method, path string
		status       int
		allow, title string
	}{
		{"GET", "/v1/job/", 404, "", "No such route"},
		{"POST", "/v1/nothing", 404, "", "No such route"},
		{"GET", "/v1/table/docs$t/create", 405, "POST", "Method not allowed"},
		{"DELETE", "/v1/namespace/docs/list", 405, "GET, POST", "Method not allowed"},
		{"POST", "/ui/", 405, "GET", "Method not allowed"},
	} {
		req, _ := http.NewRequest(tc.method, c.url+tc.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p httpapi.Problem
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || p.Status != tc.status || p.Title != tc.title || resp.Header.Get("Content-Type") != "application/json" ||
			!strings.Contains(p.Detail, tc.path) || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %v %+v Allow %q", tc.method, tc.path, resp.StatusCode, err, p, resp.Header.Get("Allow"))
		}
	}
	st, body := c.do("GET", "/ui/config.json", "", nil)
	if st != 200 || string(body) != `{"trace_url_template":"https://grafana.invalid/t/{trace_id}"}` {
		t.Fatalf("config.json: %d %s", st, body)
	}
	if st, body := c.do("GET", "/ui/", "", nil); st != 200 || !strings.Contains(string(body), "<title>mvq jobs</title>") {
		t.Fatalf("/ui/: %d %.100s", st, body)
	}
}
