package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/internal/testenv"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

const jwtSecret = "a-test-secret-of-at-least-32-bytes!!"

// authServer is the real router over a real warehouse, DuckDB and Redis,
// with a real worker in-process, and an authenticator.
type authServer struct {
	t     *testing.T
	url   string
	redis string // the address of its redis-server
}

func startAuthServer(t *testing.T, a auth.Authenticator) *authServer {
	t.Helper()
	return startServer(t, httpapi.Config{Auth: a})
}

// startServer is startAuthServer with a whole configuration.
func startServer(t *testing.T, cfg httpapi.Config) *authServer {
	t.Helper()
	a := cfg.Auth
	wh, err := table.OpenWarehouse(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db, err := duck.Open(duck.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	cat := table.NewCatalog(wh, db, table.Options{Indexes: index.Maintenance()})
	r := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	eng := refresh.NewEngine(cat)
	jc := jobs.NewClient(rdb, asynq.RedisClientOpt{Addr: r.Addr}, eng)
	worker, err := jobs.NewServer(jobs.ServerConfig{Redis: asynq.RedisClientOpt{Addr: r.Addr}, RDB: rdb, Engine: eng, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(cfg, cat, &httpapi.ViewRoutes{Engine: eng, Jobs: jc}).Handler())
	t.Cleanup(func() {
		srv.Close()
		worker.Shutdown()
		jc.Close()
		rdb.Close()
		db.Close()
		wh.Close()
		if a != nil {
			a.Close()
		}
	})
	return &authServer{t: t, url: srv.URL, redis: r.Addr}
}

type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

// do sends a request with the given headers; an SSE response is closed
// after its headers.
func (s *authServer) do(method, path, body string, hdr ...string) reply {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return r
	}
	r.body, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(r.body, &r.json)
	if r.status >= 400 && resp.Header.Get("Content-Type") != "application/json" {
		s.t.Fatalf("%s %s: %d without a problem body: %s", method, path, r.status, r.body)
	}
	return r
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// mint signs an HS256 token for sub with grants, valid for ttl from now
// (negative: expired).
func mint(t *testing.T, secret, sub string, ttl time.Duration, grants ...auth.Grant) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(ttl).Unix(), "mvq_grants": grants}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func grant(ns string, actions ...auth.Action) auth.Grant {
	return auth.Grant{Namespace: ns, Actions: actions}
}

func jwtAuth(t *testing.T) auth.Authenticator {
	t.Helper()
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeJWT, JWTSecret: jwtSecret})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAuthMatrix checks every route with no, malformed, wrong and expired
// credentials (401), a principal of another namespace and one with every
// action but the one the route needs (403), and one with only that action
// (the route's own answer), each with its exact status.
func TestAuthMatrix(t *testing.T) {
	s := startAuthServer(t, jwtAuth(t))
	all := []auth.Action{auth.Read, auth.Write, auth.Refresh, auth.Admin}
	root := mint(t, jwtSecret, "root", time.Hour, grant("*", all...))
	as := func(tok string) []string { return bearer(tok) }

	// Fixture, made by root: namespaces team_a and team_b, a source table
	// and a view in each, a finished job on each view.
	jobOf := map[string]string{}
	for _, ns := range []string{"team_a", "team_b"} {
		mustStatus(t, s.do("POST", "/v1/namespace/"+ns+"/create", `{}`, as(root)...), 200)
		mustStatus(t, s.do("POST", "/v1/table/"+ns+"$src/create", `[{"id": 1, "body": "a b c"}, {"id": 2, "body": "d e"}]`, as(root)...), 200)
		r := s.do("POST", "/v1/materialized_view/"+ns+"$v/create", `{"kind": "query", "source_query": "SELECT id, body FROM \"`+ns+`$src\"", "output_schema": ""}`, as(root)...)
		mustStatus(t, r, 201)
		jobOf[ns] = r.json["job_id"].(string)
		waitFor(t, 60*time.Second, "job on "+ns, func() bool {
			st := s.do("GET", "/v1/job/"+jobOf[ns], ``, as(root)...).json["state"]
			return st == "DONE" || st == "FAILED"
		})
	}
	jobA := jobOf["team_a"]

	others := func(a auth.Action) []auth.Action {
		var out []auth.Action
		for _, x := range all {
			if x != a {
				out = append(out, x)
			}
		}
		return out
	}
	src := `SELECT id, body FROM \"team_a$src\"`
	// In order: a route's allowed request may change what later ones see.
	routes := []struct {
		method, path, body string
		action             auth.Action
		allowed            int // status with only the needed action on team_a
	}{
		{"POST", "/v1/namespace/team_a$sub/create", `{}`, auth.Write, 200},
		{"GET", "/v1/namespace/team_a/list", ``, auth.Read, 200},
		{"POST", "/v1/namespace/team_a/list", `{}`, auth.Read, 200},
		{"POST", "/v1/namespace/team_a/describe", `{}`, auth.Read, 200},
		{"POST", "/v1/namespace/team_a/exists", `{}`, auth.Read, 200},
		{"GET", "/v1/namespace/team_a/table/list", ``, auth.Read, 200},
		{"POST", "/v1/namespace/team_a/table/list", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$t2/create", `[{"id": 1}]`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/insert", `[{"id": 3, "body": "f"}]`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/describe", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/exists", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/count_rows", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/query", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/stats", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/create_scalar_index", `{"column": "id", "index_type": "BTREE"}`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/create_index", `{"column": "body", "index_type": "BITMAP", "name": "b"}`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/index/list", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/index/id_idx/stats", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/index/b/drop", ``, auth.Write, 200},
		{"GET", "/v1/table/team_a$src/version/list", ``, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/version/list", `{}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/version/describe", `{"version": 1}`, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/version/create", `{}`, auth.Write, 400}, // authorized; the body lacks version
		{"POST", "/v1/table/team_a$src/delete", `{"predicate": "id = 99"}`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/update", `{"predicate": "id = 99", "updates": [["body", "'x'"]]}`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/restore", `{"version": 1}`, auth.Write, 200},
		{"POST", "/v1/materialized_view/team_a$v2/create", `{"kind": "query", "source_query": "` + src + `", "output_schema": "", "with_no_data": true}`, auth.Write, 201},
		{"POST", "/v1/materialized_view/team_a$v/refresh", `{}`, auth.Refresh, 202},
		{"GET", "/v1/job/" + jobA, ``, auth.Read, 200},
		{"GET", "/v1/job/" + jobA + "/events", ``, auth.Read, 200},
		{"POST", "/v1/jobs/describe", `{"job_id": "` + jobA + `"}`, auth.Read, 200},
		{"POST", "/v1/jobs/list", `{"view": "team_a$v"}`, auth.Read, 200},
		{"POST", "/v1/jobs/cancel", `{"job_id": "` + jobA + `"}`, auth.Refresh, 409}, // authorized; the job is done
		{"POST", "/v1/table/team_a$src/branches/create", `{"name": "b1"}`, auth.Write, 200},
		{"POST", "/v1/table/team_a$src/branches/list", ``, auth.Read, 200},
		{"POST", "/v1/table/team_a$src/branches/delete", `{"name": "b1"}`, auth.Write, 200},
		{"POST", "/v1/table/team_a$t2/drop", `{}`, auth.Write, 200},
		{"POST", "/v1/namespace/team_a$sub/drop", `{}`, auth.Admin, 200},
	}
	// A view create also needs read on its source (a table-level grant).
	also := map[string][]auth.Grant{"/v1/materialized_view/team_a$v2/create": {{Table: "team_a$src", Actions: []auth.Action{auth.Read}}}}
	// A job is read with read or refresh on its view (jobaccess.go): the
	// principal without the route's action lacks that one too.
	orAlso := map[string]auth.Action{
		"/v1/job/" + jobA: auth.Refresh, "/v1/job/" + jobA + "/events": auth.Refresh,
		"/v1/jobs/describe": auth.Refresh, "/v1/jobs/list": auth.Refresh,
	}
	creds := []struct {
		name string
		hdr  []string
		want int
	}{
		{"none", nil, 401},
		{"malformed header", []string{"Authorization", "Basic dXNlcjpwYXNz"}, 401},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401},
		{"malformed token", bearer("not-a-jwt"), 401},
		{"wrong key", bearer(mint(t, "another-secret-of-at-least-32-bytes!", "root", time.Hour, grant("*", all...))), 401},
		{"expired", bearer(mint(t, jwtSecret, "root", -time.Hour, grant("*", all...))), 401},
		{"wrong namespace", bearer(mint(t, jwtSecret, "bob", time.Hour, grant("team_b", all...), grant("team_ab", all...))), 403},
	}
	for _, rt := range routes {
		name := rt.method + " " + rt.path
		for _, c := range creds {
			r := s.do(rt.method, rt.path, rt.body, c.hdr...)
			if r.status != c.want {
				t.Errorf("%s, %s: %d, want %d: %s", name, c.name, r.status, c.want, r.body)
			}
			if c.want == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s, %s: 401 without WWW-Authenticate", name, c.name)
			}
		}
		var wrong []auth.Action
		for _, a := range others(rt.action) {
			if a != orAlso[rt.path] {
				wrong = append(wrong, a)
			}
		}
		wrongAction := mint(t, jwtSecret, "carol", time.Hour, grant("team_a", wrong...))
		if r := s.do(rt.method, rt.path, rt.body, bearer(wrongAction)...); r.status != 403 {
			t.Errorf("%s without %s: %d, want 403: %s", name, rt.action, r.status, r.body)
		}
		only := mint(t, jwtSecret, "dave", time.Hour, append([]auth.Grant{grant("team_a", rt.action)}, also[rt.path]...)...)
		if r := s.do(rt.method, rt.path, rt.body, bearer(only)...); r.status != rt.allowed {
			t.Errorf("%s with only %s: %d, want %d: %s", name, rt.action, r.status, rt.allowed, r.body)
		}
	}

	alice := mint(t, jwtSecret, "alice", time.Hour, grant("team_a", all...))
	t.Run("root needs admin on *", func(t *testing.T) {
		mustStatus(t, s.do("GET", "/v1/namespace/$/list", ``, bearer(alice)...), 403)
		readAll := mint(t, jwtSecret, "auditor", time.Hour, grant("*", auth.Read))
		mustStatus(t, s.do("GET", "/v1/namespace/$/list", ``, bearer(readAll)...), 403)
		mustStatus(t, s.do("GET", "/v1/namespace/$/list", ``, bearer(root)...), 200)
	})
	t.Run("view source must be readable", func(t *testing.T) {
		body := `{"kind": "query", "source_query": "SELECT id FROM \"team_b$src\"", "output_schema": "", "with_no_data": true}`
		r := s.do("POST", "/v1/materialized_view/team_a$stolen/create", body, bearer(alice)...)
		mustStatus(t, r, 403)
		if !strings.Contains(fmt.Sprint(r.json["detail"]), "team_b$src") {
			t.Errorf("detail does not name the source: %v", r.json["detail"])
		}
		mustStatus(t, s.do("POST", "/v1/table/team_a$stolen/exists", `{}`, bearer(root)...), 404)
	})
	t.Run("job endpoints check the job's view", func(t *testing.T) {
		jobB := jobOf["team_b"]
		mustStatus(t, s.do("GET", "/v1/job/"+jobB, ``, bearer(alice)...), 403)
		mustStatus(t, s.do("POST", "/v1/jobs/cancel", `{"job_id": "`+jobB+`"}`, bearer(alice)...), 403)
		mustStatus(t, s.do("POST", "/v1/jobs/list", `{"view": "team_b$v"}`, bearer(alice)...), 403)
		// Without a view, the list holds only the jobs alice may read.
		r := s.do("POST", "/v1/jobs/list", `{}`, bearer(alice)...)
		mustStatus(t, r, 200)
		var views []string
		for _, j := range r.json["jobs"].([]any) {
			views = append(views, j.(map[string]any)["view"].(string))
		}
		if len(views) == 0 || strings.Contains(strings.Join(views, ","), "team_b") {
			t.Errorf("alice's job list: views %v", views)
		}
		r = s.do("POST", "/v1/jobs/list", `{}`, bearer(root)...)
		if n := len(r.json["jobs"].([]any)); n < 3 {
			t.Errorf("root sees %d jobs, want every job", n)
		}
		mustStatus(t, s.do("POST", "/v1/jobs/describe", `{"job_id": "nope"}`, bearer(alice)...), 404)
	})
	t.Run("body credentials stay out of job records", func(t *testing.T) {
		r := s.do("POST", "/v1/materialized_view/team_a$v/refresh", `{"identity": {"auth_token": "`+alice+`"}, "concurrency": 1}`)
		mustStatus(t, r, 202)
		id := r.json["job_id"].(string)
		for _, rec := range []reply{
			s.do("GET", "/v1/job/"+id, ``, bearer(alice)...),
			s.do("POST", "/v1/jobs/list", `{"view": "team_a$v"}`, bearer(alice)...),
		} {
			mustStatus(t, rec, 200)
			if !strings.Contains(string(rec.body), id) || strings.Contains(string(rec.body), alice) {
				t.Errorf("job record: %s", rec.body)
			}
		}
	})
	t.Run("open routes", func(t *testing.T) {
		mustStatus(t, s.do("GET", "/healthz", ``), 200)
		mustStatus(t, s.do("GET", "/readyz", ``), 200)
	})
	t.Run("unknown route needs credentials", func(t *testing.T) {
		mustStatus(t, s.do("POST", "/v1/nothing", `{}`), 401)
		mustStatus(t, s.do("POST", "/v1/nothing", `{}`, bearer(alice)...), 404)
	})
}

func mustStatus(t *testing.T, r reply, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
	}
}

// TestCredentialSources: Bearer, x-api-key and the body's identity all
// authenticate; two different credentials in one request are a 401; the
// identity object never reaches the handler.
func TestCredentialSources(t *testing.T) {
	// JSON bodies up to 4 MiB: the large bodies below are over the bound
	// of an anonymous body (1 MiB), not over the route's.
	s := startServer(t, httpapi.Config{Auth: jwtAuth(t), MaxJSONBodyBytes: 4 << 20})
	tok := mint(t, jwtSecret, "alice", time.Hour, grant("team_a", auth.Read, auth.Write))
	other := mint(t, jwtSecret, "bob", time.Hour, grant("team_a", auth.Read))
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/create", `{}`, bearer(tok)...), 200)
	pad := strings.Repeat(" ", 2<<20)
	for name, c := range map[string]struct {
		body string
		hdr  []string
		want int
	}{
		"x-api-key":                     {`{}`, []string{"x-api-key", tok}, 200},
		"identity.api_key":              {`{"identity": {"api_key": "` + tok + `"}}`, nil, 200},
		"identity.auth_token":           {`{"id": ["team_a"], "identity": {"auth_token": "` + tok + `"}}`, nil, 200},
		"identity last member":          {`{"id": ["team_a"] , "identity" : {"auth_token": "` + tok + `"} }`, nil, 200},
		"same in header and body":       {`{"identity": {"api_key": "` + tok + `"}}`, bearer(tok), 200},
		"different header and body":     {`{"identity": {"api_key": "` + other + `"}}`, bearer(tok), 401},
		"bearer and x-api-key differ":   {`{}`, append(bearer(tok), "x-api-key", other), 401},
		"two Authorization headers":     {`{}`, append(bearer(tok), bearer(tok)...), 401},
		"identity of the wrong type":    {`{"identity": "` + tok + `"}`, nil, 400},
		"malformed body, header creds":  {`{"id": `, bearer(tok), 400},
		"api_key and auth_token differ": {`{"identity": {"api_key": "` + tok + `", "auth_token": "` + other + `"}}`, nil, 401},
		// An anonymous client cannot make the API buffer a large body.
		"large body, body credential":   {`{"identity": {"api_key": "` + tok + `"}}` + pad, nil, 401},
		"large body, header credential": {`{"identity": {"api_key": "` + tok + `"}}` + pad, bearer(tok), 200},
	} {
		r := s.do("POST", "/v1/namespace/team_a/describe", c.body, c.hdr...)
		if r.status != c.want {
			t.Errorf("%s: %d, want %d: %s", name, r.status, c.want, r.body)
		}
		if c.want == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", name)
		}
		if strings.Contains(string(r.body), tok) || strings.Contains(string(r.body), other) {
			t.Errorf("%s: the answer holds a token: %s", name, r.body)
		}
	}
}

// TestTokensNeverLogged captures the log and the request spans (the API's
// otelgin middleware) while requests with good, bad and body credentials
// go through, including a failed reload of a tokens file whose bad line
// holds a token, and finds no token in them, nor in any answer.
func TestTokensNeverLogged(t *testing.T) {
	var mu sync.Mutex
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	const good, unknown = "good-token-0123456789abcdef", "unknown-token-0123456789"
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, file, "tokens:\n  - token: "+good+"\n    principal: alice\n    grants: [{namespace: team_a, actions: [read, write]}]\n")
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeTokens, TokensFile: file, ReloadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	s := startServer(t, httpapi.Config{Auth: a, Middleware: []gin.HandlerFunc{otelgin.Middleware("mvq-api", otelgin.WithTracerProvider(tp))}})
	var bodies []byte
	for _, r := range []reply{
		s.do("POST", "/v1/namespace/team_a/create", `{}`, bearer(good)...),
		s.do("POST", "/v1/namespace/team_a/describe", `{"identity": {"api_key": "`+good+`"}}`),
		s.do("POST", "/v1/namespace/team_b/describe", `{}`, bearer(good)...),
		s.do("POST", "/v1/namespace/team_a/describe", `{}`, bearer(unknown)...),
		s.do("POST", "/v1/namespace/team_a/describe", `{}`, "x-api-key", unknown),
		s.do("POST", "/v1/table/team_a$t/create", `[{"id": 1}]`, bearer(good)...),
		s.do("POST", "/v1/table/team_a$t/query", `{"filter": "nope nope"}`, bearer(good)...),
	} {
		bodies = append(bodies, r.body...)
	}
	// A broken tokens file whose unterminated line holds a token: the
	// reload error is logged by position only, and the old tokens stay.
	writeTokens(t, file, "tokens:\n  - token: \""+unknown+"\n    principal: [\n")
	waitFor(t, 30*time.Second, "the reload error in the log", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "reload failed")
	})
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/describe", `{}`, bearer(good)...), 200)

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if len(spans.Ended()) < 8 {
		t.Fatalf("%d request spans, want one per request", len(spans.Ended()))
	}
	for _, sp := range spans.Ended() {
		out += "\n" + sp.Name() + fmt.Sprint(sp.Attributes(), sp.Events(), sp.Status())
	}
	for _, tok := range []string{good, unknown} {
		if strings.Contains(out, tok) {
			t.Errorf("the log holds token %s:\n%s", tok, out)
		}
		if bytes.Contains(bodies, []byte(tok)) {
			t.Errorf("an answer holds token %s: %s", tok, bodies)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func writeTokens(t *testing.T, path, content string) {
	t.Helper()
	// Written aside and renamed, as a deploy tool would.
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits on a condition with a deadline (testenv.WaitFor).
var waitFor = testenv.WaitFor

// TestTokensReloadAndRateLimit: a token added to the file works once the
// file is reloaded, a removed one stops working; a principal over its
// rate_limit gets 429 with Retry-After.
func TestTokensReloadAndRateLimit(t *testing.T) {
	const first, second = "first-token-0123456789ab", "second-token-0123456789a"
	entry := func(tok, principal, extra string) string {
		return "  - token: " + tok + "\n    principal: " + principal + "\n    grants: [{namespace: team_a, actions: [read, write]}]\n" + extra
	}
	file := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens(t, file, "tokens:\n"+entry(first, "alice", ""))
	a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeTokens, TokensFile: file, ReloadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := startAuthServer(t, a)
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/create", `{}`, bearer(first)...), 200)
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/describe", `{}`, bearer(second)...), 401)

	// JSON works as well as YAML; second replaces first, with a rate limit.
	f := map[string]any{"tokens": []any{map[string]any{"token": second, "principal": "bob", "rate_limit": 0.5,
		"grants": []any{map[string]any{"namespace": "team_a", "actions": []string{"read"}}}}}}
	raw, _ := json.Marshal(f)
	writeTokens(t, file, string(raw))
	waitFor(t, 30*time.Second, "the new token", func() bool {
		return s.do("POST", "/v1/namespace/team_a/describe", `{}`, bearer(second)...).status == 200
	})
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/describe", `{}`, bearer(first)...), 401)

	// bob's bucket is empty now (burst 1, 0.5/s): the next request is a
	// 429 whatever it asks, with Retry-After in whole seconds.
	r := s.do("POST", "/v1/namespace/team_a/describe", `{}`, bearer(second)...)
	mustStatus(t, r, 429)
	if ra := r.header.Get("Retry-After"); ra != "2" && ra != "1" {
		t.Errorf("Retry-After %q, want 1 or 2 seconds", ra)
	}
	if r.json["code"] != 21.0 {
		t.Errorf("429 code %v, want 21 (Throttling)", r.json["code"])
	}
	// Open routes are not limited.
	mustStatus(t, s.do("GET", "/healthz", ``), 200)
}

// TestNoAuthStripsIdentity: with MVQ_AUTH=none every request is allowed
// and the identity member is still taken out of the body.
func TestNoAuthStripsIdentity(t *testing.T) {
	s := startAuthServer(t, nil)
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/create", `{"identity": {"api_key": "x"}}`), 200)
	mustStatus(t, s.do("POST", "/v1/namespace/team_a/drop", `{"identity": {"api_key": "x"}, "id": ["team_a"]}`), 200)
}
