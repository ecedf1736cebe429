package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mvq-dev/mvq/errs"
)

// createOutcome is what creating a job did.
type createOutcome int8

const (
	jobCreated     createOutcome = iota // recorded (with its plan task, see enqueuePlan)
	jobJoined                           // a PENDING job of the view with the same fingerprint: nothing written
	jobIDTaken                          // a record with the id exists: nothing written
	jobBacklogFull                      // the cluster has the backlog limit of unfinished jobs: nothing written
	jobNoWorker                         // no live worker serves the cluster: nothing written
	jobNoJoin                           // store.join only: no PENDING job to join, nothing written
)

// newJob is a job record to create and the checks it must pass.
type newJob struct {
	job         *Job   // the record (state PENDING, CreatedAt now)
	request     []byte // the job's options as JSON
	fingerprint string // joins a PENDING job with the same one; "": never joins
	backlog     int    // the cluster's limit of unfinished jobs; 0: none
	freshID     bool   // job.ID is a new UUIDv7 made for this submit
	plan        planWrite
}

// joinedJob is the PENDING job id (created at unix ms created) that the
// submit of j joined, as far as the submit knows it: its view, type and
// request are j's (the join is by the fingerprint of the effective
// options); what else its record holds (trace, cause, trigger) is not read.
func joinedJob(j *Job, id string, created int64) *Job {
	return &Job{ID: id, Type: j.Type, View: j.View, State: StatePending, CreatedAt: time.UnixMilli(created).UTC(),
		Request: j.Request, Cluster: j.Cluster, ManifestChecksum: j.ManifestChecksum, viewID: j.viewID}
}

// join joins the view's PENDING job with fingerprint fp (scriptJoin)
// without creating one: jobJoined with that job (joinedJob of j),
// jobNoWorker, or jobNoJoin (the caller creates). j is the job a create
// would record.
func (s *store) join(ctx context.Context, j *Job, fp string) (createOutcome, *Job, error) {
	keys := []string{viewPendingKey(j.viewID), workersKey(j.Cluster), liveJobsKey(j.Cluster)}
	now := j.CreatedAt.UnixMilli()
	res, err := s.creates.run(ctx, s.rdb, scriptJoin, "jobs.join", keys, []any{fp, now, jobKey(""), lostPlanAge.Milliseconds(), j.ID})
	if err != nil {
		return 0, nil, redisErr("join job", err)
	}
	switch r := res.(type) {
	case []any:
		if joined := joinAnswer(j, r); joined != nil {
			return jobJoined, joined, nil
		}
	case int64:
		switch r {
		case 0:
			return jobNoJoin, nil, nil
		case -3:
			return jobNoWorker, nil, nil
		}
	}
	return 0, nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("join job: unexpected answer %v", res)}
}

// joinAnswer is the job that j joined from a script's {id, created ms}
// answer; nil when the answer is not one.
func joinAnswer(j *Job, r []any) *Job {
	if len(r) != 2 {
		return nil
	}
	id, _ := r[0].(string)
	ms, _ := r[1].(string)
	created, err := strconv.ParseInt(ms, 10, 64)
	if id == "" || err != nil {
		return nil
	}
	return joinedJob(j, id, created)
}

// create records a new job, indexes it, queues it on its view and
// cluster and, unless n.plan is empty, writes its plan task, all in one
// step (scriptCreate). For jobJoined it returns the joined job (joinedJob).
func (s *store) create(ctx context.Context, n newJob) (createOutcome, *Job, error) {
	j := n.job
	now := j.CreatedAt
	trig := ""
	if j.Trigger != nil {
		b, _ := json.Marshal(j.Trigger)
		trig = string(b)
	}
	viewID, _ := json.Marshal(j.viewID)
	keys := append([]string{jobKey(j.ID), eventsKey(j.ID), allJobsKey, viewJobsKey(j.viewID), viewQueueKey(j.viewID),
		liveJobsKey(j.Cluster), workersKey(j.Cluster), viewPendingKey(j.viewID)}, n.plan.keys...)
	created := formatTime(now)
	// The record's EXISTS is always made: go-redis runs a command again
	// after a read timeout, and a second run of this script must find the
	// record it wrote the first time instead of writing it over (and
	// queueing its plan task twice). Given no record, the plan task of an
	// id made for this call (freshID) cannot exist: it is written with the
	// record only, so its EXISTS is left out.
	fresh, known := "", ""
	if n.freshID {
		fresh = "fresh"
	}
	if _, ok := s.queues.Load(n.plan.queue); ok {
		known = "known"
	}
	args := make([]any, 0, 15+2*15)
	args = append(args, j.ID, created, fresh, known, n.backlog, now.UnixMilli(),
		n.fingerprint, pendingIndexTTL.Milliseconds(), jobKey(""), lostPlanAge.Milliseconds(),
		string(n.plan.msg), n.plan.taskID, now.UnixNano(), n.plan.queue, n.plan.runAt,
		fID, j.ID, fType, j.Type, fView, j.View, fViewID, string(viewID), fState, string(j.State),
		fCreated, created, fCreatedMs, now.UnixMilli(), fRequest, string(n.request), fCluster, j.Cluster, fCause, j.Cause, fProgressAt, created)
	// A new record holds what is known at accept; the phase and the
	// progress counters start absent (decodeJob and the scripts read an
	// absent one as "" or 0), and so do the optional fields left empty.
	for _, f := range [][2]string{{fChecksum, j.ManifestChecksum}, {fTraceID, j.TraceID}, {fTrigger, trig}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	// Concurrent accepts share round trips (scriptBatch).
	res, err := s.creates.run(ctx, s.rdb, scriptCreate, "jobs.create", keys, args)
	if err != nil {
		return 0, nil, redisErr("create job", err)
	}
	switch r := res.(type) {
	case []any: // {id, created ms} of the PENDING job joined
		if joined := joinAnswer(j, r); joined != nil {
			return jobJoined, joined, nil
		}
	case int64:
		switch r {
		case 1:
			if n.plan.msg != nil && known == "" {
				s.queues.Store(n.plan.queue, struct{}{})
			}
			return jobCreated, nil, nil
		case 0:
			return jobIDTaken, nil, nil
		case -2:
			return jobBacklogFull, nil, nil
		case -3:
			return jobNoWorker, nil, nil
		}
	}
	return 0, nil, &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("create job: unexpected answer %v", res)}
}
