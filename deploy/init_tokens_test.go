package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/auth"
)

// runInitTokens runs init-tokens.sh (what the compose stack's tokens-init
// runs at first start) on dir with the given extra environment.
func runInitTokens(t *testing.T, dir string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", "init-tokens.sh")
	cmd.Env = append(os.Environ(), append([]string{"MVQ_TOKENS_DIR=" + dir, "MVQ_ADMIN_TOKEN="}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestInitTokens: the compose stack's admin token is made at first start,
// differs between stacks, is stored only as its SHA-256, authenticates as
// an admin through the real tokens authenticator, and survives a restart;
// an operator's own MVQ_ADMIN_TOKEN replaces it, and a short one is
// refused.
func TestInitTokens(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	ctx := context.Background()
	login := func(dir, token string) *auth.Identity {
		t.Helper()
		a, err := auth.New(ctx, auth.Config{Mode: auth.ModeTokens, TokensFile: filepath.Join(dir, "tokens.yaml")})
		if err != nil {
			t.Fatalf("the written tokens file does not load: %v", err)
		}
		defer a.Close()
		id, err := a.Authenticate(ctx, token)
		if err != nil {
			return nil
		}
		return id
	}
	generated := func(dir string) string {
		t.Helper()
		if out, err := runInitTokens(t, dir); err != nil {
			t.Fatalf("init-tokens.sh: %v\n%s", err, out)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "admin-token"))
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "admin-token")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("admin-token: %v %v, want mode 0600", fi.Mode(), err)
		}
		return strings.TrimSpace(string(raw))
	}

	a, b := t.TempDir(), t.TempDir()
	tokA, tokB := generated(a), generated(b)
	if len(tokA) < 64 || tokA == tokB {
		t.Fatalf("generated tokens %q and %q: want 32 random bytes each", tokA, tokB)
	}
	yml, _ := os.ReadFile(filepath.Join(a, "tokens.yaml"))
	if strings.Contains(string(yml), tokA) {
		t.Fatal("tokens.yaml holds the token itself, not its SHA-256")
	}
	id := login(a, tokA)
	if id == nil || id.Principal != "admin" {
		t.Fatalf("the generated token does not authenticate: %+v", id)
	}
	if login(a, tokB) != nil {
		t.Fatal("another stack's token authenticates")
	}
	// A restart keeps the token.
	if out, err := runInitTokens(t, a); err != nil || !strings.Contains(out, "kept") {
		t.Fatalf("second start: %v %s", err, out)
	}
	if generated(a) != tokA || login(a, tokA) == nil {
		t.Fatal("a restart changed the admin token")
	}

	// The operator's own token: used as given, no admin-token file left.
	own := strings.Repeat("operator-chosen-", 3)
	if out, err := runInitTokens(t, a, "MVQ_ADMIN_TOKEN="+own); err != nil {
		t.Fatalf("MVQ_ADMIN_TOKEN: %v %s", err, out)
	}
	if login(a, own) == nil || login(a, tokA) != nil {
		t.Fatal("MVQ_ADMIN_TOKEN did not replace the generated token")
	}
	if _, err := os.Stat(filepath.Join(a, "admin-token")); !os.IsNotExist(err) {
		t.Errorf("admin-token left beside an operator's token: %v", err)
	}
	if out, err := runInitTokens(t, t.TempDir(), "MVQ_ADMIN_TOKEN=short"); err == nil || !strings.Contains(out, "32") {
		t.Errorf("a short MVQ_ADMIN_TOKEN: %v %s", err, out)
	}
}
