package duck

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

type shareKeyCtx struct{}

func withKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, shareKeyCtx{}, key)
}

func keyOf(ctx context.Context) string { s, _ := ctx.Value(shareKeyCtx{}).(string); return s }

// gatedReader is an input whose rows arrive only once gate is closed: a
// query over it holds its session until then.
type gatedReader struct {
	array.RecordReader
	gate <-chan struct{}
}

func (g *gatedReader) Next() bool { <-g.gate; return g.RecordReader.Next() }

var _ array.RecordReader = (*gatedReader)(nil)

// TestShareBoundsOneKey: one key's queries hold at most its share of the
// sessions (ceil(4/2) = 2); its third waits for one of its own and, past
// the queue wait, is a BusyError naming the share, while another key and
// keyless work still get the free sessions at once.
func TestShareBoundsOneKey(t *testing.T) {
	t.Parallel()
	db, err := Open(Options{Threads: 1, Sessions: 4, ShareKey: keyOf})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gate := make(chan struct{})
	reader := withKey(context.Background(), "reader")
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdr, err := db.Query(reader, map[string]array.RecordReader{"t": &gatedReader{testReader(t, 3), gate}}, "SELECT count(*) FROM t")
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := Collect(rdr); err != nil {
				t.Error(err)
			}
		}()
	}
	defer func() { close(gate); wg.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for len(db.slots) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the reader's two queries did not take their sessions")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	_, err = collectOneCtx(t, db, WithQueueWait(reader, 300*time.Millisecond), "SELECT 1")
	var be *BusyError
	if !errors.As(err, &be) || be.Share != 2 || be.Sessions != 4 {
		t.Fatalf("the reader's third query: %v, want a BusyError for its share of 2", err)
	}
	t.Logf("refused after %s; %s", time.Since(start).Round(time.Millisecond), err)
	for _, ctx := range []context.Context{withKey(context.Background(), "alice"), withKey(context.Background(), "alice"), context.Background()} {
		if v, err := collectOneCtx(t, db, WithQueueWait(ctx, 300*time.Millisecond), `SELECT count(*) FROM "docs$articles"`); err != nil || v != "10" {
			t.Fatalf("another caller while the reader holds its share: %q %v", v, err)
		}
	}
}

func collectOneCtx(t *testing.T, db *DB, ctx context.Context, q string) (string, error) {
	t.Helper()
	rdr, err := db.Query(ctx, map[string]array.RecordReader{"docs$articles": testReader(t, 10)}, q)
	if err != nil {
		return "", err
	}
	recs, err := Collect(rdr)
	if err != nil {
		return "", err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return recs[0].Column(0).ValueStr(0), nil
}
