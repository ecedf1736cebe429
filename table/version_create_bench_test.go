package table

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkCreateVersionLance: version/create of a staged Lance manifest
// (one per op) on a file:// table that already has 300 versions: what a
// LanceDB commit through the REST namespace costs inside mvq, without
// the HTTP and the client.
func BenchmarkCreateVersionLance(b *testing.B) {
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, testDB(b), Options{Format: FormatLance, MaxRowsPerFragment: 100})
	if err := c.CreateNamespace(ctx, []string{"docs"}, "", nil); err != nil {
		b.Fatal(err)
	}
	tb, _, err := c.CreateTable(ctx, []string{"docs", "t"}, lanceTestSchema, lanceRows(b, 0, 100), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	commit := func(i int) {
		base, err := tb.Load(ctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		next := base.clone()
		next.Version, next.ParentVersion = base.Version+1, base.Version
		next.Operation, next.TimestampMillis = "append", time.Now().UnixMilli()
		data, err := next.Encode()
		if err != nil {
			b.Fatal(err)
		}
		path := fmt.Sprintf("staged/%d.manifest", i)
		if err := c.wh.Write(ctx, tb.key+path, data); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, _, _, err = tb.CreateVersionIf(ctx, next.Version, path, NamingV2, nil, nil, "")
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for i := range 300 {
		commit(-1 - i)
	}
	b.ResetTimer()
	for i := range b.N {
		commit(i)
	}
}
