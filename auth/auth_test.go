package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/mvq-dev/mvq/auth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAllows(t *testing.T) {
	id := &auth.Identity{Principal: "p", Grants: []auth.Grant{
		{Namespace: "team_a", Actions: []auth.Action{auth.Read, auth.Write}},
		{Namespace: "team_b$sub", Actions: []auth.Action{auth.Refresh}},
		{Namespace: "caf\u00e9", Actions: []auth.Action{auth.Read}},
		{Table: "shared$docs", Actions: []auth.Action{auth.Read}},
	}}
	star := &auth.Identity{Grants: []auth.Grant{{Namespace: "*", Actions: []auth.Action{auth.Admin}}}}
	parse(t, id, star)
	const ns, tbl = false, true
	for _, c := range []struct {
		id     *auth.Identity
		action auth.Action
		table  bool // target is a table (AllowsTable), else a namespace
		target []string
		want   bool
	}{
		{id, auth.Read, ns, []string{"team_a"}, true},
		{id, auth.Write, tbl, []string{"team_a", "t"}, true},
		{id, auth.Read, tbl, []string{"team_a", "x", "y"}, true},
		{id, auth.Read, ns, []string{"team_a", "x", "y"}, true},
		{id, auth.Refresh, tbl, []string{"team_a", "t"}, false},
		{id, auth.Admin, ns, []string{"team_a"}, false},
		{id, auth.Read, ns, []string{"team_ab"}, false},
		{id, auth.Read, ns, []string{"team"}, false},
		{id, auth.Read, ns, nil, false},
		{id, auth.Read, tbl, nil, false},
		{id, auth.Refresh, tbl, []string{"team_b", "sub", "v"}, true},
		{id, auth.Refresh, ns, []string{"team_b"}, false},
		{id, auth.Refresh, tbl, []string{"team_b", "subway"}, false},
		{id, auth.Read, tbl, []string{"cafe\u0301", "t"}, true}, // NFD spelling of the granted NFC name
		// A namespace grant on N never covers a table named N in N's
		// parent: the root-level table team_a, the table sub of team_b.
		{id, auth.Read, tbl, []string{"team_a"}, false},
		{id, auth.Write, tbl, []string{"team_a"}, false},
		{id, auth.Refresh, tbl, []string{"team_b", "sub"}, false},
		// A table grant covers that table only: not a namespace of the
		// same name, nor what is inside one.
		{id, auth.Read, tbl, []string{"shared", "docs"}, true},
		{id, auth.Read, ns, []string{"shared", "docs"}, false},
		{id, auth.Read, tbl, []string{"shared", "docs", "t"}, false},
		{id, auth.Read, tbl, []string{"shared", "doc"}, false},
		{id, auth.Read, ns, []string{"shared"}, false},
		{star, auth.Admin, ns, nil, true},
		{star, auth.Admin, tbl, []string{"anything", "t"}, true},
		{star, auth.Admin, tbl, []string{"root_table"}, true},
		{star, auth.Read, ns, []string{"anything"}, false},
	} {
		got := c.id.AllowsNamespace(c.action, c.target)
		if c.table {
			got = c.id.AllowsTable(c.action, c.target)
		}
		if got != c.want {
			t.Errorf("%v %s %q (table %v): %v, want %v", c.id.Grants, c.action, c.target, c.table, got, c.want)
		}
	}
}

// TestGrantNamesANamespaceOrATable: a grant sets one of namespace and
// table; "*" is not a table.
func TestGrantNamesANamespaceOrATable(t *testing.T) {
	for _, g := range []auth.Grant{
		{Namespace: "a", Table: "a$t", Actions: []auth.Action{auth.Read}},
		{Table: "*", Actions: []auth.Action{auth.Read}},
		{Table: "a$$t", Actions: []auth.Action{auth.Read}},
		{Actions: []auth.Action{auth.Read}},
	} {
		var f auth.TokensFile
		f.Tokens = []auth.TokenEntry{{Token: "0123456789abcdef", Principal: "p", Grants: []auth.Grant{g}}}
		raw, _ := json.Marshal(f)
		if _, err := auth.ParseTokens(raw); err == nil {
			t.Errorf("grant %+v accepted", g)
		}
	}
}

// parse runs grants through the tokens-file loader, which prepares them.
func parse(t *testing.T, ids ...*auth.Identity) {
	t.Helper()
	for _, id := range ids {
		var f auth.TokensFile
		f.Tokens = []auth.TokenEntry{{Token: "0123456789abcdef", Principal: "p", Grants: id.Grants}}
		raw, _ := json.Marshal(f)
		got, err := auth.ParseTokens(raw)
		if err != nil {
			t.Fatal(err)
		}
		id.Grants = got.Tokens[0].Grants
	}
}

func TestParseTokens(t *testing.T) {
	const secret = "plain-secret-value-42"
	sum := sha256.Sum256([]byte(secret))
	good := "tokens:\n  - token_sha256: " + hex.EncodeToString(sum[:]) + "\n    principal: alice\n    grants: [{namespace: team_a, actions: [read]}]\n    rate_limit: 5\n"
	f, err := auth.ParseTokens([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Tokens[0]; e.Principal != "alice" || e.RateLimit != 5 || len(e.Grants) != 1 {
		t.Fatalf("parsed %+v", e)
	}
	for name, c := range map[string]struct{ doc, want string }{
		"unknown field":      {"tokens:\n  - token: " + secret + "\n    principal: a\n    grant: []\n", `unknown field "grant"`},
		"both token fields":  {"tokens:\n  - token: " + secret + "\n    token_sha256: " + hex.EncodeToString(sum[:]) + "\n    principal: a\n    grants: [{namespace: x, actions: [read]}]\n", "not both"},
		"bad hex":            {"tokens:\n  - token_sha256: abc\n    principal: a\n    grants: [{namespace: x, actions: [read]}]\n", "64 hex digits"},
		"short token":        {"tokens:\n  - token: short\n    principal: a\n    grants: [{namespace: x, actions: [read]}]\n", "at least 16"},
		"no principal":       {"tokens:\n  - token: " + secret + "\n    grants: [{namespace: x, actions: [read]}]\n", "principal: required"},
		"no grants":          {"tokens:\n  - token: " + secret + "\n    principal: a\n", "grants: required"},
		"bad action":         {"tokens:\n  - token: " + secret + "\n    principal: a\n    grants: [{namespace: x, actions: [delete]}]\n", `unknown action "delete"`},
		"empty part":         {"tokens:\n  - token: " + secret + "\n    principal: a\n    grants: [{namespace: x$, actions: [read]}]\n", "empty part"},
		"negative rate":      {"tokens:\n  - token: " + secret + "\n    principal: a\n    rate_limit: -1\n    grants: [{namespace: x, actions: [read]}]\n", "rate_limit"},
		"duplicate token":    {"tokens:\n  - token: " + secret + "\n    principal: a\n    grants: [{namespace: x, actions: [read]}]\n  - token_sha256: " + hex.EncodeToString(sum[:]) + "\n    principal: b\n    grants: [{namespace: x, actions: [read]}]\n", "same token as tokens[0]"},
		"duplicate key":      {"tokens:\n  - token: " + secret + "\n    token: " + secret + "x\n    principal: a\n    grants: [{namespace: x, actions: [read]}]\n", "near line"},
		"no tokens":          {"tokens: []\n", "no tokens"},
		"yaml syntax":        {"tokens:\n  - token: \"" + secret + "\n    principal: [\n", "near line"},
		"token not a string": {"tokens:\n  - token: 12345678901234567890\n    principal: a\n    grants: [{namespace: x, actions: [read]}]\n", "tokens.token"},
	} {
		_, err := auth.ParseTokens([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureLog sends the default logger to a buffer for the test.
func captureLog(t *testing.T) *syncBuffer {
	buf := &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

func TestTokensAuthenticateAndReload(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	entry := func(tok, p string) string {
		return "  - token: " + tok + "\n    principal: " + p + "\n    grants: [{namespace: '*', actions: [read]}]\n"
	}
	writeFile(t, file, "tokens:\n"+entry("alice-token-0123456789", "alice"))
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeTokens, TokensFile: file, ReloadInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	id, err := a.Authenticate(ctx, "alice-token-0123456789")
	if err != nil || id.Principal != "alice" {
		t.Fatalf("alice: %v %v", id, err)
	}
	var ae *auth.Error
	if _, err := a.Authenticate(ctx, "alice-token-012345678"); !errors.As(err, &ae) {
		t.Fatalf("a prefix of the token: %v", err)
	}

	writeFile(t, file, "tokens:\n"+entry("bob-token-0123456789ab", "bob"))
	waitFor(t, "bob's token", func() bool { _, err := a.Authenticate(ctx, "bob-token-0123456789ab"); return err == nil })
	if _, err := a.Authenticate(ctx, "alice-token-0123456789"); err == nil {
		t.Fatal("alice's removed token still works")
	}
	// A broken file keeps the last good tokens (and says so in the log);
	// a later good one loads.
	logs := captureLog(t)
	writeFile(t, file, "tokens: [")
	waitFor(t, "the reload error", func() bool { return strings.Contains(logs.String(), "reload failed") })
	if _, err := a.Authenticate(ctx, "bob-token-0123456789ab"); err != nil {
		t.Fatalf("after a broken file: %v", err)
	}
	writeFile(t, file, "tokens:\n"+entry("carol-token-0123456789", "carol"))
	waitFor(t, "carol's token", func() bool { _, err := a.Authenticate(ctx, "carol-token-0123456789"); return err == nil })

	if _, err := auth.New(ctx, auth.Config{Mode: auth.ModeTokens, TokensFile: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("a missing tokens file opened")
	}
}

const secret = "hs256-secret-of-at-least-32-bytes-long"

func sign(t *testing.T, m jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub string, exp time.Duration, extra ...any) jwt.MapClaims {
	c := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(exp).Unix(),
		"mvq_grants": []map[string]any{{"namespace": "team_a", "actions": []string{"read"}}}}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func TestJWTHS256(t *testing.T) {
	ctx := context.Background()
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWTSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	id, err := a.Authenticate(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", time.Hour, "mvq_rate_limit", 2.5)))
	if err != nil || id.Principal != "alice" || id.RateLimit != 2.5 || !id.AllowsTable(auth.Read, []string{"team_a", "t"}) || id.AllowsNamespace(auth.Write, []string{"team_a"}) {
		t.Fatalf("good token: %+v %v", id, err)
	}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	for name, c := range map[string]struct {
		tok  string
		want string
	}{
		"expired":        {sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("a", -time.Hour)), "expired"},
		"not yet valid":  {sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("a", time.Hour, "nbf", time.Now().Add(time.Hour).Unix())), "not valid yet"},
		"no exp":         {sign(t, jwt.SigningMethodHS256, []byte(secret), "", jwt.MapClaims{"sub": "a"}), "no exp"},
		"no sub":         {sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("", time.Hour)), "no sub"},
		"wrong secret":   {sign(t, jwt.SigningMethodHS256, []byte(secret+"x"), "", claims("a", time.Hour)), "invalid token"},
		"HS512":          {sign(t, jwt.SigningMethodHS512, []byte(secret), "", claims("a", time.Hour)), "invalid token"},
		"RS256 unset":    {sign(t, jwt.SigningMethodRS256, rsaKey, "", claims("a", time.Hour)), "invalid token"},
		"alg none":       {sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims("a", time.Hour)), "invalid token"},
		"malformed":      {"abc.def", "malformed"},
		"bad grants":     {sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("a", time.Hour, "mvq_grants", []map[string]any{{"namespace": "x", "actions": []string{"fly"}}})), "unknown action"},
		"bad rate limit": {sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("a", time.Hour, "mvq_rate_limit", -1)), "mvq_rate_limit"},
	} {
		_, err := a.Authenticate(ctx, c.tok)
		var ae *auth.Error
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an auth error containing %q", name, err, c.want)
		}
		if err != nil && c.tok != "" && strings.Contains(err.Error(), c.tok) {
			t.Errorf("%s: the error shows the token", name)
		}
	}
	if _, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWTSecret: "short"}); err == nil {
		t.Fatal("a short HS256 secret was accepted")
	}
}

// jwks returns a JWKS document with the public halves of keys, by kid.
func jwks(t *testing.T, keys map[string]any) string {
	t.Helper()
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k, KeyID: kid, Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestJWTFromJWKSFile(t *testing.T) {
	ctx := context.Background()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	file := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, file, jwks(t, map[string]any{"r1": &rsaKey.PublicKey, "e1": &ecKey.PublicKey}))
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWKS: file, ReloadInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for name, tok := range map[string]string{
		"RS256": sign(t, jwt.SigningMethodRS256, rsaKey, "r1", claims("rsa-user", time.Hour)),
		"ES256": sign(t, jwt.SigningMethodES256, ecKey, "e1", claims("ec-user", time.Hour)),
	} {
		if id, err := a.Authenticate(ctx, tok); err != nil || !strings.HasSuffix(id.Principal, "-user") {
			t.Errorf("%s: %v %v", name, id, err)
		}
	}
	for name, tok := range map[string]string{
		"unknown kid":             sign(t, jwt.SigningMethodES256, other, "e2", claims("a", time.Hour)),
		"right kid, wrong key":    sign(t, jwt.SigningMethodES256, other, "e1", claims("a", time.Hour)),
		"kid of another key type": sign(t, jwt.SigningMethodES256, ecKey, "r1", claims("a", time.Hour)),
		"expired":                 sign(t, jwt.SigningMethodRS256, rsaKey, "r1", claims("a", -time.Hour)),
		// Algorithm confusion: HS256 "signed" with the RSA public key.
		"HS256 with the public key": sign(t, jwt.SigningMethodHS256, []byte(jwks(t, map[string]any{"r1": &rsaKey.PublicKey})), "r1", claims("a", time.Hour)),
	} {
		if _, err := a.Authenticate(ctx, tok); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Rotation: a new key appears in the file.
	writeFile(t, file, jwks(t, map[string]any{"e2": &other.PublicKey}))
	tok := sign(t, jwt.SigningMethodES256, other, "e2", claims("rotated", time.Hour))
	waitFor(t, "the rotated key", func() bool { _, err := a.Authenticate(ctx, tok); return err == nil })
	if _, err := a.Authenticate(ctx, sign(t, jwt.SigningMethodRS256, rsaKey, "r1", claims("a", time.Hour))); err == nil {
		t.Fatal("a key removed from the JWKS still verifies")
	}
}

func TestJWTFromJWKSURL(t *testing.T) {
	ctx := context.Background()
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	doc := jwks(t, map[string]any{"k1": &k1.PublicKey})
	var fetches atomic.Int32
	var docMu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		docMu.Lock()
		defer docMu.Unlock()
		w.Write([]byte(doc))
	}))
	defer srv.Close()
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWKS: srv.URL + "/jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Authenticate(ctx, sign(t, jwt.SigningMethodES256, k1, "k1", claims("u", time.Hour))); err != nil {
		t.Fatal(err)
	}
	// A token with a kid the set lacks makes one fetch, which finds it.
	docMu.Lock()
	doc = jwks(t, map[string]any{"k1": &k1.PublicKey, "k2": &k2.PublicKey})
	docMu.Unlock()
	if _, err := a.Authenticate(ctx, sign(t, jwt.SigningMethodES256, k2, "k2", claims("u", time.Hour))); err != nil {
		t.Fatalf("new kid after a refetch: %v", err)
	}
	// More unknown kids within 30 s fetch nothing more.
	for i := 0; i < 5; i++ {
		a.Authenticate(ctx, sign(t, jwt.SigningMethodES256, k2, "nope", claims("u", time.Hour)))
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	srv.Close()
	if _, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWKS: srv.URL}); err == nil {
		t.Fatal("an unreachable JWKS URL opened")
	}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg    auth.Config
		listen string
		want   string // "" = ok
	}{
		{auth.Config{}, "127.0.0.1:2333", "MVQ_AUTH is required"},
		{auth.Config{Mode: "none"}, "127.0.0.1:2333", ""},
		{auth.Config{Mode: "none"}, "localhost:2333", ""},
		{auth.Config{Mode: "none"}, "[::1]:2333", ""},
		{auth.Config{Mode: "none"}, "0.0.0.0:2333", "MVQ_ALLOW_UNAUTHENTICATED"},
		{auth.Config{Mode: "none"}, ":2333", "MVQ_ALLOW_UNAUTHENTICATED"},
		{auth.Config{Mode: "none", AllowUnauthenticated: true}, "0.0.0.0:2333", ""},
		{auth.Config{Mode: "tokens"}, ":1", "MVQ_AUTH_TOKENS_FILE"},
		{auth.Config{Mode: "tokens", TokensFile: "f", JWKS: "j"}, ":1", "for MVQ_AUTH=jwt"},
		{auth.Config{Mode: "jwt"}, ":1", "MVQ_AUTH_JWT_SECRET"},
		{auth.Config{Mode: "jwt", JWTSecret: "short"}, ":1", "at least 32"},
		{auth.Config{Mode: "jwt", JWKS: "f"}, ":1", ""},
		{auth.Config{Mode: "basic"}, ":1", "want tokens, jwt or none"},
	} {
		err := c.cfg.Check(c.listen)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v on %s: %v, want %q", c.cfg, c.listen, err, c.want)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := auth.NewLimiter()
	now := time.Now()
	id := &auth.Identity{Principal: "p", RateLimit: 2}
	for i := 0; i < 2; i++ {
		if ok, _ := l.Allow(id, now); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.Allow(id, now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("third request: %v, wait %v", ok, wait)
	}
	if ok, _ := l.Allow(id, now.Add(600*time.Millisecond)); !ok {
		t.Fatal("refused after the bucket refilled")
	}
	// Another principal has its own bucket; no limit is no limit.
	if ok, _ := l.Allow(&auth.Identity{Principal: "q", RateLimit: 2}, now); !ok {
		t.Fatal("q limited by p's requests")
	}
	free := &auth.Identity{Principal: "free"}
	for i := 0; i < 1000; i++ {
		if ok, _ := l.Allow(free, now); !ok {
			t.Fatal("an unlimited principal was limited")
		}
	}
}
