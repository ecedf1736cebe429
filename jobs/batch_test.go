package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/internal/testenv"
)

// batchScript counts its runs and answers its argument.
var batchScript = redis.NewScript(`redis.call('INCR', KEYS[1]) return ARGV[1]`)

// privateRedis is a redis-server of the test's own: the tests below pause
// it, which would stall every other test on the shared one.
func privateRedis(t *testing.T) *redis.Client {
	r := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// roundTrips is how many round trips b has sent.
func (b *scriptBatch) roundTrips() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.trips
}

// queued is how many calls wait for a lane, and the lanes in flight.
func (b *scriptBatch) queued() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.lanes
}

// While both lanes wait on Redis, the calls that arrive queue and go in
// one pipeline; each gets its own answer and its own run, a cancelled
// sender's included.
func TestScriptBatchSharesRoundTrips(t *testing.T) {
	ctx := context.Background()
	rdb := privateRedis(t)
	if err := batchScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	// Scripts wait while writes are paused; CLIENT UNPAUSE is not a write.
	if err := rdb.Do(ctx, "CLIENT", "PAUSE", 30000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	unpaused := false
	unpause := func() {
		if !unpaused {
			unpaused = true
			if err := rdb.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Error(err)
			}
		}
	}
	defer unpause()
	var b scriptBatch
	const n = 32
	answers := make([]any, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	call := func(i int, ctx context.Context) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = b.run(ctx, rdb, batchScript, "test", []string{"runs"}, []any{fmt.Sprint("call", i)})
		}()
	}
	// The first sender's client goes away while its call waits on Redis.
	cancelled, cancel := context.WithCancel(ctx)
	call(0, cancelled)
	call(1, ctx)
	waitFor(t, "both lanes in flight", 10*time.Second, func() (bool, error) {
		_, lanes := b.queued()
		return lanes == batchLanes, nil
	})
	cancel()
	for i := 2; i < n; i++ {
		call(i, ctx)
	}
	waitFor(t, "the other calls queued", 10*time.Second, func() (bool, error) {
		q, _ := b.queued()
		return q == n-2, nil
	})
	unpause()
	wg.Wait()
	for i := range n {
		if errs[i] != nil || answers[i] != fmt.Sprint("call", i) {
			t.Errorf("call %d: answer %v, error %v", i, answers[i], errs[i])
		}
	}
	if runs, err := rdb.Get(ctx, "runs").Int(); err != nil || runs != n {
		t.Errorf("script ran %d times (%v), want %d", runs, err, n)
	}
	// Two single calls, then the queued ones together.
	if trips := b.roundTrips(); trips != 3 {
		t.Errorf("%d round trips for %d calls, want 3", trips, n)
	}
	if q, lanes := b.queued(); q != 0 || lanes != 0 {
		t.Errorf("after the calls: %d queued, %d lanes held", q, lanes)
	}
}

// A pipeline of calls whose scripts Redis no longer holds sends each
// call's own script's text; calls of two scripts share the round trip,
// each run by its own script once Redis holds both.
func TestScriptBatchAfterScriptFlush(t *testing.T) {
	ctx := context.Background()
	rdb := privateRedis(t)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	other := redis.NewScript(`redis.call('INCR', KEYS[1]) return 'other:' .. ARGV[1]`)
	var b scriptBatch
	for round, what := range []string{"after the flush", "with both scripts held"} {
		batch := []*batchCall{{script: batchScript, keys: []string{"runs"}, args: []any{"a"}}}
		for i, arg := range []string{"b", "c", "d"} {
			sc := batchScript
			if i == 1 {
				sc = other
			}
			batch = append(batch, &batchCall{script: sc, keys: []string{"runs"}, args: []any{arg}, done: make(chan struct{})})
		}
		b.lanes = 1 // as run leaves it for sendAll
		b.sendAll(ctx, rdb, batch)
		for i, want := range []string{"a", "b", "other:c", "d"} {
			if batch[i].err != nil || batch[i].res != want {
				t.Errorf("%s: call %d: answer %v, error %v", what, i, batch[i].res, batch[i].err)
			}
		}
		for _, c := range batch[1:] {
			select {
			case <-c.done:
			default:
				t.Errorf("%s: a call of the pipeline was not answered", what)
			}
		}
		if runs, err := rdb.Get(ctx, "runs").Int(); err != nil || runs != 4*(round+1) {
			t.Errorf("%s: scripts ran %d times (%v), want %d", what, runs, err, 4*(round+1))
		}
		if _, lanes := b.queued(); lanes != 0 {
			t.Errorf("%s: %d lanes held after the batch", what, lanes)
		}
	}
}

// A round trip that panics still answers the calls that rode with it and
// hands the lane to the calls waiting: none of them waits forever.
func TestScriptBatchPanicHandsOver(t *testing.T) {
	var b scriptBatch
	sender := &batchCall{script: batchScript, keys: []string{"k"}}
	rider := &batchCall{script: batchScript, keys: []string{"k"}, done: make(chan struct{})}
	waiting := &batchCall{script: batchScript, keys: []string{"k"}, done: make(chan struct{})}
	b.lanes, b.queue = 1, []*batchCall{waiting}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a round trip on a nil client did not panic")
			}
		}()
		b.sendAll(context.Background(), nil, []*batchCall{sender, rider})
	}()
	select {
	case <-rider.done:
	default:
		t.Fatal("the rider of the panicked round trip was not answered")
	}
	if rider.err != errBatchAborted || sender.err != errBatchAborted {
		t.Errorf("errors after the panic: sender %v, rider %v", sender.err, rider.err)
	}
	select {
	case <-waiting.done:
	default:
		t.Fatal("the waiting call was not handed the lane")
	}
	if len(waiting.send) != 1 || waiting.send[0] != waiting {
		t.Errorf("the waiting call was handed %d calls", len(waiting.send))
	}
	if q, lanes := b.queued(); q != 0 || lanes != 1 {
		t.Errorf("after the hand-over: %d queued, %d lanes", q, lanes)
	}
}

// On a Redis Cluster a pipeline's calls go to the nodes of their keys
// (one call's keys share a slot, as mvq's do), each sending the script's
// text where that node does not hold it.
func TestScriptBatchOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	ctx := context.Background()
	rdb, _ := clusterClient(t)
	// Keys on different slots, so (most likely) different nodes.
	keys := []string{"{a}:runs", "{b}:runs", "{c}:runs", "{mvq}:runs"}
	var b scriptBatch
	batch := []*batchCall{{script: batchScript, keys: keys[:1], args: []any{"0"}}}
	for i := 1; i < len(keys); i++ {
		batch = append(batch, &batchCall{script: batchScript, keys: keys[i : i+1], args: []any{fmt.Sprint(i)}, done: make(chan struct{})})
	}
	b.lanes = 1
	b.sendAll(ctx, rdb, batch)
	for i, c := range batch {
		if c.err != nil || c.res != fmt.Sprint(i) {
			t.Errorf("call %d: answer %v, error %v", i, c.res, c.err)
		}
		if runs, err := rdb.Get(ctx, keys[i]).Int(); err != nil || runs != 1 {
			t.Errorf("%s: script ran %d times (%v), want 1", keys[i], runs, err)
		}
	}
}
