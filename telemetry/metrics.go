package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The instruments of deploy/metrics.txt. They are created on the global
// meter provider, which forwards to the one Setup installs (or drops
// measurements when Setup was not called). Labels stay low-cardinality:
// never a job id or a view id.
var (
	meter = otel.Meter("github.com/mvq-dev/mvq/telemetry")

	secondsBuckets = metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

	// RefreshJobs counts jobs reaching a state (state, kind).
	RefreshJobs = must(meter.Int64Counter("mvq_refresh_jobs", metric.WithDescription("Refresh jobs by the state they reached.")))
	// JobDuration is accepted → terminal (kind, state).
	JobDuration = must(meter.Float64Histogram("mvq_refresh_job_duration_seconds", metric.WithUnit("s"), secondsBuckets, metric.WithDescription("Refresh job duration from acceptance to a terminal state.")))
	// RowsRead and RowsWritten count source rows read and view rows written (cluster, kind).
	RowsRead    = must(meter.Int64Counter("mvq_refresh_rows_read", metric.WithDescription("Source rows read by work items.")))
	RowsWritten = must(meter.Int64Counter("mvq_refresh_rows_written", metric.WithDescription("View rows written by work items.")))
	// WorkItemsReused counts work items whose output was copied from an
	// earlier job's checkpoint instead of computed (cluster, kind).
	WorkItemsReused = must(meter.Int64Counter("mvq_refresh_work_items_reused", metric.WithDescription("Work items reused from an earlier job's checkpoint.")))
	// WorkItemDuration is one work item's handler time (cluster, kind).
	WorkItemDuration = must(meter.Float64Histogram("mvq_workitem_duration_seconds", metric.WithUnit("s"), secondsBuckets, metric.WithDescription("Work item processing time.")))
	// QueueWait is enqueue → start of a task (cluster).
	QueueWait = must(meter.Float64Histogram("mvq_workitem_queue_wait_seconds", metric.WithUnit("s"), secondsBuckets, metric.WithDescription("Time a task waited in its queue.")))
	// WorkItemsRunning is the work items running now in this process (cluster).
	WorkItemsRunning = must(meter.Int64UpDownCounter("mvq_workitems_running", metric.WithDescription("Work items running now.")))
	// CommitDuration and CommitConflicts describe table commits.
	CommitDuration  = must(meter.Float64Histogram("mvq_commit_duration_seconds", metric.WithUnit("s"), secondsBuckets, metric.WithDescription("Table commit duration, rebases included.")))
	CommitConflicts = must(meter.Int64Counter("mvq_commit_conflicts", metric.WithDescription("Commits that lost a race to a concurrent writer.")))
	// HTTPRequests and HTTPDuration describe API requests (route, method, status).
	HTTPRequests = must(meter.Int64Counter("mvq_http_requests", metric.WithDescription("HTTP requests by route template and status.")))
	HTTPDuration = must(meter.Float64Histogram("mvq_http_request_duration_seconds", metric.WithUnit("s"), secondsBuckets, metric.WithDescription("HTTP request duration by route template.")))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Attrs is a shorthand for a metric attribute set option.
func Attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// QueueStats is what a cluster's queue looks like now.
type QueueStats struct {
	Cluster        string
	Pending        int64
	Active         int64
	Scheduled      int64
	Retry          int64
	LatencySeconds float64
	Workers        int64
}

// RegisterQueueGauges reports mvq_queue_depth, mvq_queue_latency_seconds
// and mvq_workers_active from read (called at each collection) until the
// returned unregister is called.
func RegisterQueueGauges(read func(ctx context.Context) []QueueStats) (unregister func(), err error) {
	depth, err := meter.Int64ObservableGauge("mvq_queue_depth", metric.WithDescription("Tasks in a cluster's queue by state."))
	if err != nil {
		return nil, err
	}
	latency, err := meter.Float64ObservableGauge("mvq_queue_latency_seconds", metric.WithUnit("s"), metric.WithDescription("Age of the oldest pending task of a cluster."))
	if err != nil {
		return nil, err
	}
	workers, err := meter.Int64ObservableGauge("mvq_workers_active", metric.WithDescription("Live worker processes serving a cluster."))
	if err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, q := range read(ctx) {
			c := attribute.String("cluster", q.Cluster)
			for state, n := range map[string]int64{"pending": q.Pending, "active": q.Active, "scheduled": q.Scheduled, "retry": q.Retry} {
				o.ObserveInt64(depth, n, Attrs(c, attribute.String("state", state)))
			}
			o.ObserveFloat64(latency, q.LatencySeconds, Attrs(c))
			o.ObserveInt64(workers, q.Workers, Attrs(c))
		}
		return nil
	}, depth, latency, workers)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}

// RegisterStalenessGauge reports mvq_view_staleness_seconds per
// view_namespace from read (called at each collection; nil or empty:
// nothing). unregister stops the reports.
func RegisterStalenessGauge(read func(ctx context.Context) map[string]float64) (unregister func(), err error) {
	g, err := meter.Float64ObservableGauge("mvq_view_staleness_seconds", metric.WithUnit("s"),
		metric.WithDescription("Largest time, over the views of a namespace, since the oldest source commit a view has not refreshed from."))
	if err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for ns, v := range read(ctx) {
			o.ObserveFloat64(g, v, Attrs(attribute.String("view_namespace", ns)))
		}
		return nil
	}, g)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}
