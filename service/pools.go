package service

import (
	"context"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/mvq-dev/mvq/jobs"
)

// poolAdmin is the console's operations page: the pools as
// jobs.ClusterStats reads them, paused and resumed with asynq's queue
// pause (workers take no new task from a paused queue).
type poolAdmin struct {
	*jobs.ClusterStats
	inspector *asynq.Inspector
}

// SetPaused pauses or resumes a pool; one already so is no error (two
// admins at once, or a queue asynq has not registered yet, whose paused
// state Pools cannot read).
func (p poolAdmin) SetPaused(_ context.Context, cluster string, paused bool) error {
	var err error
	if paused {
		err = p.inspector.PauseQueue(jobs.QueueName(cluster))
	} else {
		err = p.inspector.UnpauseQueue(jobs.QueueName(cluster))
	}
	if err != nil && (strings.Contains(err.Error(), "is already paused") || strings.Contains(err.Error(), "is not paused")) {
		return nil
	}
	return err
}
