package idem

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopShared()
	os.Exit(code)
}

// newTestStore is a Store over a database of its own on the shared
// redis-server, with jobs' key prefix.
func newTestStore(t *testing.T) (*Store, *redis.Client) {
	t.Helper()
	r, db := testenv.SharedRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, DB: db})
	t.Cleanup(func() { rdb.Close() })
	return NewStore(rdb, "{mvq}:", 0), rdb
}

// TestIdempotencyRecords: a key is new, then in progress, then done with
// its response; another fingerprint is a mismatch; another principal's
// same key is independent; an abandoned key is new again.
func TestIdempotencyRecords(t *testing.T) {
	t.Parallel()
	c, rdb := newTestStore(t)
	ctx := context.Background()
	state := func(principal, key, fp string) Record {
		t.Helper()
		r, err := c.Begin(ctx, principal, key, fp)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := state("alice", "k", "fp1"); r.State != New {
		t.Fatalf("first: %+v", r)
	}
	if r := state("alice", "k", "fp1"); r.State != InProgress {
		t.Fatalf("concurrent: %+v", r)
	}
	if r := state("alice", "k", "fp2"); r.State != Mismatch {
		t.Fatalf("other request: %+v", r)
	}
	if r := state("bob", "k", "fp2"); r.State != New {
		t.Fatalf("other principal: %+v", r)
	}
	if err := c.Finish(ctx, "alice", "k", "fp2", 201, "x/y", []byte("no")); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, "alice", "k", "fp1", 201, "application/json", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if r := state("alice", "k", "fp1"); r.State != Done || r.Status != 201 || r.ContentType != "application/json" || string(r.Body) != `{"a":1}` {
		t.Fatalf("done: %+v", r)
	}
	if ttl, _ := rdb.TTL(ctx, c.recordKey("alice", "k")).Result(); ttl < 23*time.Hour {
		t.Fatalf("ttl %v", ttl)
	}
	if err := c.Abandon(ctx, "bob", "k", "fp2"); err != nil {
		t.Fatal(err)
	}
	if r := state("bob", "k", "fp3"); r.State != New {
		t.Fatalf("after abandon: %+v", r)
	}
}
