package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mvq-dev/mvq/jobs"
)

// TestWaitShowsEveryEventBeforeTheEnd: --wait prints every event the
// stream carried, even when the whole stream, end included, arrives
// before the first event is shown. The server here replays a fixed
// stream, because a real job cannot be made to finish between two reads
// of the client on demand; the event shapes are the ones jobs.Event
// encodes.
func TestWaitShowsEveryEventBeforeTheEnd(t *testing.T) {
	const n = 40
	var ended atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/job/j1":
			state := jobs.StatePending
			if ended.Load() {
				state = jobs.StateDone
			}
			json.NewEncoder(w).Encode(jobs.Job{ID: "j1", State: state})
		case "/v1/job/j1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			var b bytes.Buffer
			for i := range n {
				e := jobs.Event{ID: fmt.Sprint(i), JobID: "j1", Type: jobs.EventProgress, State: jobs.StateRunning, Phase: "expanding",
					Message: fmt.Sprintf("step %d", i)}
				data, _ := json.Marshal(e)
				fmt.Fprintf(&b, "id: %d\ndata: %s\n\n", i, data)
			}
			data, _ := json.Marshal(jobs.Event{ID: "end", JobID: "j1", Type: jobs.EventState, State: jobs.StateDone})
			fmt.Fprintf(&b, "id: end\ndata: %s\n\n", data)
			ended.Store(true)
			w.Write(b.Bytes())
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	for round := range 20 {
		ended.Store(false)
		var stderr bytes.Buffer
		a := &app{ctx: context.Background(), getenv: func(string) string { return "" }, stderr: &stderr, url: srv.URL}
		if err := a.wait("j1", waitFlags{}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range n {
			if !strings.Contains(stderr.String(), fmt.Sprintf("step %d\n", i)) {
				t.Fatalf("round %d: the output lacks event %d:\n%s", round, i, stderr.String())
			}
		}
	}
}
