package table

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// requireTagsValid asserts the tag invariant: every tag points at a
// version that exists.
func requireTagsValid(t testing.TB, tb *Table) {
	t.Helper()
	ctx := context.Background()
	tags, err := tb.Tags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range TagNames(tags) {
		if _, err := tb.Version(ctx, tags[n].Version); err != nil {
			t.Fatalf("tag %q points at version %d: %v", n, tags[n].Version, err)
		}
		if n, err := tb.CountRows(ctx, tags[n].Version, ""); err != nil || n == 0 {
			t.Fatalf("tagged version unreadable: %d rows, %v", n, err)
		}
	}
}

// TestTagRacesVersionDelete creates a tag on a version while that version
// is being deleted (by version/delete, and by a batch's
// delete_table_versions), many times: a tagged version is never removed
// and a tag never points at a deleted version; each time exactly one side
// or neither goes through. Cleanup of orphans afterwards keeps every
// tagged version readable.
func TestTagRacesVersionDelete(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newCatalog(t, t.TempDir(), Options{TxnTimeout: 10 * time.Second})
			tb, _ := twoTables(t, c)
			outcomes := map[string]int{}
			for i := range 30 {
				// Each iteration races over a fresh version v (v+1 is the
				// latest, which a deletion keeps).
				if _, _, err := tb.Insert(ctx, rows(t, 100+i, 101+i), "append"); err != nil {
					t.Fatal(err)
				}
				if _, _, err := tb.Insert(ctx, rows(t, 200+i, 201+i), "append"); err != nil {
					t.Fatal(err)
				}
				v := latest(t, tb) - 1
				tag := fmt.Sprintf("t%d", i)
				start := make(chan struct{})
				var wg sync.WaitGroup
				var tagErr, delErr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					tagErr = tb.CreateTag(ctx, tag, v)
				}()
				go func() {
					defer wg.Done()
					<-start
					r := []VersionRange{{Start: int64(v), End: int64(v) + 1}}
					if batch {
						_, _, delErr = c.CommitBatch(ctx, "batch-commit", []BatchVersion{{Field: "d", ID: tb.ID(), Kind: BatchDeleteVersions, Ranges: r}})
					} else {
						_, delErr = tb.DeleteVersions(ctx, r)
					}
				}()
				close(start)
				wg.Wait()
				for _, err := range []error{tagErr, delErr} {
					if code := errs.CodeOf(err); err != nil && code != errs.CodeConcurrentModification && code != errs.CodeInvalidInput && code != errs.CodeTableVersionNotFound {
						t.Fatalf("iteration %d: unexpected error %v", i, err)
					}
				}
				if tagErr == nil && delErr == nil {
					t.Fatalf("iteration %d: both the tag and the deletion of v%d went through", i, v)
				}
				_, verr := tb.Version(ctx, v)
				_, terr := tb.TagVersion(ctx, tag)
				if (delErr == nil) != (verr != nil) || (tagErr == nil) != (terr == nil) {
					t.Fatalf("iteration %d: delete %v / version %v, tag %v / tag read %v", i, delErr, verr, tagErr, terr)
				}
				requireTagsValid(t, tb)
				if m := markers(t, tb); len(m) != 0 {
					t.Fatalf("iteration %d: markers left: %v", i, m)
				}
				outcomes[fmt.Sprintf("tag=%v delete=%v", tagErr == nil, delErr == nil)]++
			}
			t.Logf("outcomes: %v", outcomes)
			if _, err := tb.CleanupOrphans(ctx, -time.Hour); err != nil {
				t.Fatal(err)
			}
			requireTagsValid(t, tb)
		})
	}
}

// TestTagUpdateRacesVersionDelete: moving a tag onto a version being
// deleted either loses (the tag keeps its old version) or stops the
// deletion.
func TestTagUpdateRacesVersionDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _ := twoTables(t, c)
	if err := tb.CreateTag(ctx, "moving", 1); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for k := range 2 {
			if _, _, err := tb.Insert(ctx, rows(t, 100*k+i, 100*k+i+1), "append"); err != nil {
				t.Fatal(err)
			}
		}
		v := latest(t, tb) - 1
		start := make(chan struct{})
		var wg sync.WaitGroup
		var tagErr, delErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			tagErr = tb.UpdateTag(ctx, "moving", v)
		}()
		go func() {
			defer wg.Done()
			<-start
			_, delErr = tb.DeleteVersions(ctx, []VersionRange{{Start: int64(v), End: int64(v) + 1}})
		}()
		close(start)
		wg.Wait()
		if tagErr == nil && delErr == nil {
			t.Fatalf("iteration %d: both the tag update and the deletion of v%d went through", i, v)
		}
		tg, err := tb.TagVersion(ctx, "moving")
		if err != nil {
			t.Fatal(err)
		}
		if tagErr == nil && tg.Version != v {
			t.Fatalf("iteration %d: the update went through but the tag is at v%d", i, tg.Version)
		}
		requireTagsValid(t, tb)
	}
}

// TestTagConfirmSeesDeletionFinishAfterListing replays the interleaving
// that let both sides through: the deletion announces itself and finds no
// tag; the tag is written and its check lists the versions (the version
// and the marker both there); then the deletion removes the version and
// its marker before the check reads the marker. The tag must give way.
func TestTagConfirmSeesDeletionFinishAfterListing(t *testing.T) {
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _ := twoTables(t, c)
	for k := range 2 {
		if _, _, err := tb.Insert(ctx, rows(t, 100+k, 101+k), "append"); err != nil {
			t.Fatal(err)
		}
	}
	v := latest(t, tb) - 1
	announced, proceed, deleted := make(chan struct{}), make(chan struct{}), make(chan struct{})
	testHookDeleteAnnounced = func() { close(announced); <-proceed }
	testHookTagListed = func() { close(proceed); <-deleted }
	t.Cleanup(func() { testHookDeleteAnnounced, testHookTagListed = nil, nil })
	var delErr error
	go func() {
		defer close(deleted)
		_, delErr = tb.DeleteVersions(ctx, []VersionRange{{Start: int64(v), End: int64(v) + 1}})
	}()
	select {
	case <-announced:
	case <-time.After(30 * time.Second):
		t.Fatal("the deletion never announced itself")
	}
	testHookDeleteAnnounced = nil
	tagErr := tb.CreateTag(ctx, "late", v)
	if delErr != nil {
		t.Fatalf("the deletion failed: %v", delErr)
	}
	if errs.CodeOf(tagErr) != errs.CodeConcurrentModification {
		t.Fatalf("the tag of deleted v%d: %v, want a conflict", v, tagErr)
	}
	if _, err := tb.TagVersion(ctx, "late"); errs.CodeOf(err) != errs.CodeTableTagNotFound {
		t.Fatalf("the tag is still there: %v", err)
	}
	requireTagsValid(t, tb)
}
