package jobs

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Accepting refreshes is one create script per job (scriptCreate). Under
// many concurrent submitters the cost is the round trips, not the script:
// each is a write and a read on both ends of the connection. createBatch
// group-commits them: a submitter queues its call; if no batch is being
// sent it sends everything queued as one pipeline (itself included), and
// what queued meanwhile goes in the next pipeline, right after. A lone
// submitter sends at once (no wait for company); under load the batches
// grow with the concurrency. Each script keeps its own atomicity (a
// pipeline is not a transaction: one caller's script never depends on
// another's), each caller gets its own answer or error, and a call is
// sent exactly once: a script the server did not know yet (NOSCRIPT, the
// command did not run) is sent again alone with its text.
type createBatch struct {
	mu      sync.Mutex
	queue   []*createCall
	sending bool
}

type createCall struct {
	ctx  context.Context
	keys []string
	args []any
	done chan struct{}
	res  any
	err  error
}

// maxCreateBatch bounds one pipeline.
const maxCreateBatch = 128

// run runs scriptCreate with keys and args through the batch and returns
// its answer. The pipeline is sent with the values of the context of the
// caller that sends it but not its cancellation, so that one caller going
// away fails nobody else's create; a caller whose context is done before
// its call is queued returns at once, with nothing sent.
func (b *createBatch) run(ctx context.Context, rdb redis.UniversalClient, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &createCall{ctx: ctx, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.sending {
		b.mu.Unlock()
		// Queued: the sender sends it. Wait for the answer even if ctx
		// ends meanwhile, so that it is never unknown whether the job was
		// recorded.
		<-c.done
		return c.res, c.err
	}
	b.sending = true
	b.mu.Unlock()
	b.flush(context.WithoutCancel(ctx), rdb) // the queue was empty: c is in this batch
	<-c.done
	return c.res, c.err
}

// flush sends one batch off the queue (the caller has set sending); what
// queued meanwhile is sent by a goroutine of its own, so that the
// caller's answer does not wait for other callers' batches.
func (b *createBatch) flush(ctx context.Context, rdb redis.UniversalClient) {
	b.mu.Lock()
	n := min(len(b.queue), maxCreateBatch)
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.mu.Unlock()
	b.send(ctx, rdb, batch)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.queue, b.sending = nil, false
		return
	}
	go b.flush(ctx, rdb)
}

// send runs batch in one pipeline and answers each call.
func (b *createBatch) send(ctx context.Context, rdb redis.UniversalClient, batch []*createCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = scriptCreate.Run(ctx, rdb, c.keys, c.args...).Result()
		close(c.done)
		return
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = scriptCreate.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range batch {
		c.res, c.err = cmds[i].Result()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
			// Not run: send it again with the script's text (Run loads it).
			c.res, c.err = scriptCreate.Run(ctx, rdb, c.keys, c.args...).Result()
		}
		close(c.done)
	}
}
