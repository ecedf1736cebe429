package jobs

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mvq-dev/mvq/telemetry"
)

// scriptBatch runs scripts for concurrent callers in shared round
// trips (one round trip may carry calls of different scripts): a call
// that finds a lane free sends at once, alone (an idle service answers
// as fast as with a plain call); calls that arrive while
// batchLanes round trips are in flight wait, and the first sender to
// finish hands the lane to the first of them, which sends them all as one
// pipeline. Under load this saves each call its own write and read on the
// API's side and on Redis's (one accept's script round trip was a fifth
// of the API's CPU, BenchmarkAcceptVsPeer). Each call still gets its own
// answer and its own script run, atomic as before; nothing is answered
// before its script ran. The zero value is ready to use.
//
// A pipeline runs without its sender's cancellation (context.WithoutCancel):
// a client that goes away must not fail the calls of others that rode
// with it; the client's Redis timeouts bound it. A waiting call cannot
// leave early either (it may be handed the lane), so a cancelled caller
// waits for its own run as a plain call would have waited for its answer.
// With tracing on, the Redis client's span of a pipeline is in its
// sender's trace only; run's own span is in every caller's.
type scriptBatch struct {
	mu    sync.Mutex
	lanes int          // round trips in flight
	queue []*batchCall // calls waiting for a lane
	trips int64        // round trips sent (tests)
}

// batchLanes is how many round trips of one batch may be in flight at
// once: two lets one be encoded while Redis runs the other.
const batchLanes = 2

// maxBatch bounds the calls of one pipeline.
const maxBatch = 128

type batchCall struct {
	script *redis.Script
	keys   []string
	args   []any
	res    any
	err    error
	// done is closed once: when res and err are set, or when the call is
	// handed the lane (send is then set: the calls it sends, itself first).
	done chan struct{}
	send []*batchCall
	rode int // the calls of its round trip
}

// run runs script with keys and args in one of b's round trips and
// returns its answer, as script.Run(ctx, rdb, keys, args...).Result().
// With spans recorded, the call has a span of its own (named what), in
// every caller's trace, with the calls of its round trip.
func (b *scriptBatch) run(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, what string, keys []string, args []any) (any, error) {
	c := &batchCall{script: script, keys: keys, args: args}
	if telemetry.Recording() {
		var span trace.Span
		ctx, span = tracer.Start(ctx, what, trace.WithSpanKind(trace.SpanKindClient))
		defer func() {
			span.SetAttributes(attribute.Int("mvq.redis.round_trip_calls", c.rode))
			if c.err != nil {
				span.SetStatus(codes.Error, c.err.Error())
			}
			span.End()
		}()
	}
	b.mu.Lock()
	if b.lanes < batchLanes {
		b.lanes++
		b.mu.Unlock()
		b.sendAll(ctx, rdb, []*batchCall{c})
		return c.res, c.err
	}
	c.done = make(chan struct{})
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	<-c.done
	if c.send != nil {
		b.sendAll(ctx, rdb, c.send)
	}
	return c.res, c.err
}

// sendAll runs the calls of batch (its sender's first) in one round trip,
// answers the others and hands the lane on to the calls waiting, or
// frees it.
func (b *scriptBatch) sendAll(ctx context.Context, rdb redis.UniversalClient, batch []*batchCall) {
	// The lane is handed on even if the round trip panics: calls waiting
	// must not wait forever, and those of this batch get an error.
	for _, c := range batch {
		c.res, c.err, c.rode = nil, errBatchAborted, len(batch)
	}
	defer b.handOver(batch)
	ctx = context.WithoutCancel(ctx)
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = c.script.Run(ctx, rdb, c.keys, c.args...).Result()
	} else {
		cmds := make([]*redis.Cmd, len(batch))
		// Pipelined's own error is each command's; they are read below.
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range batch {
				cmds[i] = c.script.EvalSha(ctx, p, c.keys, c.args...)
			}
			return nil
		})
		for i, c := range batch {
			c.res, c.err = cmds[i].Result()
			if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
				// Redis lost its script cache (a restart, SCRIPT FLUSH):
				// Run sends the script's text.
				c.res, c.err = c.script.Run(ctx, rdb, c.keys, c.args...).Result()
			}
		}
	}
}

// errBatchAborted is the answer of a call whose round trip did not finish.
var errBatchAborted = errors.New("script batch: the round trip was aborted")

// handOver answers the calls of batch but its sender and hands the lane
// to the calls waiting, or frees it.
func (b *scriptBatch) handOver(batch []*batchCall) {
	b.mu.Lock()
	b.trips++
	n := min(len(b.queue), maxBatch)
	var next []*batchCall
	if n > 0 {
		next = make([]*batchCall, n)
		copy(next, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
	} else {
		b.lanes--
	}
	b.mu.Unlock()
	for _, c := range batch[1:] {
		close(c.done)
	}
	if next != nil {
		next[0].send = next
		close(next[0].done)
	}
}
