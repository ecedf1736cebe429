package httpapi_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/auth"
)

// TestRegisterStaysInTheCallersNamespace: alice, admin of A only, cannot
// register B's branch folder (B/secret.lance/tree/dev) or a folder B's
// table was deregistered to as a table of A; B's branch stays whole. A
// deregistered folder is registered again by its namespace's admin; one
// no record says the origin of, by a root admin only.
func TestRegisterStaysInTheCallersNamespace(t *testing.T) {
	s := startTxnServer(t, jwtAuth(t))
	all := []auth.Action{auth.Read, auth.Write, auth.Refresh, auth.Admin}
	root := bearer(mint(t, jwtSecret, "root", time.Hour, grant("*", all...)))
	alice := bearer(mint(t, jwtSecret, "alice", time.Hour, grant("A", all...)))
	bob := bearer(mint(t, jwtSecret, "bob", time.Hour, grant("B", all...)))
	for _, ns := range []string{"A", "B"} {
		mustStatus(t, s.do("POST", "/v1/namespace/"+ns+"/create", `{}`, root...), 200)
	}
	mustStatus(t, s.do("POST", "/v1/table/B$secret/create", `[{"id": 1, "body": "b's"}, {"id": 2, "body": "rows"}]`, bob...), 200)
	mustStatus(t, s.do("POST", "/v1/table/B$secret/branches/create", `{"name": "dev"}`, bob...), 200)
	mustStatus(t, s.do("POST", "/v1/table/B$secret/insert?branch=dev", `[{"id": 3, "body": "dev"}]`, bob...), 200)
	devVersions := filepath.Join(s.dir, "B", "secret.lance", "tree", "dev", "_versions")
	before, err := os.ReadDir(devVersions)
	if err != nil || len(before) == 0 {
		t.Fatalf("B's branch has no versions folder: %v", err)
	}

	for _, loc := range []string{
		"B/secret.lance/tree/dev",
		"file://" + s.dir + "/B/secret.lance/tree/dev",
		"B/secret.lance/tree/dev/",
		"A/../B/secret.lance/tree/dev",
		"B/secret.lance",
		"_deregistered/x.lance/tree/dev",
	} {
		r := s.do("POST", "/v1/table/A$x/register", body(t, map[string]any{"location": loc}), alice...)
		if r.status != 400 || !strings.Contains(fmt.Sprint(r.json["error"]), "location") {
			t.Errorf("alice registers %q: %d %s", loc, r.status, r.body)
		}
	}
	mustStatus(t, s.do("POST", "/v1/table/A$x/exists", `{}`, root...), 404)
	after, err := os.ReadDir(devVersions)
	if err != nil || len(after) != len(before) {
		t.Fatalf("B's branch lost versions: %d of %d (%v)", len(after), len(before), err)
	}
	r := s.do("POST", "/v1/table/B$secret/count_rows", `{"branch": "dev"}`, bob...)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != "3" {
		t.Fatalf("B's branch after the attempts: %d %s", r.status, r.body)
	}

	// A folder B's table was deregistered to: only B's admin takes it back.
	mustStatus(t, s.do("POST", "/v1/table/B$old/create", `[{"id": 1}]`, bob...), 200)
	r = s.do("POST", "/v1/table/B$old/deregister", `{}`, bob...)
	mustStatus(t, r, 200)
	loc := r.json["location"].(string)
	r = s.do("POST", "/v1/table/A$y/register", body(t, map[string]any{"location": loc}), alice...)
	if r.status != 403 || !strings.Contains(fmt.Sprint(r.json["error"]), "location") {
		t.Fatalf("alice registers B's deregistered table: %d %s", r.status, r.body)
	}
	mustStatus(t, s.do("POST", "/v1/table/A$y/exists", `{}`, root...), 404)
	mustStatus(t, s.do("POST", "/v1/table/B$back/register", body(t, map[string]any{"location": loc}), bob...), 200)
	mustStatus(t, s.do("POST", "/v1/table/B$back/count_rows", `{}`, bob...), 200)

	// A deregistered folder without its record (as another tool could
	// leave one): a root admin's to register.
	mustStatus(t, s.do("POST", "/v1/table/B$old2/create", `[{"id": 1}]`, bob...), 200)
	r = s.do("POST", "/v1/table/B$old2/deregister", `{}`, bob...)
	mustStatus(t, r, 200)
	loc = r.json["location"].(string)
	rec := strings.TrimSuffix(strings.TrimPrefix(loc, "file://"), ".lance") + ".origin.json"
	if err := os.Remove(rec); err != nil {
		t.Fatalf("the origin record: %v", err)
	}
	mustStatus(t, s.do("POST", "/v1/table/A$z/register", body(t, map[string]any{"location": loc}), alice...), 403)
	mustStatus(t, s.do("POST", "/v1/table/B$z/register", body(t, map[string]any{"location": loc}), bob...), 403)
	mustStatus(t, s.do("POST", "/v1/table/B$z/register", body(t, map[string]any{"location": loc}), root...), 200)
}
