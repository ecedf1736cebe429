package service

import (
	"context"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
)

// poolAdmin is the console's operations page: the pools as
// jobs.ClusterStats reads them, paused and resumed with asynq's queue
// pause (workers take no new task from a paused queue).
type poolAdmin struct {
	*jobs.ClusterStats
	inspector *asynq.Inspector
	rdb       redis.UniversalClient
}

// asynqPausedKey is the key asynq's pause sets for a queue (asynq v0.26,
// internal/base.PausedKey; jobs/asynqwire.go follows the same layout).
func asynqPausedKey(queue string) string { return "asynq:{" + queue + "}:paused" }

// Pools is ClusterStats.Pools with each pool's paused state read from the
// pause key itself: asynq's Inspector only answers for a queue that a task
// was ever enqueued on, so a pool paused before its first task would read
// as running, and a resume of it would be skipped.
func (p poolAdmin) Pools(ctx context.Context) ([]jobs.Pool, error) {
	pools, err := p.ClusterStats.Pools(ctx)
	if err != nil || len(pools) == 0 {
		return pools, err
	}
	cmds := make([]*redis.IntCmd, len(pools))
	if _, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i := range pools {
			cmds[i] = pipe.Exists(ctx, asynqPausedKey(pools[i].Queue))
		}
		return nil
	}); err != nil {
		return nil, &errs.Error{Code: errs.CodeServiceUnavailable, Message: "pools: paused state: redis unavailable", Err: err}
	}
	for i := range pools {
		pools[i].Paused = cmds[i].Val() == 1
	}
	return pools, nil
}

// SetPaused pauses or resumes a pool; one already so is no error (two
// admins at once).
func (p poolAdmin) SetPaused(_ context.Context, cluster string, paused bool) error {
	var err error
	if paused {
		err = p.inspector.PauseQueue(jobs.QueueName(cluster))
	} else {
		err = p.inspector.UnpauseQueue(jobs.QueueName(cluster))
	}
	if err == nil || strings.Contains(err.Error(), "is already paused") || strings.Contains(err.Error(), "is not paused") {
		return nil
	}
	return &errs.Error{Code: errs.CodeServiceUnavailable, Message: "pool " + cluster + ": redis unavailable", Err: err}
}
