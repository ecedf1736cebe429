package service_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/service"
)

func TestCatalogConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := service.LoadConfig("api", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CatalogPrefix != "mvq" || cfg.AllowedLocations.Len() != 0 {
		t.Fatalf("defaults: prefix %q, allowed %v", cfg.CatalogPrefix, cfg.AllowedLocations)
	}
	cfg, err = service.LoadConfig("api", nil, env(map[string]string{
		"MVQ_CATALOG_PREFIX": "lakehouse", "MVQ_ALLOWED_LOCATIONS": "file:///lake, s3://bucket/ice, team_a=s3://bucket/a",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CatalogPrefix != "lakehouse" || cfg.AllowedLocations.String() != "file:///lake,s3://bucket/ice,team_a=s3://bucket/a" {
		t.Fatalf("from the environment: prefix %q, allowed %v", cfg.CatalogPrefix, cfg.AllowedLocations)
	}
	for k, v := range map[string]string{"MVQ_CATALOG_PREFIX": "a/b", "MVQ_ALLOWED_LOCATIONS": "relative/lake"} {
		if _, err := service.LoadConfig("api", nil, env(map[string]string{k: v}), io.Discard); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
}

// TestJWTConfig: MVQ_AUTH_JWT_AUDIENCE and MVQ_AUTH_JWT_ISSUER reach the
// authenticator's settings, and a JWKS URL over plain http to a host that
// is not loopback fails the API's configuration check.
func TestJWTConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := service.LoadConfig("api", nil, env(map[string]string{
		"MVQ_AUTH": "jwt", "MVQ_AUTH_JWKS": "http://idp.example/jwks.json",
		"MVQ_AUTH_JWT_AUDIENCE": "mvq-prod", "MVQ_AUTH_JWT_ISSUER": "https://idp.example",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth.Audience != "mvq-prod" || cfg.Auth.Issuer != "https://idp.example" {
		t.Fatalf("auth config %+v", cfg.Auth)
	}
	if err := cfg.Auth.Check("127.0.0.1:2333"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("http JWKS to idp.example: %v", err)
	}
}

// TestStorageOptionsConfig: MVQ_STORAGE_OPTIONS_FILE is loaded and
// checked before the API starts; a missing or malformed file fails the
// configuration, naming the variable.
func TestStorageOptionsConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("storage_options:\n  - principal: alice\n    options: {aws_region: us-east-1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("storage_options:\n  - options: {aws_region: us-east-1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := service.LoadConfig("api", nil, env(map[string]string{"MVQ_STORAGE_OPTIONS_FILE": good}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.StorageOptions.For("alice", []string{"docs", "t"}); got["aws_region"] != "us-east-1" {
		t.Fatalf("loaded options for alice: %v", got)
	}
	for _, p := range []string{bad, filepath.Join(dir, "missing.yaml")} {
		if _, err := service.LoadConfig("api", nil, env(map[string]string{"MVQ_STORAGE_OPTIONS_FILE": p}), io.Discard); err == nil || !strings.Contains(err.Error(), "MVQ_STORAGE_OPTIONS_FILE") {
			t.Errorf("MVQ_STORAGE_OPTIONS_FILE=%s: %v", p, err)
		}
	}
}
