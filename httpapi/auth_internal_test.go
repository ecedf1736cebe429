package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
)

// TestEveryRouteHasARule: every route the server registers comes from
// the route table, with the rule the auth middleware reads (a route
// outside it is closed to all but root admins).
func TestEveryRouteHasARule(t *testing.T) {
	s := New(Config{Metrics: http.NotFoundHandler()}, nil, &ViewRoutes{})
	for _, r := range s.Handler().(*gin.Engine).Routes() {
		key := r.Method + " " + r.Path
		rule, ok := s.rules[key]
		if !ok {
			t.Errorf("route %s is not in the route table", key)
			continue
		}
		if !rule.open && rule.action == "" {
			t.Errorf("route %s has no action", key)
		}
	}
}

// TestBatchOperationsFollowTheirRoutes: every batch operation needs the
// grant of the single route that does the same, read from the route table.
func TestBatchOperationsFollowTheirRoutes(t *testing.T) {
	s := New(Config{}, nil, nil)
	for op, route := range batchOpRoutes {
		r, ok := s.rules[route]
		if !ok || r.target != targetPath {
			t.Errorf("batch operation %s: route %s has no rule on its table", op, route)
			continue
		}
		if got := s.batchAction(op); got != r.action {
			t.Errorf("batch operation %s needs %s, its route %s", op, got, r.action)
		}
	}
	for op, want := range map[string]auth.Action{"deregister_table": auth.Admin, "delete_table_versions": auth.Admin, "create_table_version": auth.Write, "declare_table": auth.Write, "no_such_op": auth.Admin} {
		if got := s.batchAction(op); got != want {
			t.Errorf("batch operation %s needs %s, want %s", op, got, want)
		}
	}
}

func TestRemoveMembers(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"identity": {"api_key": "k"}}`, `{}`},
		{` {"identity":{"api_key":"k"},"id":["a"]} `, ` {"id":["a"]} `},
		{`{"id": ["a"], "identity": {"auth_token": "t"}}`, `{"id": ["a"]}`},
		{`{"a": 1, "identity": null, "b": {"identity": 2}, "IDENTITY": 3}`, `{"a": 1,"b": {"identity": 2}}`},
		{"{\n  \"identit\\u0079\": 1,\n  \"x\": \"identity\"\n}", "{\"x\": \"identity\"}"},
		{`{"id": ["a"]}`, `{"id": ["a"]}`},
		{`[1, 2]`, `[1, 2]`},
		{`{"identity": 1} trailing`, `{} trailing`},
	} {
		got, err := removeMembers([]byte(c.in), isIdentityKey)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{`{"identity": }`, `{"a": 1,}`, `{"a" 1}`} {
		if _, err := removeMembers([]byte(bad), isIdentityKey); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestPrincipalInContext: handlers (and middleware registered after the
// auth middleware, such as idempotency) see the authenticated principal in
// the request context and through the gin context.
func TestPrincipalInContext(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	doc := "tokens:\n  - token: root-token-0123456789\n    principal: root\n    grants: [{namespace: '*', actions: [admin]}]\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeTokens, TokensFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	e := New(Config{Auth: a}, nil, nil).Handler().(*gin.Engine)
	// Not in the route table: only an admin of the root may call it.
	e.GET("/v1/whoami", func(c *gin.Context) {
		c.String(http.StatusOK, auth.PrincipalFrom(c.Request.Context())+"/"+auth.PrincipalFrom(c))
	})
	req := httptest.NewRequest("GET", "/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer root-token-0123456789")
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != 200 || w.Body.String() != "root/root" {
		t.Fatalf("%d %q, want 200 root/root", w.Code, w.Body.String())
	}
}

// TestMayHoldBodyFields: the decode of bodyFields is skipped only for an
// object none of whose member names encoding/json could match to one of
// its fields.
func TestMayHoldBodyFields(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{}`, false},
		{`{"max_rows_per_fragment":5,"concurrency":3}`, false},
		{`{"identity":{"api_key":"k"}}`, true},
		{`{"job_id":"x"}`, true},
		{`{"VIEW":"a"}`, true},
		{`{"Source_Query":"q"}`, true},
		{`{"namespace":null}`, true},
		{`{"ſource_query":"q"}`, true}, // not ASCII: left to the decode
	} {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.body), &obj); err != nil {
			t.Fatal(err)
		}
		if got := mayHoldBodyFields(obj); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.body, got, tc.want)
		}
	}
}
