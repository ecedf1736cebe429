package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/table"
)

// TestAutoRefreshChainOncePerBurst: with the default minimum interval
// (1s) and a debounce, a burst of commits to the base table refreshes
// each of the chain's three levels exactly once, after the burst, in
// dependency order (each level starts after the one it reads finished),
// the first level reading the burst's last version.
//
// The debounce is what makes it once: without one, the first commit of a
// burst starts the first level's refresh at once, and the commits after
// it get a second refresh (the pending job waits out the interval), so a
// burst costs each level one or two refreshes
// (TestAutoRefreshBurstCoalesces). A debounce delays a view's automatic
// refresh by that much after the change that claimed it, and every later
// change joins the pending job; so a burst shorter than the debounce is
// one refresh of the first level, whose one commit is one change for the
// next level, and so on up the chain.
func TestAutoRefreshChainOncePerBurst(t *testing.T) {
	t.Parallel()
	const debounce = 3 * time.Second
	c := newChain(t, 10, AutoConfig{Debounce: debounce}) // MinInterval: the 1s default
	ctx := context.Background()
	start := time.Now()
	for range 10 {
		c.insert(t, 1)
	}
	if d := time.Since(start); d >= debounce {
		t.Fatalf("the burst of 10 inserts took %v, longer than the %v debounce the test relies on", d, debounce)
	}
	burstEnd := time.Now()
	last, err := c.src.LatestVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.settled(t, 20)
	var prev *Job
	for i, v := range c.levels {
		js := c.autoJobs(t, v)
		if len(js) != 1 {
			for _, j := range js {
				t.Logf("job %s created %s started %v trigger %+v result %+v", j.ID, j.CreatedAt.Format("15:04:05.000"), j.StartedAt, j.Trigger, j.Result)
			}
			t.Fatalf("level %d (%s): %d automatic refreshes for one burst, want 1", i+1, table.JoinID(v), len(js))
		}
		j := js[0]
		if j.StartedAt == nil || j.FinishedAt == nil || j.Result == nil {
			t.Fatalf("level %d: job %+v", i+1, j)
		}
		if i == 0 {
			if j.StartedAt.Before(burstEnd) || j.Result.SourceVersion != last.Version {
				t.Fatalf("level 1 started %s (burst ended %s) reading source version %d, want after the burst reading %d",
					j.StartedAt.Format("15:04:05.000"), burstEnd.Format("15:04:05.000"), j.Result.SourceVersion, last.Version)
			}
		} else if j.StartedAt.Before(*prev.FinishedAt) {
			t.Fatalf("level %d started %s, before level %d finished %s", i+1, j.StartedAt.Format("15:04:05.000"), i, prev.FinishedAt.Format("15:04:05.000"))
		}
		prev = j
	}
}
