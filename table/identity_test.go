package table

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mvq-dev/mvq/internal/testenv"
)

// stripIdentity rewrites every manifest of t without its uuid, the way
// tables created before identities were stored look.
func stripIdentity(t *testing.T, tb *Table) {
	t.Helper()
	ctx := context.Background()
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range vs {
		m, err := tb.readManifest(ctx, vf)
		if err != nil {
			t.Fatal(err)
		}
		m.UUID = ""
		data, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.c.wh.Write(ctx, tb.key+versionsDir+vf.Name, data); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIdentityKeptAcrossVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	id := []string{"t"}
	tb, m1, err := c.CreateTable(ctx, id, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := uuid.Parse(m1.UUID)
	if err != nil || u.Version() != 7 {
		t.Fatalf("created with uuid %q (%v), want a UUIDv7", m1.UUID, err)
	}
	// Every kind of commit keeps it.
	if _, _, err := tb.Insert(ctx, rows(t, 10, 20), "append"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, "id < 3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Update(ctx, "id = 5", [][2]string{{"name", "'five'"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Restore(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateTable(ctx, id, testSchema, rows(t, 0, 1), "overwrite", nil); err != nil {
		t.Fatal(err)
	}
	// A staged manifest claiming another identity does not change it.
	latest, err := tb.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	staged := *latest
	staged.Version = latest.Version + 1
	staged.UUID = uuid.NewString()
	data, _ := staged.Encode()
	if err := c.wh.Write(ctx, tb.key+"staged.manifest", data); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := tb.CreateVersion(ctx, staged.Version, "staged.manifest", NamingV2, nil); err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(ctx)
	if err != nil || len(vs) != 7 {
		t.Fatalf("%d versions (%v)", len(vs), err)
	}
	for _, vf := range vs {
		m, err := tb.Load(ctx, vf.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tb.Identity(ctx, m); err != nil || got != m1.UUID || m.UUID != m1.UUID {
			t.Fatalf("v%d (%s): identity %q, stored %q (%v), want %q", vf.Version, m.Operation, got, m.UUID, err, m1.UUID)
		}
	}

	// Dropped and created again: another table.
	if err := c.DropTable(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, m2, err := c.CreateTable(ctx, id, testSchema, rows(t, 0, 10), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2.UUID == "" || m2.UUID == m1.UUID {
		t.Fatalf("re-created table has uuid %q (first one %q)", m2.UUID, m1.UUID)
	}

	// A manifest with a malformed uuid is corrupt.
	if _, err := DecodeManifest([]byte(`{"schema":"x","uuid":"not-a-uuid"}`)); err == nil || !strings.Contains(err.Error(), "uuid") {
		t.Fatalf("malformed uuid accepted: %v", err)
	}
}

// TestLegacyIdentity: a table whose manifests carry no uuid has the
// identity derived from its version 1, the same at every version; a
// version 1 that cannot be read is an error, never another identity.
func TestLegacyIdentity(t *testing.T) {
	testenv.SkipUnlessFile(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	c := newCatalog(t, dir, Options{})
	tb, _, err := c.CreateTable(ctx, []string{"old"}, testSchema, rows(t, 0, 3), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Insert(ctx, rows(t, 3, 6), "append"); err != nil {
		t.Fatal(err)
	}
	stripIdentity(t, tb)
	v1, err := tb.Load(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := LegacyIdentity(v1.TimestampMillis)
	if _, err := uuid.Parse(want); err != nil || want == LegacyIdentity(v1.TimestampMillis+1) {
		t.Fatalf("legacy identity %q (%v)", want, err)
	}
	for _, v := range []uint64{1, 2} {
		m, err := tb.Load(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tb.Identity(ctx, m); err != nil || got != want {
			t.Fatalf("v%d: identity %q (%v), want %q", v, got, err, want)
		}
	}
	// Commits to a legacy table keep it legacy (no identity invented).
	m3, _, err := tb.Insert(ctx, rows(t, 6, 7), "append")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tb.Identity(ctx, m3); m3.UUID != "" || got != want || err != nil {
		t.Fatalf("v3: stored %q, identity %q (%v)", m3.UUID, got, err)
	}
	// Version 1 unreadable: an error.
	p := filepath.Join(dir, "old.lance", "_versions", ManifestName(1, NamingV2))
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := tb.Identity(ctx, m3); err == nil || got != "" {
		t.Fatalf("identity with version 1 corrupt: %q, %v", got, err)
	}
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
}
