package refresh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/table"
)

// TestCPUItemsBoundsApplying: with CPUItems 1, a second work item waits
// while the first one chunks, and chunks once the
// first is done (both items' rows land); a waiting item whose context
// ends gives up without taking a token. With CPUItems 2 two items chunk
// at once.
func TestCPUItemsBoundsApplying(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 2} {
		b := setup(t, table.Options{})
		b.e = NewEngineWith(b.cat, EngineOptions{CPUItems: slots})
		b.source(t, frag0, frag1)
		id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)})
		p := b.plan(t, id, "j1", Options{SourceTaskSize: 1})
		if len(p.Items) < 3 {
			t.Fatalf("plan has %d items, want at least 3", len(p.Items))
		}
		var inside, most atomic.Int32
		entered := make(chan struct{}, 8)
		hold := make(chan struct{})
		b.e.chunkHook = func() {
			n := inside.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			entered <- struct{}{}
			<-hold
			inside.Add(-1)
		}
		waiting := make(chan struct{}, 8)
		b.e.cpuWaitHook = func() { waiting <- struct{}{} }
		wait := waiter(t, fmt.Sprintf("CPUItems %d: ", slots))
		var wg sync.WaitGroup
		results := make([]ItemResult, 2)
		errList := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errList[i] = b.e.Expand(b.ctx, p, i)
			}()
		}
		wait(entered, "the first item to chunk")
		if slots == 1 {
			wait(waiting, "the second item to wait for a token")
			if n := inside.Load(); n != 1 {
				t.Fatalf("%d items chunking with CPUItems 1", n)
			}
			// A third item whose context ends while it waits gives up.
			cctx, cancel := context.WithCancel(b.ctx)
			done := make(chan error, 1)
			go func() { _, err := b.e.Expand(cctx, p, 2); done <- err }()
			wait(waiting, "the third item to wait")
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiting item: err = %v, want context.Canceled", err)
			}
		} else {
			wait(entered, "the second item to chunk beside the first")
		}
		close(hold)
		wg.Wait()
		for i, err := range errList {
			if err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
			if results[i].RowsWritten == 0 {
				t.Fatalf("item %d wrote no rows", i)
			}
		}
		if got := most.Load(); got != int32(slots) {
			t.Fatalf("at most %d items chunked at once, want %d", got, slots)
		}
		if n := len(b.e.cpu); n != 0 {
			t.Fatalf("%d CPU tokens still held after every item ended", n)
		}
	}
}

// TestCPUHoldLeavesForUserCode: an item that calls user code gives its
// CPU token up for the call, so another item applies meanwhile; after the
// call it takes a token again, waiting while the other holds it. Two
// calls of one item in flight share one leave, and the token comes back
// when the last returns. A wait that its context ends fails.
func TestCPUHoldLeavesForUserCode(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	e := NewEngineWith(b.cat, EngineOptions{CPUItems: 1})
	ctx, a, _, err := e.holdCPU(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	back1 := leaveCPU(ctx)
	back2 := leaveCPU(ctx)
	if n := len(e.cpu); n != 0 {
		t.Fatalf("%d tokens held while the item waits on user code", n)
	}
	_, other, _, err := e.holdCPU(b.ctx) // another item applies meanwhile
	if err != nil {
		t.Fatal(err)
	}
	if err := back1(); err != nil { // the second call is still out
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	e.cpuWaitHook = func() { waiting <- struct{}{} }
	backed := make(chan error, 1)
	go func() { backed <- back2() }()
	select {
	case <-waiting:
	case err := <-backed:
		t.Fatalf("the item took a token while the other item held the only one (%v)", err)
	case <-time.After(time.Minute):
		t.Fatal("the item never waited for a token")
	}
	other.release()
	select {
	case err := <-backed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the item did not take the token back")
	}
	if n := len(e.cpu); n != 1 {
		t.Fatalf("%d tokens held after the item came back, want 1", n)
	}
	a.release()
	a.release() // once only
	if n := len(e.cpu); n != 0 {
		t.Fatalf("%d tokens held after the item ended", n)
	}

	// A wait for the token back that the context ends.
	cctx, cancel := context.WithCancel(b.ctx)
	cctx, c, _, err := e.holdCPU(cctx)
	if err != nil {
		t.Fatal(err)
	}
	back := leaveCPU(cctx)
	_, blocker, _, err := e.holdCPU(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := back(); !errors.Is(err, context.Canceled) {
		t.Fatalf("back after cancel: %v", err)
	}
	c.release()
	blocker.release()
	if n := len(e.cpu); n != 0 {
		t.Fatalf("%d tokens held at the end", n)
	}
}

// TestItemSyncsFilesAfterGivingUpCPU: a work item syncs its data files
// after it gives its CPU token up (a sync waits on the disk, and another
// item can encode meanwhile), every file it wrote, before Expand returns
// it; the files are whole when synced.
func TestItemSyncsFilesAfterGivingUpCPU(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{MaxRowsPerFragment: 1})
	b.e = NewEngineWith(b.cat, EngineOptions{CPUItems: 1})
	b.source(t, frag0, frag1)
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)})
	p := b.plan(t, id, "j1", Options{SourceTaskSize: 2, MaxRowsPerFragment: 1})
	var synced []string
	var held int
	b.e.syncHook = func(rels []string) {
		held = len(b.e.cpu)
		synced = append(synced, rels...)
	}
	res, err := b.e.Expand(b.ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("%d CPU tokens held while the item synced its files", held)
	}
	if len(res.Fragments) < 2 {
		t.Fatalf("the item wrote %d files, want at least 2 (max_rows_per_fragment 1)", len(res.Fragments))
	}
	var want []string
	for _, f := range res.Fragments {
		want = append(want, f.Path)
	}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %q, want the item's files %q", synced, want)
	}
}

// TestItemWaitingForCPUHoldsNoLocalRows: with CPUItems 1 and the token
// taken, a second work item waits for it before it reads its rows from a
// local warehouse (decoding is CPU work; a waiting item holds nothing),
// and after reading them from an object store (the fetch waits on the
// network while others compute).
func TestItemWaitingForCPUHoldsNoLocalRows(t *testing.T) {
	t.Parallel()
	b := setup(t, table.Options{})
	b.e = NewEngineWith(b.cat, EngineOptions{CPUItems: 1})
	b.source(t, frag0, frag1)
	id := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`, UDTFSpec: chunkerEntry(fixed4)})
	p := b.plan(t, id, "j1", Options{SourceTaskSize: 1})
	var reads atomic.Int32
	b.e.readHook = func() { reads.Add(1) }
	entered, hold := make(chan struct{}, 2), make(chan struct{})
	var once sync.Once
	b.e.chunkHook = func() {
		once.Do(func() { entered <- struct{}{}; <-hold })
	}
	waiting := make(chan struct{}, 2)
	b.e.cpuWaitHook = func() { waiting <- struct{}{} }
	wait := waiter(t, "")
	errc := make(chan error, 2)
	go func() { _, err := b.e.Expand(b.ctx, p, 0); errc <- err }()
	wait(entered, "the first item to chunk")
	go func() { _, err := b.e.Expand(b.ctx, p, 1); errc <- err }()
	wait(waiting, "the second item to wait for the token")
	local := b.cat.Warehouse().Dir() != ""
	want := int32(1) // local: the second item has not read
	if !local {
		want = 2 // an object store: it read first
	}
	if got := reads.Load(); got != want {
		t.Fatalf("%d items read their rows while the second waited for the token, want %d (local warehouse: %v)", got, want, local)
	}
	close(hold)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.e.cpu); n != 0 {
		t.Fatalf("%d CPU tokens still held after both items ended", n)
	}
}

// waiter returns a wait for a signal on ch that fails t (its message
// starting with prefix) when a minute has passed since waiter was called.
func waiter(t *testing.T, prefix string) func(ch chan struct{}, what string) {
	deadline := time.After(time.Minute)
	return func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%stimed out waiting for %s", prefix, what)
		}
	}
}
