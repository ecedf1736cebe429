package service_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/service"
)

func TestAdmissionConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := service.LoadConfig("api", nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QueryTimeout != 60*time.Second || cfg.QueryQueueWait != 2*time.Second || cfg.WriteTimeout != 60*time.Second {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg, err = service.LoadConfig("api", []string{"-write-timeout", "5m"}, env(map[string]string{
		"MVQ_QUERY_TIMEOUT": "90s", "MVQ_QUERY_QUEUE_WAIT": "500ms", "MVQ_WRITE_TIMEOUT": "10s",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QueryTimeout != 90*time.Second || cfg.QueryQueueWait != 500*time.Millisecond || cfg.WriteTimeout != 5*time.Minute {
		t.Fatalf("env and flags: %+v", cfg)
	}
	for _, bad := range []string{"0s", "-1s", "soon", "25h"} {
		_, err := service.LoadConfig("api", nil, env(map[string]string{"MVQ_QUERY_TIMEOUT": bad}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MVQ_QUERY_TIMEOUT") {
			t.Errorf("MVQ_QUERY_TIMEOUT=%s: %v", bad, err)
		}
	}
}

// TestJobCacheConfig: MVQ_JOB_CACHE_MAX_AGE defaults to the jobs package's
// age, 0 turns the cache off, and a malformed value is refused by name.
func TestJobCacheConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for v, want := range map[string]time.Duration{"": jobs.DefaultJobCacheMaxAge, "0": 0, "250ms": 250 * time.Millisecond} {
		cfg, err := service.LoadConfig("api", nil, env(map[string]string{"MVQ_JOB_CACHE_MAX_AGE": v}), io.Discard)
		if err != nil || cfg.JobCacheMaxAge != want {
			t.Errorf("MVQ_JOB_CACHE_MAX_AGE=%q: %v %v, want %v", v, cfg.JobCacheMaxAge, err, want)
		}
	}
	for _, bad := range []string{"-1s", "soon"} {
		_, err := service.LoadConfig("api", nil, env(map[string]string{"MVQ_JOB_CACHE_MAX_AGE": bad}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MVQ_JOB_CACHE_MAX_AGE") {
			t.Errorf("MVQ_JOB_CACHE_MAX_AGE=%s: %v", bad, err)
		}
	}
}

func TestConfigItemOutputBounds(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := service.LoadConfig("worker", nil, env(nil), io.Discard)
	if err != nil || cfg.MaxItemOutputRows != refresh.DefaultMaxItemOutputRows || cfg.MaxItemOutputBytes != refresh.DefaultMaxItemOutputBytes {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	cfg, err = service.LoadConfig("worker", nil, env(map[string]string{"MVQ_MAX_ITEM_OUTPUT_ROWS": "10", "MVQ_MAX_ITEM_OUTPUT_BYTES": "2048"}), io.Discard)
	if err != nil || cfg.MaxItemOutputRows != 10 || cfg.MaxItemOutputBytes != 2048 {
		t.Fatalf("from env: %+v, %v", cfg, err)
	}
	for _, bad := range []map[string]string{{"MVQ_MAX_ITEM_OUTPUT_ROWS": "0"}, {"MVQ_MAX_ITEM_OUTPUT_BYTES": "-1"}, {"MVQ_MAX_ITEM_OUTPUT_BYTES": "1GiB"}} {
		if _, err := service.LoadConfig("worker", nil, env(bad), io.Discard); err == nil || !strings.Contains(err.Error(), "MVQ_MAX_ITEM_OUTPUT_") {
			t.Fatalf("%v accepted: %v", bad, err)
		}
	}
}

// TestHTTPLimitsConfig: the API's limits come from the environment; 0
// turns the body deadline off, nonsense fails before anything listens.
func TestHTTPLimitsConfig(t *testing.T) {
	env := map[string]string{"MVQ_MAX_JSON_BODY_BYTES": "4096", "MVQ_BODY_READ_TIMEOUT": "0", "MVQ_BODY_MIN_BYTES_PER_SECOND": "1000",
		"MVQ_SPOOL_BUDGET_BYTES": "1000000", "MVQ_SPOOL_PRINCIPAL_BYTES": "1000", "MVQ_MAX_EVENT_STREAMS": "9",
		"MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL": "2", "MVQ_IDEMPOTENCY_MAX_KEYS": "7"}
	cfg, err := service.LoadConfig("api", nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := service.HTTPLimits{MaxJSONBodyBytes: 4096, BodyReadTimeout: -1, BodyMinBytesPerSecond: 1000, SpoolBudgetBytes: 1000000,
		SpoolPrincipalBytes: 1000, MaxEventStreams: 9, MaxEventStreamsPerPrincipal: 2, IdempotencyMaxKeys: 7}
	if cfg.HTTPLimits != want {
		t.Fatalf("limits %+v, want %+v", cfg.HTTPLimits, want)
	}
	for k, v := range map[string]string{"MVQ_MAX_JSON_BODY_BYTES": "0", "MVQ_MAX_EVENT_STREAMS": "-1", "MVQ_BODY_READ_TIMEOUT": "soon", "MVQ_IDEMPOTENCY_MAX_KEYS": "x"} {
		if _, err := service.LoadConfig("api", nil, func(key string) string {
			if key == k {
				return v
			}
			return ""
		}, io.Discard); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
}
