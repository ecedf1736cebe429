package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
)

// State is a job's state: one of the State constants. The scripts name
// the states through the same constants (scripts.go).
type State string

// MarshalBinary lets a State go to Redis as a command argument as it is
// (go-redis refuses named string types that do not implement it).
func (s State) MarshalBinary() ([]byte, error) { return []byte(s), nil }

// Job states.
const (
	StatePending   State = "PENDING"
	StateRunning   State = "RUNNING"
	StateDone      State = "DONE"
	StateFailed    State = "FAILED"
	StateCancelled State = "CANCELLED"
)

// Phases of a RUNNING job. A job that is not RUNNING has phase "".
const (
	PhasePlanning   = "planning"
	PhaseExpanding  = "expanding"
	PhaseCommitting = "committing"
)

// JobTypeRefresh is a refresh of a view (JobTypeBackfill: userlog.go).
const JobTypeRefresh = "refresh"

// Event types.
const (
	EventState    = "state"    // the job changed state
	EventPhase    = "phase"    // a RUNNING job moved to another phase
	EventProgress = "progress" // a work item finished
)

// Retention of a terminal job's data in Redis.
const (
	JobRetention      = 7 * 24 * time.Hour // record and events
	DispatchRetention = 24 * time.Hour     // plan, item results
	// CheckpointRetention is how long a finished work item's checkpoint
	// record lives; the staged files of a stopped job stay while its
	// item results do (DispatchRetention, counted from its end).
	CheckpointRetention = DispatchRetention
)

// eventsMaxLen caps a job's event stream (approximately: MAXLEN ~).
const eventsMaxLen = 1000

// Terminal reports whether a job in state s will never change again.
func Terminal(s State) bool {
	return s == StateDone || s == StateFailed || s == StateCancelled
}

// Job is a refresh job as the API shows it.
type Job struct {
	ID               string          `json:"job_id"`
	Type             string          `json:"job_type"`
	View             string          `json:"view"`           // identifier joined with "$"
	Kind             string          `json:"kind,omitempty"` // the view's kind, once planned
	State            State           `json:"state"`
	Phase            string          `json:"phase"`
	CreatedAt        time.Time       `json:"created_at"`
	StartedAt        *time.Time      `json:"started_at,omitempty"`
	FinishedAt       *time.Time      `json:"finished_at,omitempty"`
	Request          refresh.Options `json:"request"` // effective options
	Cluster          string          `json:"cluster"`
	ManifestChecksum string          `json:"manifest_checksum"`
	TraceID          string          `json:"trace_id,omitempty"`
	// Cause is what submitted the job (CauseAPI, CauseAuto, CauseSchedule,
	// CauseNotification, CauseTargetLag, CauseResume); Trigger, for automatic jobs, the source version
	// that caused it (the job refreshes to the latest one when it plans).
	Cause    string          `json:"cause"`
	Trigger  *Trigger        `json:"trigger,omitempty"`
	Progress Progress        `json:"progress"`
	Result   *refresh.Result `json:"result,omitempty"`
	Failure  *Failure        `json:"failure,omitempty"`
	// Coalesced is set on the job Submit returns when the request joined
	// this PENDING job instead of creating one (not stored).
	Coalesced bool `json:"-"`

	viewID     []string
	progressAt time.Time // last event; zero when unknown
}

// ViewID is the view identifier as parts.
func (j *Job) ViewID() []string { return append([]string(nil), j.viewID...) }

// Progress counts a job's work. MaxRunning is the peak number of its work
// items whose handlers ran at the same time, across all workers; it never
// exceeds the request's concurrency.
type Progress struct {
	WorkItemsTotal  int64 `json:"work_items_total"`
	WorkItemsDone   int64 `json:"work_items_done"`
	WorkItemsFailed int64 `json:"work_items_failed"`
	RowsRead        int64 `json:"rows_read"`
	RowsWritten     int64 `json:"rows_written"`
	MaxRunning      int64 `json:"max_running"`
	// WorkItemsReused counts the done items whose output was copied from
	// an earlier job's checkpoint instead of expanded (counted in
	// WorkItemsDone too).
	WorkItemsReused int64 `json:"work_items_reused"`
}

// Failure says why a job FAILED. Retryable is true when the last error was
// transient (retries ran out) and submitting the refresh again may succeed.
type Failure struct {
	Phase     string `json:"phase"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Event is one entry of a job's event stream. Its ID is the Redis stream
// id, usable as lastID to resume.
type Event struct {
	ID       string    `json:"id"`
	JobID    string    `json:"job_id"`
	Time     time.Time `json:"time"`
	Type     string    `json:"type"`
	State    State     `json:"state"`
	Phase    string    `json:"phase"`
	Message  string    `json:"message"`
	Progress Progress  `json:"progress"`
}

// Terminal reports whether the event is the job's last: it entered a
// terminal state.
func (e Event) Terminal() bool { return e.Type == EventState && Terminal(e.State) }

// Hash fields of the job record.
const (
	fID          = "id"
	fType        = "type"
	fView        = "view"
	fViewID      = "view_id" // JSON array
	fState       = "state"
	fPhase       = "phase"
	fCreated     = "created_at"
	fCreatedMs   = "created_ms" // unix ms of created_at: the first event's id (emit)
	fStarted     = "started_at"
	fFinished    = "finished_at"
	fRequest     = "request" // JSON refresh.Options
	fCluster     = "cluster"
	fChecksum    = "manifest_checksum"
	fTraceID     = "trace_id"
	fKind        = "kind"
	fCause       = "cause"
	fTrigger     = "trigger" // JSON Trigger ("" for none)
	fResult      = "result"  // JSON refresh.Result
	fFailure     = "failure" // JSON Failure
	fTotal       = "items_total"
	fDone        = "items_done"
	fFailed      = "items_failed"
	fRowsRead    = "rows_read"
	fRowsWritten = "rows_written"
	fMaxRunning  = "max_running"
	fReused      = "items_reused"
	fReleased    = "released"    // items released so far (dispatch counter)
	fProgressAt  = "progress_at" // time of the last event (stall detection)
)

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

func parseCount(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// decodeJob builds a Job from its record's hash fields.
func decodeJob(m map[string]string) (*Job, error) {
	bad := func(field string, err error) error {
		return &errs.Error{Code: errs.CodeInternal, Message: fmt.Sprintf("job record %s: field %s is corrupt", m[fID], field), Err: err}
	}
	j := &Job{
		ID:               m[fID],
		Type:             m[fType],
		View:             m[fView],
		State:            State(m[fState]),
		Phase:            m[fPhase],
		Cluster:          m[fCluster],
		ManifestChecksum: m[fChecksum],
		TraceID:          m[fTraceID],
		Kind:             m[fKind],
		Cause:            m[fCause],
		Progress: Progress{
			WorkItemsTotal:  parseCount(m[fTotal]),
			WorkItemsDone:   parseCount(m[fDone]),
			WorkItemsFailed: parseCount(m[fFailed]),
			RowsRead:        parseCount(m[fRowsRead]),
			RowsWritten:     parseCount(m[fRowsWritten]),
			MaxRunning:      parseCount(m[fMaxRunning]),
			WorkItemsReused: parseCount(m[fReused]),
		},
	}
	var err error
	if j.CreatedAt, err = parseTime(m[fCreated]); err != nil {
		return nil, bad(fCreated, err)
	}
	for _, f := range []struct {
		name string
		dst  **time.Time
	}{{fStarted, &j.StartedAt}, {fFinished, &j.FinishedAt}} {
		if s := m[f.name]; s != "" {
			t, err := parseTime(s)
			if err != nil {
				return nil, bad(f.name, err)
			}
			*f.dst = &t
		}
	}
	if s := m[fProgressAt]; s != "" {
		j.progressAt, _ = parseTime(s)
	}
	if err := json.Unmarshal([]byte(m[fViewID]), &j.viewID); err != nil {
		return nil, bad(fViewID, err)
	}
	if err := json.Unmarshal([]byte(m[fRequest]), &j.Request); err != nil {
		return nil, bad(fRequest, err)
	}
	if j.Cause == "" {
		j.Cause = CauseAPI // jobs recorded before causes were
	}
	if s := m[fTrigger]; s != "" {
		j.Trigger = new(Trigger)
		if err := json.Unmarshal([]byte(s), j.Trigger); err != nil {
			return nil, bad(fTrigger, err)
		}
	}
	if s := m[fResult]; s != "" {
		j.Result = new(refresh.Result)
		if err := json.Unmarshal([]byte(s), j.Result); err != nil {
			return nil, bad(fResult, err)
		}
	}
	if s := m[fFailure]; s != "" {
		j.Failure = new(Failure)
		if err := json.Unmarshal([]byte(s), j.Failure); err != nil {
			return nil, bad(fFailure, err)
		}
	}
	return j, nil
}

// decodeEvent builds an Event from a stream entry's fields.
// firstEvent is job j's first event ("submitted"), as emit writes it
// into the stream after the fact: id created_ms-0, the values of a new
// PENDING record.
func firstEvent(j *Job) Event {
	return decodeEvent(j.ID, fmt.Sprintf("%d-0", j.CreatedAt.UnixMilli()), map[string]any{
		"type": "state", "state": string(StatePending), "phase": "", "message": "submitted", "time": formatTime(j.CreatedAt),
		fTotal: "0", fDone: "0", fFailed: "0", fRowsRead: "0", fRowsWritten: "0", fMaxRunning: "0", fReused: "0",
	})
}

// decodeEvent builds an Event from a stream entry's fields.
func decodeEvent(jobID, id string, v map[string]any) Event {
	s := func(k string) string {
		x, _ := v[k].(string)
		return x
	}
	t, _ := parseTime(s("time"))
	return Event{
		ID:      id,
		JobID:   jobID,
		Time:    t,
		Type:    s("type"),
		State:   State(s("state")),
		Phase:   s("phase"),
		Message: s("message"),
		Progress: Progress{
			WorkItemsTotal:  parseCount(s(fTotal)),
			WorkItemsDone:   parseCount(s(fDone)),
			WorkItemsFailed: parseCount(s(fFailed)),
			RowsRead:        parseCount(s(fRowsRead)),
			RowsWritten:     parseCount(s(fRowsWritten)),
			MaxRunning:      parseCount(s(fMaxRunning)),
			WorkItemsReused: parseCount(s(fReused)),
		},
	}
}
