package jobs

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

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

// scriptLog appends a log event to a RUNNING job (others are left as they
// are: a late line must not follow the terminal event).
//
// KEYS: job, events. ARGV: message, now, maxlen. Returns 1 or 0.
var scriptLog = redis.NewScript(luaEmit + `
if redis.call('HGET', KEYS[1], 'state') ~= 'RUNNING' then return 0 end
emit(KEYS[1], KEYS[2], 'log', ARGV[1], ARGV[2], ARGV[3], true)
return 1
`)

// withLog returns ctx under which the engine's lines become log events of
// job id. Failures to record a line are dropped: the lines are advice.
func (s *Server) withLog(ctx context.Context, id string) context.Context {
	rdb := s.st.rdb
	return refresh.WithEvents(ctx, func(line string) {
		_ = scriptLog.Run(context.WithoutCancel(ctx), rdb, []string{jobKey(id), eventsKey(id)}, line, formatTime(time.Now()), eventsMaxLen).Err()
	})
}
