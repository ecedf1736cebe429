package jobs

import (
	"context"
	"log/slog"
	"slices"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mvq-dev/mvq/telemetry"
)

// ClusterStats reads the queue gauges (mvq_queue_depth,
// mvq_queue_latency_seconds, mvq_workers_active) of every known cluster:
// those any worker ever served plus Extra. The API exports them, so a pool
// with no worker left, or none yet, still reports its backlog (the signal
// for scale-from-zero and for MvqNoActiveWorkers).
type ClusterStats struct {
	st        *store
	inspector *asynq.Inspector
	extra     []string
}

// NewClusterStats returns a reader over rdb (records) and conn (asynq's
// queues); extra are clusters reported even before any worker served them
// (the API's MVQ_CLUSTERS). Close releases the inspector.
func NewClusterStats(rdb redis.UniversalClient, conn asynq.RedisConnOpt, extra []string) *ClusterStats {
	return &ClusterStats{st: &store{rdb: rdb}, inspector: asynq.NewInspector(conn), extra: extra}
}

// Close releases the asynq inspector.
func (c *ClusterStats) Close() error { return c.inspector.Close() }

// Clusters returns the known clusters, sorted; on a Redis error (logged),
// Extra alone.
func (c *ClusterStats) Clusters(ctx context.Context) []string {
	known, err := c.st.knownClusters(ctx)
	if err != nil {
		slog.WarnContext(ctx, "jobs: known clusters not read; reporting the configured ones", "err", err)
	}
	out := append(slices.Clone(c.extra), known...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Read returns the gauges of every known cluster (what
// telemetry.RegisterQueueGauges calls at each collection).
func (c *ClusterStats) Read(ctx context.Context) []telemetry.QueueStats {
	return queueStats(ctx, c.st, c.inspector, c.Clusters(ctx))
}

// queueStats reads each cluster's queue depth and latency (asynq; zero for
// a queue asynq has not seen) and its live workers (heartbeats).
func queueStats(ctx context.Context, st *store, insp *asynq.Inspector, clusters []string) []telemetry.QueueStats {
	out := make([]telemetry.QueueStats, 0, len(clusters))
	for _, c := range clusters {
		q := telemetry.QueueStats{Cluster: c}
		if info, err := insp.GetQueueInfo(QueueName(c)); err == nil {
			q.Pending, q.Active, q.Scheduled, q.Retry = int64(info.Pending), int64(info.Active), int64(info.Scheduled), int64(info.Retry)
			q.LatencySeconds = info.Latency.Seconds()
		}
		if n, err := st.liveWorkers(ctx, c); err == nil {
			q.Workers = n
		}
		out = append(out, q)
	}
	return out
}
