package httpapi

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestEveryRouteHasARule: a route without a rule is closed to all but
// root admins; every route the server registers must say what it needs.
func TestEveryRouteHasARule(t *testing.T) {
	s := New(Config{Metrics: http.NotFoundHandler()}, nil, &ViewRoutes{})
	seen := map[string]bool{}
	for _, r := range s.Handler().(*gin.Engine).Routes() {
		key := r.Method + " " + r.Path
		seen[key] = true
		if openRoutes[r.Path] {
			continue
		}
		if _, ok := routeRules[key]; !ok {
			t.Errorf("route %s has no entry in routeRules", key)
		}
	}
	for key := range routeRules {
		if !seen[key] {
			t.Errorf("routeRules has %s, which is no route", key)
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
