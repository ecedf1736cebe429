package jobs

import (
	"context"
	"time"

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
// job id. Failures to record a line are dropped: the lines are advice.
func (s *Server) withLog(ctx context.Context, id string) context.Context {
	rdb := s.st.rdb
	return refresh.WithEvents(ctx, func(line string) {
		_ = scriptLog.Run(context.WithoutCancel(ctx), rdb, []string{jobKey(id), eventsKey(id)}, line, formatTime(time.Now()), eventsMaxLen).Err()
	})
}
