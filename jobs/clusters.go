package jobs

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

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

// Pool is a cluster's queue and the workers serving it, for the operations
// page.
type Pool struct {
	Cluster string `json:"cluster"`
	Queue   string `json:"queue"`
	// Paused: workers take no task from the queue (asynq's pause).
	Paused         bool    `json:"paused"`
	Pending        int64   `json:"pending"`
	Active         int64   `json:"active"`
	Scheduled      int64   `json:"scheduled"`
	Retry          int64   `json:"retry"`
	LatencySeconds float64 `json:"latency_seconds"`
	// LiveWorkers counts the workers whose heartbeat is current; Workers
	// are the asynq servers that poll the queue, with their concurrency.
	LiveWorkers int64        `json:"live_workers"`
	Workers     []PoolWorker `json:"workers"`
}

// PoolWorker is one worker process serving a pool.
type PoolWorker struct {
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Concurrency int       `json:"concurrency"`
	Busy        int       `json:"busy"` // tasks running now, all its queues
	Status      string    `json:"status"`
	Started     time.Time `json:"started"`
}

// Pools reads every known cluster's queue and workers. It only reads:
// a queue asynq has not seen yet reports zeros.
func (c *ClusterStats) Pools(ctx context.Context) ([]Pool, error) {
	servers, err := c.inspector.Servers()
	if err != nil {
		return nil, redisErr("worker servers", err)
	}
	var out []Pool
	for _, q := range queueStats(ctx, c.st, c.inspector, c.Clusters(ctx)) {
		p := Pool{Cluster: q.Cluster, Queue: QueueName(q.Cluster), Pending: q.Pending, Active: q.Active, Scheduled: q.Scheduled,
			Retry: q.Retry, LatencySeconds: q.LatencySeconds, LiveWorkers: q.Workers, Workers: []PoolWorker{}}
		if info, err := c.inspector.GetQueueInfo(p.Queue); err == nil {
			p.Paused = info.Paused
		}
		for _, s := range servers {
			if _, ok := s.Queues[p.Queue]; ok {
				p.Workers = append(p.Workers, PoolWorker{Host: s.Host, PID: s.PID, Concurrency: s.Concurrency,
					Busy: len(s.ActiveWorkers), Status: s.Status, Started: s.Started})
			}
		}
		slices.SortFunc(p.Workers, func(a, b PoolWorker) int {
			if a.Host != b.Host {
				return strings.Compare(a.Host, b.Host)
			}
			return a.PID - b.PID
		})
		out = append(out, p)
	}
	return out, nil
}
