package service_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/service"
)

// TestAPIRefusesToStartWithoutAuth: the API needs MVQ_AUTH, and none on a
// non-loopback address also needs MVQ_ALLOW_UNAUTHENTICATED=true; both
// fail before anything opens or listens. mvq dev defaults to none, which
// the same rule keeps on loopback.
func TestAPIRefusesToStartWithoutAuth(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "MVQ_AUTH is required"},
		{map[string]string{"MVQ_AUTH": "none", "MVQ_LISTEN": "0.0.0.0:0"}, "MVQ_ALLOW_UNAUTHENTICATED=true"},
		{map[string]string{"MVQ_AUTH": "tokens"}, "MVQ_AUTH_TOKENS_FILE"},
		{map[string]string{"MVQ_AUTH": "jwt", "MVQ_AUTH_JWT_SECRET": "short"}, "at least 32 bytes"},
		{map[string]string{"MVQ_AUTH": "tokens", "MVQ_AUTH_TOKENS_FILE": t.TempDir() + "/missing.yaml", "MVQ_REDIS_URL": "redis://127.0.0.1:1/0", "MVQ_WAREHOUSE": "file://" + t.TempDir()}, "missing.yaml"},
	} {
		cfg, err := service.LoadConfig("api", nil, func(k string) string { return c.env[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		err = service.RunAPI(context.Background(), cfg, func(addr string) { t.Errorf("%v: the API listened on %s", c.env, addr) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.env, err, c.want)
		}
	}
	if _, err := service.LoadConfig("api", nil, func(k string) string {
		return map[string]string{"MVQ_ALLOW_UNAUTHENTICATED": "yes please"}[k]
	}, io.Discard); err == nil || !strings.Contains(err.Error(), "MVQ_ALLOW_UNAUTHENTICATED") {
		t.Errorf("a bad MVQ_ALLOW_UNAUTHENTICATED: %v", err)
	}
	cfg, _ := service.LoadConfig("mvq dev", nil, func(k string) string { return map[string]string{"MVQ_LISTEN": "0.0.0.0:0"}[k] }, io.Discard)
	if err := service.RunDev(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "MVQ_ALLOW_UNAUTHENTICATED") {
		t.Errorf("mvq dev on 0.0.0.0 without auth: %v", err)
	}
}
