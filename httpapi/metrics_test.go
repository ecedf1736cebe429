package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/telemetry"
)

// TestMetricLabelsBounded: requests with made-up methods and paths, sent
// before any authentication, add no series of their own: methods outside
// the standard ones share the label OTHER, paths without a route the
// label unmatched (the attack filled the SDK's series cap with 2,000
// made-up methods; 200 here).
func TestMetricLabelsBounded(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{ServiceName: "mvq-test", SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	c := setup(t, httpapi.Config{Middleware: []gin.HandlerFunc{httpapi.Metrics()}, Metrics: tel.MetricsHandler()})
	for i := range 200 {
		path := "/v1/table/t/query"
		if i%2 == 1 {
			path = fmt.Sprintf("/made/up/%d", i)
		}
		req, err := http.NewRequest(fmt.Sprintf("X%dMETHOD", i), c.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	methods, routes := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "mvq_http_requests_total{") {
			continue
		}
		if m := regexp.MustCompile(`method="([^"]*)"`).FindStringSubmatch(line); m != nil {
			methods[m[1]] = true
		}
		if m := regexp.MustCompile(`route="([^"]*)"`).FindStringSubmatch(line); m != nil {
			routes[m[1]] = true
		}
	}
	if !methods["OTHER"] || len(methods) > 2 { // OTHER, and GET for /metrics once scraped
		t.Errorf("%d method labels: want OTHER (and standard methods) only", len(methods))
	}
	for r := range routes {
		if r != "unmatched" && r != "/v1/table/:id/query" && r != "/metrics" {
			t.Errorf("route label %q", r)
		}
	}
	if !routes["unmatched"] {
		t.Errorf("route labels %v: no unmatched", routes)
	}
}
