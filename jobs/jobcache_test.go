package jobs

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// cacheBundle is an API client whose cache keeps answers for maxAge (long:
// only an announcement can refresh them) next to a second client on the
// same Redis, the other processes whose changes it must see.
func cacheBundle(t *testing.T, maxAge time.Duration) (*bundle, *Client) {
	t.Helper()
	fe := newFakeEngine()
	fe.addSource([]string{"cv"}, 10)
	b := setup(t, fe)
	registerIdleWorker(t, b)
	api := newClient(b.rdb, b.conn, b.eng, JobCacheMaxAge(maxAge))
	t.Cleanup(func() { api.Close() })
	return b, api
}

// primed reads id through api until the answer is kept in memory, and
// returns it.
func primed(t *testing.T, api *Client, id string) []byte {
	t.Helper()
	var got []byte
	waitFor(t, "the job kept in memory", 10*time.Second, func() (bool, error) {
		b, err := api.GetJSON(context.Background(), id)
		got = b
		_, ok := api.cache.get(id)
		return ok, err
	})
	return got
}

// fresh is the job's JSON as Redis has it now.
func fresh(t *testing.T, c *Client, id string) []byte {
	t.Helper()
	j, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(j)
	return b
}

// answersFresh waits until api answers what Redis holds.
func answersFresh(t *testing.T, api *Client, id, what string) {
	t.Helper()
	want := string(fresh(t, api, id))
	var got []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := api.GetJSON(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got = b; string(got) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s the job is answered\n  %s\nwhile Redis has\n  %s", what, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestJobCacheSeesEveryWriter: a job kept in memory is answered again
// without Redis, and every way a worker or another API process changes a
// job record (each store method that writes one) reaches the answer, with
// the cache's own age limit far away (a writer that did not announce its
// change would leave the old answer for a minute).
func TestJobCacheSeesEveryWriter(t *testing.T) {
	b, api := cacheBundle(t, time.Minute)
	ctx := context.Background()
	other := b.client // another process: its changes reach api only as announcements
	j, err := other.Submit(ctx, []string{"cv"}, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := primed(t, api, j.ID)
	// Served from memory: the record deleted behind the cache's back (no
	// announcement) is still answered.
	if err := b.rdb.Rename(ctx, jobKey(j.ID), jobKey(j.ID)+":away").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := api.GetJSON(ctx, j.ID); err != nil || string(got) != string(first) {
		t.Fatalf("a kept job read Redis: %s %v", got, err)
	}
	if err := b.rdb.Rename(ctx, jobKey(j.ID)+":away", jobKey(j.ID)).Err(); err != nil {
		t.Fatal(err)
	}

	st := other.st
	steps := []struct {
		what string
		do   func() error
	}{
		{"a transition with an event", func() error {
			_, err := st.transition(ctx, j, transition{from: []State{StatePending}, event: EventState, message: "started",
				set: []string{fState, string(StateRunning), fPhase, PhasePlanning}})
			return err
		}},
		{"a transition without an event", func() error {
			_, err := st.transition(ctx, j, transition{from: []State{StateRunning}, set: []string{fPhase, "quiet"}})
			return err
		}},
		{"the stored plan (the view's kind)", func() error {
			_, err := st.savePlan(ctx, &refresh.Plan{JobID: j.ID, Kind: "chunker"})
			return err
		}},
		{"the dispatch", func() error {
			_, err := st.startDispatch(ctx, j.ID, 2, 1)
			return err
		}},
		{"a started item (peak running)", func() error {
			_, err := st.startItem(ctx, j.ID, 0)
			return err
		}},
		{"a completed item", func() error {
			_, err := st.completeItem(ctx, j.ID, refresh.ItemResult{Index: 0, RowsRead: 7, RowsWritten: 9}, "", "")
			return err
		}},
		{"a cancel by another process", func() error {
			_, err := other.Cancel(ctx, j.ID)
			return err
		}},
	}
	for _, s := range steps {
		before := primed(t, api, j.ID)
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if string(fresh(t, api, j.ID)) == string(before) {
			t.Fatalf("%s changed nothing: the step tests nothing", s.what)
		}
		answersFresh(t, api, j.ID, s.what)
	}
}

// TestJobCacheReadRacesChange: a read that started before a change and
// ends after its announcement was handled keeps nothing, so the next
// request reads the change instead of the read's older answer.
func TestJobCacheReadRacesChange(t *testing.T) {
	b, api := cacheBundle(t, time.Minute)
	ctx := context.Background()
	j, err := b.client.Submit(ctx, []string{"cv"}, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	primed(t, api, j.ID) // the subscription is confirmed
	api.cache.drop(j.ID)
	var raced bool
	testAfterJobRead = func(id string) {
		if raced || id != j.ID {
			return
		}
		raced = true
		gen := func() uint64 {
			api.cache.mu.Lock()
			defer api.cache.mu.Unlock()
			if e := api.cache.m[id]; e != nil {
				return e.gen
			}
			return 0
		}
		before := gen()
		if _, err := b.client.Cancel(ctx, id); err != nil { // another process
			t.Error(err)
		}
		// (on the read's goroutine: no t.Fatal here)
		for deadline := time.Now().Add(10 * time.Second); gen() == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("the cancel was not announced")
				return
			}
		}
	}
	t.Cleanup(func() { testAfterJobRead = nil })
	got, err := api.GetJSON(ctx, j.ID)
	if err != nil || !raced {
		t.Fatalf("%s %v (raced %v)", got, err, raced)
	}
	var seen Job
	if err := json.Unmarshal(got, &seen); err != nil || seen.State != StatePending {
		t.Fatalf("the racing read answered %s, want its own (PENDING) read", got)
	}
	if got, err = api.GetJSON(ctx, j.ID); err != nil || json.Unmarshal(got, &seen) != nil || seen.State != StateCancelled {
		t.Fatalf("the read after the change answered %s %v, want CANCELLED", got, err)
	}
}

// TestJobCacheBounds: a lost subscription forgets every answer (a change
// written without announcement, as one lost with the connection would
// be, is read once the loss is noticed), and an answer older than the
// age limit is read again.
func TestJobCacheBounds(t *testing.T) {
	t.Run("lost subscription", func(t *testing.T) {
		b, api := cacheBundle(t, time.Minute)
		ctx := context.Background()
		j, err := b.client.Submit(ctx, []string{"cv"}, refresh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		primed(t, api, j.ID)
		// Kill the subscriptions of this test's database only (other
		// tests of the binary share the server).
		list, err := b.rdb.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
		if err != nil {
			t.Fatal(err)
		}
		killed := 0
		for _, line := range strings.Split(list, "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if f["db"] == strconv.Itoa(b.rdb.Options().DB) {
				if err := b.rdb.Do(ctx, "CLIENT", "KILL", "ID", f["id"]).Err(); err != nil {
					t.Fatal(err)
				}
				killed++
			}
		}
		if killed == 0 {
			t.Fatalf("no subscription of this database to kill in %q", list)
		}
		if err := b.rdb.HSet(ctx, jobKey(j.ID), fPhase, "unannounced").Err(); err != nil {
			t.Fatal(err)
		}
		answersFresh(t, api, j.ID, "a lost subscription")
		primed(t, api, j.ID) // kept again once resubscribed
	})
	t.Run("age limit", func(t *testing.T) {
		b, api := cacheBundle(t, 50*time.Millisecond)
		ctx := context.Background()
		j, err := b.client.Submit(ctx, []string{"cv"}, refresh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		primed(t, api, j.ID)
		if err := b.rdb.HSet(ctx, jobKey(j.ID), fPhase, "unannounced").Err(); err != nil {
			t.Fatal(err)
		}
		answersFresh(t, api, j.ID, "the age limit")
	})
	t.Run("off", func(t *testing.T) {
		b, api := cacheBundle(t, 0)
		ctx := context.Background()
		j, err := b.client.Submit(ctx, []string{"cv"}, refresh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.GetJSON(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if err := b.rdb.HSet(ctx, jobKey(j.ID), fPhase, "unannounced").Err(); err != nil {
			t.Fatal(err)
		}
		got, err := api.GetJSON(ctx, j.ID)
		if err != nil || string(got) != string(fresh(t, api, j.ID)) {
			t.Fatalf("with the cache off: %s %v", got, err)
		}
	})
	t.Run("unknown job", func(t *testing.T) {
		b, api := cacheBundle(t, time.Minute)
		j, err := b.client.Submit(context.Background(), []string{"cv"}, refresh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		primed(t, api, j.ID)
		for range 3 {
			if _, err := api.GetJSON(context.Background(), "no-such-job"); errs.CodeOf(err) != errs.CodeJobNotFound {
				t.Fatalf("unknown job: %v", err)
			}
		}
		api.cache.mu.Lock()
		n := len(api.cache.m)
		api.cache.mu.Unlock()
		if n != 1 {
			t.Fatalf("%d jobs remembered, want 1 (an unknown one is not kept)", n)
		}
	})
	t.Run("full", func(t *testing.T) {
		was := jobCacheSize
		jobCacheSize = 3
		t.Cleanup(func() { jobCacheSize = was })
		b, api := cacheBundle(t, 200*time.Millisecond)
		ctx := context.Background()
		var ids []string
		for i := range 4 {
			j, err := b.client.Submit(ctx, []string{"cv"}, refresh.Options{MaxRowsPerFragment: 1000 + i})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		kept := func() int {
			api.cache.mu.Lock()
			defer api.cache.mu.Unlock()
			return len(api.cache.m)
		}
		for _, id := range ids[:3] {
			primed(t, api, id)
		}
		primed(t, api, ids[3]) // all fresh: starts over
		if n := kept(); n != 1 {
			t.Fatalf("%d kept after a full cache of fresh answers took one more, want 1", n)
		}
		primed(t, api, ids[0])
		primed(t, api, ids[1])
		api.cache.mu.Lock() // the three answers age past the limit
		for _, e := range api.cache.m {
			e.at = e.at.Add(-time.Second)
		}
		api.cache.mu.Unlock()
		primed(t, api, ids[2]) // room made by dropping the aged ones
		if n := kept(); n != 1 {
			t.Fatalf("%d kept, want 1: the aged answers should have made room", n)
		}
	})
}
