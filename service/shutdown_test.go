package service_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/httpapi"
	"github.com/mvq-dev/mvq/service"
)

// TestServeEndsStreamsOnShutdown: a stream (as job events are) ends when
// the server begins shutting down, so the drain does not wait out its
// timeout, while an ordinary request in flight still completes.
func TestServeEndsStreamsOnShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	slowStarted, slowDone := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := httpapi.StreamContext(r)
		defer cancel()
		w.Write([]byte("open\n"))
		w.(http.Flusher).Flush()
		<-ctx.Done()
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(slowStarted)
		<-slowDone
		w.Write([]byte("done"))
	})
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- service.Serve(ctx, ln, mux, nil, 30*time.Second, 0) }()
	base := "http://" + ln.Addr().String()

	resp, err := http.Get(base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if line, err := body.ReadString('\n'); err != nil || line != "open\n" {
		t.Fatalf("stream: %q %v", line, err)
	}
	slow := make(chan error, 1)
	go func() {
		r, err := http.Get(base + "/slow")
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != 200 || string(b) != "done" {
				err = fmt.Errorf("status %d: %q", r.StatusCode, b)
			}
		}
		slow <- err
	}()
	select {
	case <-slowStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached its handler")
	}

	start := time.Now()
	stop()
	// The stream ends once the shutdown begins…
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(body); ended <- err }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream stayed open after the shutdown began")
	}
	// …while the request in flight still gets its answer.
	close(slowDone)
	if err := <-slow; err != nil {
		t.Fatalf("the request in flight at shutdown: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the drain waited for the stream")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown took %v with a stream open (drain timeout 30 s)", d)
	}
}
