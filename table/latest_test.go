package table

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/errs"
)

// touch commits a version that changes nothing but its operation.
func touch(ctx context.Context, tb *Table) (*Manifest, error) {
	return tb.Commit(ctx, func(base *Manifest) (*Manifest, error) {
		base.Operation = "touch"
		return base, nil
	})
}

// sameAsListing fails unless LatestVersion answers exactly what the last
// entry of a full listing (Versions) is.
func sameAsListing(t *testing.T, tb *Table) VersionFile {
	t.Helper()
	ctx := context.Background()
	vf, err := tb.LatestVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := vs[len(vs)-1]
	if vf.Version != want.Version || vf.Name != want.Name || vf.Size != want.Size || !vf.ModTime.Equal(want.ModTime) || string(vf.MD5) != string(want.MD5) {
		t.Fatalf("LatestVersion %+v, the listing's latest %+v", vf, want)
	}
	return vf
}

func TestLatestVersionUnderConcurrentCommitters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"hot"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	const writers, commits, readers = 3, 12, 3
	var committed atomic.Uint64 // the highest version whose commit returned
	committed.Store(1)
	var wg, rg sync.WaitGroup
	done := make(chan struct{})
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range commits {
				m, err := touch(ctx, tb)
				if err != nil {
					t.Error(err)
					return
				}
				for {
					cur := committed.Load()
					if m.Version <= cur || committed.CompareAndSwap(cur, m.Version) {
						break
					}
				}
			}
		}()
	}
	var reads atomic.Int64
	for range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			// A reader of its own catalog, as another process would be.
			h := NewCatalog(mustOpen(t, c.wh.URI()), c.sql, Options{}).handle(tb.ID())
			for {
				select {
				case <-done:
					return
				default:
				}
				before := committed.Load()
				vf, err := h.LatestVersion(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if vf.Version < before {
					t.Errorf("latest version %d, but version %d was committed before the read", vf.Version, before)
					return
				}
				if vf.Size <= 0 || vf.ModTime.IsZero() {
					t.Errorf("latest version %d without its size and time: %+v", vf.Version, vf)
					return
				}
				if _, err := h.LoadFile(ctx, vf); err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	close(done)
	rg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no read ran")
	}
	if vf := sameAsListing(t, tb); vf.Version != 1+writers*commits {
		t.Fatalf("latest version %d, want %d", vf.Version, 1+writers*commits)
	}
}

func TestLatestVersionAfterDeleteAndRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"gaps"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := touch(ctx, tb); err != nil {
			t.Fatal(err)
		}
	}
	// A hole in the middle of the history.
	if n, err := tb.DeleteVersions(ctx, []VersionRange{{Start: 2, End: 4}}); err != nil || n != 2 {
		t.Fatalf("delete versions 2-3: %d %v", n, err)
	}
	if vf := sameAsListing(t, tb); vf.Version != 5 {
		t.Fatalf("latest %d after deleting 2-3, want 5", vf.Version)
	}
	if _, err := tb.Version(ctx, 3); errs.CodeOf(err) != errs.CodeTableVersionNotFound {
		t.Fatalf("deleted version 3: %v", err)
	}
	vf, err := tb.Version(ctx, 4)
	if err != nil || vf.Version != 4 || vf.Size <= 0 || vf.ModTime.IsZero() {
		t.Fatalf("version 4: %+v %v", vf, err)
	}
	if _, err := tb.Restore(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if vf := sameAsListing(t, tb); vf.Version != 6 {
		t.Fatalf("latest %d after restore, want 6", vf.Version)
	}
}

func TestLatestVersionIgnoresWhatIsNotAVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	if c.wh.Dir() == "" {
		t.Skip("places files in a file:// warehouse")
	}
	tb, _, err := c.CreateTable(ctx, []string{"odd"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := c.wh.Path(tb.versionsKey())
	for _, name := range []string{
		ManifestName(9, NamingV2) + "-" + uuid.NewString(), // a staged manifest
		ManifestName(9, NamingV1) + "-" + uuid.NewString(),
		".hidden" + ManifestName(9, NamingV1),
		ManifestName(9, NamingV1) + ".attrs",
		"07.manifest", // V1 names have no leading zeros
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ManifestName(8, NamingV1)), 0o755); err != nil {
		t.Fatal(err)
	}
	if vf := sameAsListing(t, tb); vf.Version != 1 {
		t.Fatalf("latest %d, want 1", vf.Version)
	}
	if _, err := tb.Version(ctx, 9); errs.CodeOf(err) != errs.CodeTableVersionNotFound {
		t.Fatalf("version 9 of staged files: %v", err)
	}
	// A version under its V1 name only counts too.
	m, err := tb.Load(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	m.Version = 2
	data, _ := m.Encode()
	if err := os.WriteFile(filepath.Join(dir, ManifestName(2, NamingV1)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if vf := sameAsListing(t, tb); vf.Version != 2 || vf.Scheme != NamingV1 {
		t.Fatalf("latest %+v, want version 2 under its V1 name", vf)
	}
}

func TestLatestVersionOnBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"forked"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := touch(ctx, tb); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateBranch(ctx, "dev", "", 1); err != nil {
		t.Fatal(err)
	}
	dev, err := tb.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if vf := sameAsListing(t, dev); vf.Version != 1 {
		t.Fatalf("branch latest %d, want 1", vf.Version)
	}
	for range 3 {
		if _, err := touch(ctx, dev); err != nil {
			t.Fatal(err)
		}
	}
	if vf := sameAsListing(t, dev); vf.Version != 4 {
		t.Fatalf("branch latest %d, want 4", vf.Version)
	}
	if vf := sameAsListing(t, tb); vf.Version != 2 {
		t.Fatalf("main latest %d after branch commits, want 2", vf.Version)
	}
}

// TestLatestVersionListsNothing: on file:// the lookups on the accept path
// of a refresh (latest version, a given version, whether a table exists)
// make no warehouse List call.
func TestLatestVersionListsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	if c.wh.Dir() == "" {
		t.Skip("other stores list")
	}
	tb, _, err := c.CreateTable(ctx, []string{"quiet"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := touch(ctx, tb); err != nil {
		t.Fatal(err)
	}
	before := c.wh.Lists()
	for range 10 {
		if _, err := c.OpenTable(ctx, tb.ID()); err != nil {
			t.Fatal(err)
		}
		if vf, err := tb.LatestVersion(ctx); err != nil || vf.Version != 2 {
			t.Fatalf("latest %+v %v", vf, err)
		}
		if _, err := tb.Version(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.wh.Lists() - before; n != 0 {
		t.Fatalf("%d List calls, want 0", n)
	}
	if _, err := c.OpenTable(ctx, []string{"absent"}); errs.CodeOf(err) != errs.CodeTableNotFound {
		t.Fatalf("absent table: %v", err)
	}
}

// TestLatestVersionFromKeptListing: once a _versions/ folder is old enough
// for its listing to be kept, LatestVersion and Version answer from the
// kept listing, its judged versions and the kept stat, exactly as a full
// listing; a commit is seen at once.
func TestLatestVersionFromKeptListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	if c.wh.Dir() == "" {
		t.Skip("other stores list")
	}
	tb, _, err := c.CreateTable(ctx, []string{"kept"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := touch(ctx, tb); err != nil {
		t.Fatal(err)
	}
	// The listing is kept once the folder's last change is past the racy
	// margin (dircache.go).
	deadline := time.Now().Add(10 * time.Second)
	for c.listed.Len() == 0 {
		if time.Now().After(deadline) {
			t.Skip("the folder's listing was never kept (a file system the listing cache does not trust)")
		}
		if _, err := tb.LatestVersion(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		if vf := sameAsListing(t, tb); vf.Version != 2 {
			t.Fatalf("latest %d, want 2", vf.Version)
		}
		if vf, err := tb.Version(ctx, 1); err != nil || vf.Version != 1 || vf.Size == 0 {
			t.Fatalf("version 1: %+v %v", vf, err)
		}
	}
	if _, err := touch(ctx, tb); err != nil {
		t.Fatal(err)
	}
	if vf := sameAsListing(t, tb); vf.Version != 3 {
		t.Fatalf("after a commit: latest %d, want 3", vf.Version)
	}
}
