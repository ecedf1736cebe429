package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mvq-dev/mvq/telemetry"
)

var tracer = otel.Tracer("github.com/mvq-dev/mvq/jobs")

// headerEnqueuedAt carries the enqueue time (unix nanoseconds) of a task,
// so the worker can measure how long it waited in its queue.
const headerEnqueuedAt = "mvq-enqueued-at"

// stamp returns a copy of headers with the enqueue time set. Trace context
// (traceparent) travels in the same headers, never in the payload.
func stamp(headers map[string]string) map[string]string {
	h := make(map[string]string, len(headers)+1)
	maps.Copy(h, headers)
	h[headerEnqueuedAt] = strconv.FormatInt(time.Now().UnixNano(), 10)
	return h
}

// traceHeaders adds the trace context of ctx to the headers of a job's
// plan task; workers copy them to every later task of the job, so the
// refresh request's span is the root of one trace per job.
func traceHeaders(ctx context.Context, headers map[string]string) map[string]string {
	h := make(map[string]string, len(headers)+2)
	maps.Copy(h, headers)
	otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(h))
	return h
}

// traceID is the hex trace id of ctx's span, "" without one.
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

var spanNames = map[string]string{TypePlan: "refresh.plan", TypeWorkItem: "refresh.workitem", TypeCommit: "refresh.commit"}

// tracing continues the job's trace from the task headers in a span per
// task, records queue wait (attribute messaging.queue_wait_ms and the
// mvq_workitem_queue_wait_seconds histogram) and, for work items, their
// duration and the running gauge.
func (s *Server) tracing(h asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		headers := t.Headers()
		ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(headers))
		ctx = context.WithValue(ctx, taskParentKey{}, trace.SpanContextFromContext(ctx))
		var p struct {
			JobID string `json:"job_id"`
			Index *int   `json:"index"`
		}
		_ = json.Unmarshal(t.Payload(), &p)
		queue, _ := asynq.GetQueueName(ctx)
		cluster := clusterOf(queue)
		attrs := []attribute.KeyValue{attribute.String("mvq.job_id", p.JobID), attribute.String("mvq.cluster", cluster), attribute.String("messaging.worker", s.id)}
		if p.Index != nil {
			attrs = append(attrs, attribute.Int("mvq.item_index", *p.Index))
		}
		var wait time.Duration
		if ns, err := strconv.ParseInt(headers[headerEnqueuedAt], 10, 64); err == nil {
			wait = time.Since(time.Unix(0, ns))
			if n, _ := asynq.GetRetryCount(ctx); n == 0 { // retries wait on purpose
				telemetry.QueueWait.Record(ctx, wait.Seconds(), telemetry.Attrs(attribute.String("cluster", cluster)))
			}
			attrs = append(attrs, attribute.Float64("messaging.queue_wait_ms", float64(wait.Microseconds())/1000))
		}
		name := spanNames[t.Type()]
		if name == "" {
			name = "task " + t.Type()
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
		defer span.End()
		start := time.Now()
		if t.Type() == TypeWorkItem {
			telemetry.WorkItemsRunning.Add(ctx, 1, telemetry.Attrs(attribute.String("cluster", cluster)))
			defer telemetry.WorkItemsRunning.Add(ctx, -1, telemetry.Attrs(attribute.String("cluster", cluster)))
		}
		err := h.ProcessTask(ctx, t)
		if t.Type() == TypeWorkItem && !errors.Is(err, errWaitTurn) {
			telemetry.WorkItemDuration.Record(ctx, time.Since(start).Seconds(),
				telemetry.Attrs(attribute.String("cluster", cluster), attribute.String("kind", s.kindOf(p.JobID))))
		}
		if err != nil && !errors.Is(err, errWaitTurn) {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	})
}

// kindOf is the view kind of a job whose plan this worker has seen.
func (s *Server) kindOf(jobID string) string {
	if p, _ := s.plans.Get(jobID); p != nil {
		return string(p.Kind)
	}
	return "unknown"
}

func clusterOf(queue string) string {
	if len(queue) > len(queuePrefix) && queue[:len(queuePrefix)] == queuePrefix {
		return queue[len(queuePrefix):]
	}
	return queue
}

// jobEnded records a job reaching a terminal state: mvq_refresh_jobs_total
// and mvq_refresh_job_duration_seconds by state and view kind.
func jobEnded(ctx context.Context, j *Job, state State) {
	kind := j.Kind
	if kind == "" {
		kind = "unknown" // ended before it was planned
	}
	a := telemetry.Attrs(attribute.String("state", string(state)), attribute.String("kind", kind))
	telemetry.RefreshJobs.Add(ctx, 1, a)
	if !j.CreatedAt.IsZero() {
		telemetry.JobDuration.Record(ctx, time.Since(j.CreatedAt).Seconds(), a)
	}
}

// QueueStats reads, for each cluster this worker serves, its queue's depth
// and latency (asynq) and its live workers (heartbeats), for the
// mvq_queue_* and mvq_workers_active gauges.
func (s *Server) QueueStats(ctx context.Context) []telemetry.QueueStats {
	if s.inspector == nil {
		return nil
	}
	return queueStats(ctx, s.st, s.inspector, s.cfg.Clusters)
}

// taskParentKey holds the span context a task's headers carried (the
// job's HTTP span): a step run in place inside another task's handler
// (the commit) starts its span there, so every step of a job stays a
// child of the request that started it.
type taskParentKey struct{}

// startInPlace starts the span of a job step that runs inside another
// task's handler, as a sibling of that task's span.
func startInPlace(ctx context.Context, taskType string) (context.Context, trace.Span) {
	if sc, ok := ctx.Value(taskParentKey{}).(trace.SpanContext); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return tracer.Start(ctx, spanNames[taskType], trace.WithSpanKind(trace.SpanKindConsumer))
}
