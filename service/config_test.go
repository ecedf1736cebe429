package service_test

import (
	"io"
	"strings"
	"testing"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/service"
)

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
