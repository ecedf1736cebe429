package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/httpapi"
)

// TestStorageOptions: describe and declare answer the operator's
// storage_options to the principal a rule names, on tables under the
// rule's namespace only; another principal gets none, and one that asks
// for vend_credentials without any gets a 406 naming the field, as does
// a batch declare (its answer has no storage_options).
func TestStorageOptions(t *testing.T) {
	opts, err := httpapi.ParseStorageOptions([]byte(`
storage_options:
  - principal: alice
    namespace: docs
    options: {aws_access_key_id: AK, aws_secret_access_key: SK, aws_endpoint: "http://127.0.0.1:1", allow_http: "true"}
  - principal: carol
    options: {aws_region: eu-west-1}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, httpapi.Config{Auth: jwtAuth(t), StorageOptions: opts})
	alice := bearer(mint(t, jwtSecret, "alice", time.Hour, grant("*", auth.Read, auth.Write, auth.Admin)))
	bob := bearer(mint(t, jwtSecret, "bob", time.Hour, grant("*", auth.Read, auth.Write, auth.Admin)))
	carol := bearer(mint(t, jwtSecret, "carol", time.Hour, grant("*", auth.Read, auth.Write, auth.Admin)))
	for _, ns := range []string{"docs", "other"} {
		if r := s.do("POST", "/v1/namespace/"+ns+"/create", `{}`, alice...); r.status != 200 {
			t.Fatalf("create namespace %s: %d %s", ns, r.status, r.body)
		}
	}

	r := s.do("POST", "/v1/table/docs$t/declare", `{"vend_credentials": true}`, alice...)
	so, _ := r.json["storage_options"].(map[string]any)
	if r.status != 200 || so["aws_access_key_id"] != "AK" || so["allow_http"] != "true" || len(so) != 4 {
		t.Fatalf("alice declares docs$t: %d %s", r.status, r.body)
	}
	r = s.do("POST", "/v1/table/docs$t/describe", `{"vend_credentials": true}`, alice...)
	if so, _ := r.json["storage_options"].(map[string]any); r.status != 200 || so["aws_secret_access_key"] != "SK" {
		t.Fatalf("alice describes the declared docs$t: %d %s", r.status, r.body)
	}
	if r := s.do("POST", "/v1/table/docs$t/describe", `{}`, alice...); r.json["storage_options"] == nil {
		t.Fatalf("describe without vend_credentials answers no storage_options: %s", r.body)
	}
	// Outside the rule's namespace, and another principal: none.
	if r := s.do("POST", "/v1/table/other$t/declare", `{}`, alice...); r.status != 200 || r.json["storage_options"] != nil {
		t.Fatalf("alice declares other$t: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		path string
		who  []string
		body string
		want string
	}{
		{"/v1/table/other$t/describe", alice, `{"vend_credentials": true}`, "vend_credentials"},
		{"/v1/table/docs$t/describe", bob, `{"vend_credentials": true}`, "vend_credentials"},
		{"/v1/table/docs$u/declare", bob, `{"vend_credentials": true}`, "vend_credentials"},
		{"/v1/table/batch-commit", alice, `{"operations": [{"declare_table": {"id": ["docs", "v"], "vend_credentials": true}}]}`, "operations[0].declare_table.vend_credentials"},
	} {
		r := s.do("POST", c.path, c.body, c.who...)
		if r.status != 406 || !strings.HasPrefix(r.json["detail"].(string), c.want+":") {
			t.Fatalf("%s %s: %d %s, want 406 naming %s", c.path, c.body, r.status, r.body, c.want)
		}
	}
	if r := s.do("POST", "/v1/table/docs$t/describe", `{}`, bob...); r.status != 200 || r.json["storage_options"] != nil {
		t.Fatalf("bob describes docs$t: %d %s", r.status, r.body)
	}
	// A rule without a namespace covers every table of its principal.
	if r := s.do("POST", "/v1/table/other$w/declare", `{"vend_credentials": true}`, carol...); r.status != 200 || r.json["storage_options"].(map[string]any)["aws_region"] != "eu-west-1" {
		t.Fatalf("carol declares other$w: %d %s", r.status, r.body)
	}
}

func TestParseStorageOptionsRefuses(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{}`, "want at least one rule"},
		{`storage_options: [{options: {a: b}}]`, "storage_options[0].principal"},
		{`storage_options: [{principal: a}]`, "storage_options[0].options"},
		{`storage_options: [{principal: a, options: {" k": v}}]`, "storage_options[0].options"},
		{`storage_options: [{principal: a, namespace: "x$$y", options: {k: v}}]`, "storage_options[0].namespace"},
		{`storage_options: [{principal: a, options: {k: v}, grants: []}]`, "unknown field"},
		{`storage_options: [{principal: a, options: {k: [1]}}]`, "storage options file"},
	} {
		_, err := httpapi.ParseStorageOptions([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.file, err, c.want)
		}
	}
}

// TestIdempotentCreateKeepsNoSecrets: a table create with an
// Idempotency-Key answers the caller's storage_options, and its replay
// does too, but the record kept in Redis for the replay holds no secret:
// it marks that options were answered and a replay fills in what the
// caller is given now.
func TestIdempotentCreateKeepsNoSecrets(t *testing.T) {
	const secret = "sk-never-in-redis-5e1f"
	opts, err := httpapi.ParseStorageOptions([]byte("storage_options:\n  - principal: alice\n    options: {aws_access_key_id: AK, aws_secret_access_key: " + secret + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, httpapi.Config{Auth: jwtAuth(t), StorageOptions: opts})
	alice := bearer(mint(t, jwtSecret, "alice", time.Hour, grant("*", auth.Read, auth.Write, auth.Admin)))
	if r := s.do("POST", "/v1/namespace/docs/create", `{}`, alice...); r.status != 200 {
		t.Fatalf("create namespace: %d %s", r.status, r.body)
	}
	hdr := append([]string{httpapi.IdempotencyHeader, "create-t-1"}, alice...)
	first := s.do("POST", "/v1/table/docs$t/create", `[{"id": 1}, {"id": 2}]`, hdr...)
	so, _ := first.json["storage_options"].(map[string]any)
	if first.status != 200 || so["aws_secret_access_key"] != secret {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	again := s.do("POST", "/v1/table/docs$t/create", `[{"id": 1}, {"id": 2}]`, hdr...)
	so, _ = again.json["storage_options"].(map[string]any)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || so["aws_secret_access_key"] != secret || again.json["version"] != first.json["version"] {
		t.Fatalf("replay: %d %v %s", again.status, again.header, again.body)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	dumped := 0
	for _, k := range keys {
		b, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b, secret) {
			t.Fatalf("redis key %s holds the secret", k)
		}
		if strings.Contains(b, "storage_options") {
			dumped++
		}
	}
	if dumped == 0 {
		t.Fatalf("no redis key holds the create's record (keys %v)", keys)
	}
}
