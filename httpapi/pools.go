package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
)

// PoolAdmin reads the worker pools (one per cluster: its queue and the
// workers polling it) and pauses or resumes one: the operations page of
// the console.
type PoolAdmin interface {
	Pools(ctx context.Context) ([]jobs.Pool, error)
	// SetPaused pauses (workers take no new task from the cluster's
	// queue; running ones finish) or resumes a pool. Setting the state a
	// pool already has may fail: the handler checks first.
	SetPaused(ctx context.Context, cluster string, paused bool) error
}

// listPools answers GET /v1/admin/pools.
func (v *ViewRoutes) listPools(c *gin.Context) error {
	pools, err := v.Pools.Pools(c.Request.Context())
	if err != nil {
		return err
	}
	if pools == nil {
		pools = []jobs.Pool{}
	}
	c.JSON(http.StatusOK, gin.H{"pools": pools})
	return nil
}

// pausePool answers POST /v1/admin/pools/{cluster}/pause (paused) or
// /resume: the pool afterwards. A pool already in that state is answered
// as it is; an unknown cluster is a 404 (CodePoolNotFound).
func (v *ViewRoutes) pausePool(paused bool) func(*gin.Context) error {
	return func(c *gin.Context) error {
		ctx := c.Request.Context()
		cluster := c.Param("cluster")
		find := func() (*jobs.Pool, []string, error) {
			pools, err := v.Pools.Pools(ctx)
			if err != nil {
				return nil, nil, err
			}
			names := make([]string, 0, len(pools))
			for i := range pools {
				if pools[i].Cluster == cluster {
					return &pools[i], nil, nil
				}
				names = append(names, pools[i].Cluster)
			}
			return nil, names, nil
		}
		p, known, err := find()
		if err != nil {
			return err
		}
		if p == nil {
			slices.Sort(known)
			return errs.Errorf(errs.CodePoolNotFound, "cluster %q: no such pool (known: %v)", cluster, known)
		}
		if p.Paused != paused {
			if err := v.Pools.SetPaused(ctx, cluster, paused); err != nil {
				return err
			}
			if p, _, err = find(); err != nil {
				return err
			}
		}
		c.JSON(http.StatusOK, p)
		return nil
	}
}
