package jobs

import (
	"context"
	"errors"
	"sync"
	"time"
)

// loop runs a service's periodic work in one goroutine: start begins it,
// stop ends it and waits for the current round. The worker's services
// (Heartbeater, Canceller, Rescuer, Janitor) are built on it.
type loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

var errStarted = errors.New("jobs: service already started")

// start runs fn(ctx) in a goroutine until stop; fn should return when ctx
// ends.
func (l *loop) start(ctx context.Context, fn func(ctx context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return errStarted
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		fn(ctx)
	}(l.done)
	return nil
}

// stop ends the goroutine and waits for it, or for ctx to end first
// (ctx.Err()). Stopping a loop never started, or stopped, is a no-op.
func (l *loop) stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// every calls fn now and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
