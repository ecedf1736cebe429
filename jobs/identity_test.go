package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// planErrs wraps an engine and reports every error Plan returns.
type planErrs struct {
	engine
	errs chan error
}

func (p *planErrs) Plan(ctx context.Context, id []string, jobID string, o refresh.Options) (*refresh.Plan, error) {
	pl, err := p.engine.Plan(ctx, id, jobID, o)
	if err != nil {
		select {
		case p.errs <- err:
		default:
		}
	}
	return pl, err
}

// TestRefreshRetriesUnreadableState: a source manifest that cannot be
// read when the job plans fails the attempt, retryable; once it reads
// again the retried plan goes on, incremental, with exact content.
func TestRefreshRetriesUnreadableState(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 6)
	eng := &planErrs{engine: w.eng, errs: make(chan error, 1)}
	b := setup(t, eng)
	b.startServer(t)
	ctx := context.Background()
	j, err := b.client.Submit(ctx, w.view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.waitState(t, j.ID, StateDone)
	w.insert(t, 2)

	path := filepath.Join(strings.TrimPrefix(w.src.Location(), "file://"), "_versions", table.ManifestName(2, table.NamingV2))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, orig[:len(orig)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	j2, err := b.client.Submit(ctx, w.view, refresh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-eng.errs:
		if permanent(err) {
			t.Fatalf("unreadable source manifest: %v is not retryable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the plan never met the unreadable manifest")
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	j2 = b.waitState(t, j2.ID, StateDone)
	if *j2.Result != (refresh.Result{Mode: refresh.ModeIncremental, SourceVersion: 2, ViewVersion: 3, RowsAdded: 6}) {
		t.Fatalf("result %+v", *j2.Result)
	}
	eqRows(t, "view", w.rows(t), want(6, 2))
}

// TestRefreshOfRecreatedViewFails: a view dropped and created again while
// its refresh runs gets none of that refresh's rows: the job fails, not
// retryable, and the new view's history stays readable.
func TestRefreshOfRecreatedViewFails(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, 9)
	b := setup(t, w.eng)
	var once sync.Once
	b.eng.beforeExpand = func(ctx context.Context, p *refresh.Plan, i int) error {
		once.Do(func() {
			if err := w.cat.DropTable(ctx, w.view); err != nil {
				t.Error(err)
			}
			createChunks(t, w)
		})
		return nil
	}
	b.startServer(t)
	j, err := b.client.Submit(context.Background(), w.view, refresh.Options{SourceTaskSize: 3, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	j = b.waitState(t, j.ID, StateFailed)
	if j.Failure == nil || j.Failure.Retryable || !strings.Contains(j.Failure.Message, "dropped and created again") {
		t.Fatalf("failure %+v", j.Failure)
	}
	if v := w.version(t); v != 1 {
		t.Fatalf("the new view moved to version %d", v)
	}
	eqRows(t, "new view", w.rows(t), []string{})
	waitFor(t, "the job's staged files to be discarded", 10*time.Second, func() (bool, error) { return w.staged(t, j.ID) == 0, nil })
}

// createChunks creates the warehouse's chunker view (again).
func createChunks(t *testing.T, w *warehouse) {
	t.Helper()
	spec := `{"chunker":"fixed","input_column":"body","output_column":"chunk","chunk_size":4,"chunk_overlap":0}`
	sum := sha256.Sum256([]byte(spec))
	_, err := w.eng.CreateView(context.Background(), w.view, refresh.CreateRequest{
		Kind: "chunker", SourceQuery: `SELECT id, body FROM "docs$articles"`,
		UDTFSpec: &refresh.UDTFEntry{Kind: "chunker", UDTF: base64.StdEncoding.EncodeToString([]byte(spec)),
			UDTFSha: hex.EncodeToString(sum[:]), UDTFName: "fixed", UDTFVersion: "1"},
	})
	if err != nil {
		t.Error(err)
	}
}
