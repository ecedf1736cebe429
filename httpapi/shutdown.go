package httpapi

import (
	"context"
	"net/http"
)

// A server shutting down drains its requests, but a stream (job events)
// never ends by itself: it would hold the drain to its timeout. The
// server's base context carries a channel closed when shutdown begins
// (WithShutdown), and streams end when it closes (StreamContext), while
// ordinary requests still finish.

type shutdownKey struct{}

// WithShutdown returns ctx carrying done, which the server closes when it
// begins shutting down (http.Server.RegisterOnShutdown); use it as the
// server's BaseContext.
func WithShutdown(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, shutdownKey{}, done)
}

// StreamContext is r's context, also ended when the server begins
// shutting down; call cancel when the stream is over.
func StreamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	done, _ := r.Context().Value(shutdownKey{}).(<-chan struct{})
	if done == nil {
		return ctx, cancel
	}
	go func() { // ends with the stream at the latest (cancel)
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
