package warehouse

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/internal/testenv"
)

// TestConditionalWritesProbe: file:// and mem:// pass by construction;
// in S3 mode the real server must honour If-None-Match: * (a second
// create is refused) and leave no probe object behind.
func TestConditionalWritesProbe(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"mem://", "file://" + t.TempDir(), testenv.Warehouse(t)} {
		wh, err := Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.CheckConditionalWrites(ctx); err != nil {
			t.Errorf("%s: %v", u, err)
		}
		it, err := wh.List(ctx, probeDir)
		if err != nil || len(it) != 0 {
			t.Errorf("%s: probe left %v (%v)", u, it, err)
		}
		wh.Close()
	}
}

// TestConditionalWritesRefused: a store that answers every PUT with 200
// whatever its If-None-Match (no S3 server that behaves so can run here,
// so this is a stand-in that only does PUT and DELETE) fails the probe
// with ErrNoConditionalWrites, naming the problem.
func TestConditionalWritesRefused(t *testing.T) {
	var conds []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.Method {
		case http.MethodPut:
			conds = append(conds, r.Header.Get("If-None-Match"))
			w.Header().Set("ETag", `"0"`)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNotImplemented)
		}
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "x")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "y")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	q := url.Values{"endpoint": {srv.URL}, "use_path_style": {"true"}, "region": {"us-east-1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wh, err := Open(ctx, "s3://bucket/p?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	err = wh.CheckConditionalWrites(ctx)
	if !errors.Is(err, ErrNoConditionalWrites) || !strings.Contains(err.Error(), "If-None-Match") {
		t.Fatalf("probe of a store without conditional writes: %v", err)
	}
	if len(conds) != 2 || conds[0] != "*" || conds[1] != "*" {
		t.Fatalf("PUTs carried If-None-Match %q, want * twice", conds)
	}
}
