package table

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/mvq-dev/mvq/errs"
)

// TestMixedNamingRace: a version/create under V1 naming races an insert
// (V2 naming) for the same version number, many times. Put-if-not-exists
// guards one name only; the check after each put makes sure a version
// never ends up under both names, and that every write that answered
// success is there.
func TestMixedNamingRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCatalog(t, t.TempDir(), Options{})
	tb, _ := twoTables(t, c)
	outcomes := map[string]int{}
	for i := range 40 {
		st := stageAppend(t, tb, fmt.Sprintf("s%d", i), 1000+i, 1001+i)
		v := st.Version
		start := make(chan struct{})
		var wg sync.WaitGroup
		var createErr, insErr error
		var insV uint64
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, _, _, createErr = tb.CreateVersion(ctx, v, st.ManifestPath, NamingV1, nil)
		}()
		go func() {
			defer wg.Done()
			<-start
			m, _, err := tb.Insert(ctx, rows(t, 2000+i, 2001+i), "append")
			insErr = err
			if m != nil {
				insV = m.Version
			}
		}()
		close(start)
		wg.Wait()
		if insErr != nil {
			t.Fatalf("round %d: insert: %v", i, insErr)
		}
		if createErr != nil && errs.CodeOf(createErr) != errs.CodeConcurrentModification {
			t.Fatalf("round %d: create: %v", i, createErr)
		}
		exists := func(w uint64, s NamingScheme) bool {
			ok, err := c.wh.Exists(ctx, tb.versionsKey()+ManifestName(w, s))
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		for w := v; w <= insV; w++ {
			if exists(w, NamingV1) && exists(w, NamingV2) {
				t.Fatalf("round %d: version %d is there under both names", i, w)
			}
		}
		if createErr == nil {
			if !exists(v, NamingV1) {
				t.Fatalf("round %d: the create of v%d answered success but its file is gone", i, v)
			}
			if insV == v {
				t.Fatalf("round %d: both the create and the insert answered v%d", i, v)
			}
		}
		vf, err := tb.Version(ctx, insV)
		if err != nil || vf.Scheme != NamingV2 {
			t.Fatalf("round %d: the insert's v%d: %+v %v", i, insV, vf, err)
		}
		outcomes[fmt.Sprintf("create=%v insert_at_v=%v", createErr == nil, insV == v)]++
	}
	t.Logf("outcomes: %v", outcomes)
}
