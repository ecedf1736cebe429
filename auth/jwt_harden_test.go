package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mvq-dev/mvq/auth"
)

// TestJWTRefusesCritAndStringDates: tokens signed with the right key are
// still refused when they carry a crit header (an extension mvq does not
// implement, RFC 7515 4.1.11) or give exp, nbf or iat as a string, which
// the JWT library reads as a number.
func TestJWTRefusesCritAndStringDates(t *testing.T) {
	ctx := context.Background()
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWTSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	hs := func(c jwt.MapClaims, hdr map[string]any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
		for k, v := range hdr {
			tok.Header[k] = v
		}
		s, err := tok.SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	far := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for name, c := range map[string]struct {
		tok, want string
	}{
		"crit":             {hs(claims("a", time.Hour, "b64x", true), map[string]any{"crit": []string{"b64x"}}), "crit"},
		"empty crit":       {hs(claims("a", time.Hour), map[string]any{"crit": []string{}}), "crit"},
		"string exp":       {hs(jwt.MapClaims{"sub": "a", "exp": far}, nil), "exp"},
		"string nbf":       {hs(claims("a", time.Hour, "nbf", "0"), nil), "nbf"},
		"string iat":       {hs(claims("a", time.Hour, "iat", "0"), nil), "iat"},
		"object exp":       {hs(jwt.MapClaims{"sub": "a", "exp": map[string]any{"n": 1}}, nil), ""},
		"bool iat":         {hs(claims("a", time.Hour, "iat", true), nil), ""},
		"exp far, as text": {hs(jwt.MapClaims{"sub": "a", "exp": "99999999999"}, nil), "exp"},
	} {
		_, err := a.Authenticate(ctx, c.tok)
		var ae *auth.Error
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an auth error containing %q", name, err, c.want)
		}
	}
	// Numeric dates still pass.
	if _, err := a.Authenticate(ctx, hs(claims("a", time.Hour, "iat", time.Now().Unix(), "nbf", time.Now().Add(-time.Minute).Unix()), nil)); err != nil {
		t.Fatalf("numeric exp, nbf, iat: %v", err)
	}
}

// TestJWTAudienceAndIssuer: with MVQ_AUTH_JWT_AUDIENCE and MVQ_AUTH_JWT_ISSUER set,
// a token for another audience or from another issuer, or one without
// the claim, is refused; without them, neither is checked.
func TestJWTAudienceAndIssuer(t *testing.T) {
	ctx := context.Background()
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWTSecret: secret, Audience: "mvq-prod", Issuer: "https://idp.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tok := func(extra ...any) string {
		return sign(t, jwt.SigningMethodHS256, []byte(secret), "", claims("alice", time.Hour, extra...))
	}
	if id, err := a.Authenticate(ctx, tok("aud", "mvq-prod", "iss", "https://idp.example")); err != nil || id.Principal != "alice" {
		t.Fatalf("right aud and iss: %v %v", id, err)
	}
	if _, err := a.Authenticate(ctx, tok("aud", []string{"other", "mvq-prod"}, "iss", "https://idp.example")); err != nil {
		t.Fatalf("aud list naming the API: %v", err)
	}
	for name, c := range map[string]struct {
		tok, want string
	}{
		"other audience": {tok("aud", "mvq-staging", "iss", "https://idp.example"), "aud"},
		"no audience":    {tok("iss", "https://idp.example"), "aud"},
		"other issuer":   {tok("aud", "mvq-prod", "iss", "https://evil.example"), "iss"},
		"no issuer":      {tok("aud", "mvq-prod"), "iss"},
	} {
		_, err := a.Authenticate(ctx, c.tok)
		var ae *auth.Error
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an auth error containing %q", name, err, c.want)
		}
	}
	// Unset: not checked.
	b, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWTSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Authenticate(ctx, tok("aud", "anything", "iss", "anyone")); err != nil {
		t.Fatal(err)
	}
	if err := (auth.Config{Mode: auth.ModeTokens, TokensFile: "f", Audience: "x"}).Check(":1"); err == nil || !strings.Contains(err.Error(), "MVQ_AUTH_JWT_AUDIENCE") {
		t.Errorf("audience with tokens mode: %v", err)
	}
}

// TestJWKSOverPlainHTTP: a JWKS URL over http:// is refused unless its
// host is loopback (a keys server on the path could mint any token), at
// config check and at open, and an https or loopback JWKS may not
// redirect to a plain-http host.
func TestJWKSOverPlainHTTP(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"http://idp.example/jwks.json", "http://10.0.0.5:8080/keys", "http://[2001:db8::1]/k", "http://127.0.0.1.nip.io/k"} {
		cfg := auth.Config{Mode: auth.ModeJWT, JWKS: u}
		if err := cfg.Check(":2333"); err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("Check %s: %v", u, err)
		}
		if a, err := auth.New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "https") {
			if a != nil {
				a.Close()
			}
			t.Errorf("New %s: %v", u, err)
		}
	}
	for _, u := range []string{"https://idp.example/jwks.json", "http://127.0.0.1:9000/k", "http://localhost/k", "http://[::1]/k", "/etc/mvq/jwks.json"} {
		if err := (auth.Config{Mode: auth.ModeJWT, JWKS: u}).Check(":2333"); err != nil {
			t.Errorf("Check %s: %v", u, err)
		}
	}
	// A loopback JWKS server that redirects off the machine over http.
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	doc := jwks(t, map[string]any{"k": &k.PublicKey})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://192.0.2.1/jwks.json", http.StatusFound)
			return
		}
		w.Write([]byte(doc))
	}))
	defer srv.Close()
	if a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWKS: srv.URL + "/redirect"}); err == nil || !strings.Contains(err.Error(), "https") {
		if a != nil {
			a.Close()
		}
		t.Errorf("redirect to plain http: %v", err)
	}
	a, err := auth.New(ctx, auth.Config{Mode: auth.ModeJWT, JWKS: srv.URL + "/jwks.json"})
	if err != nil {
		t.Fatalf("loopback http JWKS: %v", err)
	}
	a.Close()
}
