package service

import (
	"context"

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

func (p poolAdmin) SetPaused(_ context.Context, cluster string, paused bool) error {
	if paused {
		return p.inspector.PauseQueue(jobs.QueueName(cluster))
	}
	return p.inspector.UnpauseQueue(jobs.QueueName(cluster))
}
