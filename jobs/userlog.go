package jobs

import (
	"context"

	"github.com/mvq-dev/mvq/refresh"
)

// JobTypeBackfill is a backfill of a virtual or computed column
// (refresh.Options.Backfill); it runs through the same plan, work item
// and commit tasks as a refresh.
const JobTypeBackfill = "backfill"

// EventLog carries a line from a job's work (the stderr of user code, a
// backfill's commits).
const EventLog = "log"

// jobType is the type of a job with options o.
func jobType(o refresh.Options) string {
	if o.Backfill != nil {
		return JobTypeBackfill
	}
	return JobTypeRefresh
}

// withLog returns ctx under which the engine's lines become log events of
// job id. A line that cannot be recorded is logged at debug level and
// dropped: the lines are advice, and a Redis outage would otherwise log
// every line of user code's output.
func (s *Server) withLog(ctx context.Context, id string) context.Context {
	return refresh.WithEvents(ctx, func(line string) {
		if err := s.st.logLine(context.WithoutCancel(ctx), id, line); err != nil {
			s.log.DebugContext(ctx, "jobs: log line of a job not recorded", "job_id", id, "err", err)
		}
	})
}
