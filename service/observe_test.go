package service_test

import (
	"bufio"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mvq-dev/mvq/deploy"
)

// otlpReceiver is an in-test OTLP/HTTP trace receiver.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		svc := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				svc = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, receivedSpan{service: svc, span: s})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *otlpReceiver) trace(id string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if hex.EncodeToString(s.span.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

func intAttr(s *tracepb.Span, key string) (int64, bool) {
	for _, a := range s.Attributes {
		if a.Key == key {
			if v, ok := a.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return v.IntValue, true
			}
			return 0, true
		}
	}
	return 0, false
}

// TestTraceAcrossProcesses: a refresh through the API (this process) and a
// worker (another process), both exporting OTLP to a receiver in the test,
// is one trace: the HTTP span is the root; plan, work items and commit are
// its children across the queue; read/apply/write and table.commit hang
// below them with row counts.
func TestTraceAcrossProcesses(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close) // after the processes exporting to it are gone
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	e := start(t, 1, "default")
	e.post("/v1/table/src/create", docs(0, 12), nil)
	e.createChunkerView("v", "src")
	id := e.refresh("v", `{"source_task_size": 4, "concurrency": 2}`)
	j := e.mustDone(id)
	tid, _ := j["trace_id"].(string)
	if len(tid) != 32 {
		t.Fatalf("job trace_id %q", tid)
	}
	var spans []receivedSpan
	// Every span the job makes, not only the commit's: a work item's span
	// ends after its task returns, which can be after the commit it
	// enqueued has finished and been exported.
	waitFor(t, 30*time.Second, "the job's spans", func() bool {
		spans = recv.trace(tid)
		n := map[string]int{}
		for _, s := range spans {
			n[s.span.Name]++
		}
		return n["table.commit"] >= 1 && n["refresh.commit"] >= 1 && n["refresh.plan"] >= 1 &&
			n["refresh.workitem"] >= 3 && n["refresh.read"] >= 3 && n["refresh.apply"] >= 3 &&
			n["refresh.write"] >= 3 && n["POST /v1/materialized_view/:id/refresh"] >= 1
	})
	byID := map[string]receivedSpan{}
	count := map[string]int{}
	var root receivedSpan
	for _, s := range spans {
		byID[hex.EncodeToString(s.span.SpanId)] = s
		count[s.span.Name]++
		if len(s.span.ParentSpanId) == 0 {
			root = s
		}
	}
	if root.span == nil || root.span.Name != "POST /v1/materialized_view/:id/refresh" || root.service != "mvq-api" {
		t.Fatalf("root span: %q from %s", root.span.GetName(), root.service)
	}
	parent := func(s receivedSpan) receivedSpan { return byID[hex.EncodeToString(s.span.ParentSpanId)] }
	items := 0
	for _, s := range spans {
		switch s.span.Name {
		case "refresh.plan", "refresh.commit", "refresh.workitem":
			if s.service != "mvq-worker" || parent(s).span != root.span {
				t.Errorf("%s: service %s, parent %v; want mvq-worker under the HTTP span", s.span.Name, s.service, parent(s).span.GetName())
			}
			if s.span.Name == "refresh.workitem" {
				items++
				if _, ok := intAttr(s.span, "mvq.item_index"); !ok {
					t.Errorf("work item span without mvq.item_index")
				}
				found := false
				for _, a := range s.span.Attributes {
					found = found || a.Key == "messaging.queue_wait_ms"
				}
				if !found {
					t.Errorf("work item span without queue wait")
				}
			}
		case "refresh.read", "refresh.apply", "refresh.write":
			if parent(s).span.GetName() != "refresh.workitem" {
				t.Errorf("%s under %q", s.span.Name, parent(s).span.GetName())
			}
			if n, ok := intAttr(s.span, "mvq.rows"); !ok || (s.span.Name == "refresh.read" && n == 0) {
				t.Errorf("%s rows attribute %d %v", s.span.Name, n, ok)
			}
			if n, _ := intAttr(s.span, "mvq.bytes"); s.span.Name != "refresh.apply" && n == 0 {
				t.Errorf("%s without a byte count", s.span.Name)
			}
		case "table.commit":
			if p := parent(s).span.GetName(); p != "refresh.commit" {
				t.Errorf("table.commit under %q", p)
			}
		case "jobs.create":
			// The create script's own span, in the job's trace whether its
			// round trip was shared or not.
			if s.service != "mvq-api" || parent(s).span != root.span {
				t.Errorf("jobs.create: service %s, parent %q; want mvq-api under the HTTP span", s.service, parent(s).span.GetName())
			}
			if n, ok := intAttr(s.span, "mvq.redis.round_trip_calls"); !ok || n < 1 {
				t.Errorf("jobs.create without its round trip's calls (%d %v)", n, ok)
			}
		}
	}
	if items != 3 || count["jobs.create"] != 1 || count["refresh.plan"] != 1 || count["refresh.commit"] != 1 || count["refresh.read"] != 3 || count["table.commit"] != 1 {
		t.Fatalf("span counts %v", count)
	}
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s`)

// scrape returns the metric names of a /metrics page and the label names
// seen on each.
func scrape(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]bool{}
		}
		for _, kv := range strings.Split(m[3], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				out[m[1]][strings.TrimSpace(k)] = true
			}
		}
	}
	return out
}

// TestDashboardMetricsExist: every metric and label the dashboards and
// alert rules query is served by the running API and worker.
func TestDashboardMetricsExist(t *testing.T) {
	e := start(t, 1, "default")
	e.post("/v1/table/src/create", docs(0, 20), nil)
	e.createChunkerView("v", "src")
	e.mustDone(e.refresh("v", `{"source_task_size": 5}`))
	// Concurrent inserts make commit conflicts; a failed refresh and a
	// cancelled one give the other job states.
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); e.post("/v1/table/src/insert", docs(100+i, 101+i), nil) }()
	}
	wg.Wait()
	id := e.refresh("v", `{"source_task_size": 1, "concurrency": 1}`)
	e.post("/v1/jobs/cancel", map[string]any{"job_id": id}, nil)
	e.wait(id)

	ready, _ := os.ReadFile(e.workerReady[0])
	// The staleness gauge has a series once the reporter's pass (every
	// 15s, the first at worker start, before any view existed) has seen a
	// view.
	waitFor(t, 60*time.Second, "the staleness gauge", func() bool {
		return scrape(t, "http://"+string(ready)+"/metrics")["mvq_view_staleness_seconds"] != nil
	})
	got := scrape(t, e.api+"/metrics")
	for name, labels := range scrape(t, "http://"+string(ready)+"/metrics") {
		if got[name] == nil {
			got[name] = map[string]bool{}
		}
		for l := range labels {
			got[name][l] = true
		}
	}
	want, err := deploy.DashboardMetrics()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for name, labels := range want {
		have, ok := got[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		for _, l := range labels {
			if !have[l] {
				missing = append(missing, fmt.Sprintf("%s{%s}", name, l))
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("dashboards and alerts query series the binaries do not serve: %v", missing)
	}
}
