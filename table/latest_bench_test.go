package table

import (
	"context"
	"testing"
)

// BenchmarkLatestVersion compares the latest-version lookup with the full
// listing it replaces on the accept path, on a table of 20 versions.
func BenchmarkLatestVersion(b *testing.B) {
	ctx := context.Background()
	c := newCatalog(b, b.TempDir(), Options{})
	tb, _, err := c.CreateTable(ctx, []string{"bench"}, testSchema, rows(b, 0, 3), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	for range 19 {
		if _, err := touch(ctx, tb); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("listing", func(b *testing.B) {
		for b.Loop() {
			vs, err := tb.Versions(ctx)
			if err != nil || vs[len(vs)-1].Version != 20 {
				b.Fatal(vs, err)
			}
		}
	})
	b.Run("latest", func(b *testing.B) {
		for b.Loop() {
			vf, err := tb.LatestVersion(ctx)
			if err != nil || vf.Version != 20 {
				b.Fatal(vf, err)
			}
		}
	})
}
