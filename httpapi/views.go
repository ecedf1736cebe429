package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/views"
)

// ViewRoutes serves materialized views and refresh jobs.
type ViewRoutes struct {
	Engine *refresh.Engine
	Jobs   *jobs.Client
	// Catalog, when set, lets a view create whose initial refresh the
	// backlog refused (after the advisory check passed) drop the view
	// again, so a 503 leaves nothing behind.
	Catalog *table.Catalog
	// MaxStreams (MVQ_MAX_EVENT_STREAMS) bounds the job event streams
	// open at once, MaxStreamsPerPrincipal
	// (MVQ_MAX_EVENT_STREAMS_PER_PRINCIPAL) one principal's; a follower
	// past either is a 429 with Retry-After (streams.go). Zero: defaults.
	MaxStreams             int
	MaxStreamsPerPrincipal int
	// Pools, when set, serves the worker pools' routes (pools.go).
	Pools   PoolAdmin
	streams streamSlots
	appOnce sync.Once
	uses    *views.Service // app
}

var _ Views = (*ViewRoutes)(nil)

// The capabilities of Views (server.go); the use cases are the views
// package's.

func (v *ViewRoutes) Ping(ctx context.Context) error { return v.Jobs.Ping(ctx) }

func (v *ViewRoutes) IdempotencyStore() IdempotencyStore {
	if v.Jobs == nil {
		return nil
	}
	return v.Jobs.Idempotency()
}

// app returns the view use cases over v's engine, job client and catalog,
// made on first use.
func (v *ViewRoutes) app() *views.Service {
	v.appOnce.Do(func() { v.uses = views.New(v.Engine, v.Jobs, v.Catalog) })
	return v.uses
}

func (v *ViewRoutes) ToDrop(ctx context.Context, id []string) (all, direct [][]string, err error) {
	return v.app().ToDrop(ctx, id)
}

func (v *ViewRoutes) Dropped(ctx context.Context, id []string, ns bool) error {
	return v.app().Dropped(ctx, id, ns)
}

func (v *ViewRoutes) JobView(ctx context.Context, jobID string) ([]string, error) {
	return v.Jobs.JobView(ctx, jobID)
}

type createViewRequest struct {
	ID           []string           `json:"id"`
	Kind         *string            `json:"kind"`
	SourceQuery  *string            `json:"source_query"`
	OutputSchema *string            `json:"output_schema"`
	UDTFSpec     *refresh.UDTFEntry `json:"udtf_spec"`
	WithNoData   *bool              `json:"with_no_data"`
	AutoRefresh  *bool              `json:"auto_refresh"`
	// RefreshEvery (an mvq extension) refreshes the view on a schedule
	// (refresh_settings.go).
	RefreshEvery *string `json:"refresh_every"`
	// TargetLag (an mvq extension) keeps the view at most that far behind
	// its source (refresh_settings.go).
	TargetLag *string             `json:"target_lag"`
	Refresh   *refreshViewRequest `json:"refresh"`
}

func (v *ViewRoutes) createView(c *gin.Context) error {
	ctx := c.Request.Context()
	var req createViewRequest
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	switch {
	case req.Kind == nil || *req.Kind == "":
		return badInput("kind: required (%s)", strings.Join(refresh.KindNames(), ", "))
	case req.SourceQuery == nil || strings.TrimSpace(*req.SourceQuery) == "":
		return badInput("source_query: required")
	case req.OutputSchema == nil:
		return badInput("output_schema: required (an empty string derives it)")
	}
	every, err := refreshEvery(req.RefreshEvery, false)
	if err != nil {
		return err
	}
	lag, err := targetLag(req.TargetLag, false)
	if err != nil {
		return err
	}
	if err := checkLagWith(lag, every, req.AutoRefresh != nil && *req.AutoRefresh); err != nil {
		return err
	}
	cr := refresh.CreateRequest{Kind: *req.Kind, SourceQuery: *req.SourceQuery, OutputSchema: *req.OutputSchema, UDTFSpec: req.UDTFSpec}
	if req.AutoRefresh != nil {
		cr.AutoRefresh = *req.AutoRefresh
	}
	withData := req.WithNoData == nil || !*req.WithNoData
	create := views.CreateRequest{View: cr, Every: every, TargetLag: lag, WithNoData: !withData}
	if withData {
		if create.Refresh, err = refreshOptions(req.Refresh); err != nil {
			return err
		}
	}
	made, err := v.app().Create(ctx, id, create)
	if err != nil {
		retryAfter(c, err)
		return err
	}
	resp := gin.H{"version": made.Manifest.Version}
	if made.Job != nil {
		resp["job_id"] = made.Job.ID
	}
	c.JSON(http.StatusCreated, resp)
	return nil
}

type refreshViewRequest struct {
	ID                      []string    `json:"id"`
	SrcVersion              *versionRef `json:"src_version"`
	MaxRowsPerFragment      *int64      `json:"max_rows_per_fragment"`
	Concurrency             *int64      `json:"concurrency"`
	IntraApplierConcurrency *int64      `json:"intra_applier_concurrency"`
	SourceTaskSize          *int64      `json:"source_task_size"`
	Cluster                 *string     `json:"cluster"`
	OutputLimit             *int64      `json:"output_limit"`
	Manifest                *string     `json:"manifest"`
	// SrcBranch (an extension): refresh from this branch of the source.
	SrcBranch *string `json:"src_branch"`
}

// maxOption bounds the integer options before they reach the engine (which
// applies its own, tighter caps).
const maxOption = 1 << 40

// intOption is an optional positive integer field of a request and where
// its value goes.
type intOption struct {
	name string
	v    *int64
	dst  *int
}

// setPositiveInts copies the options that are set, refusing any outside
// 1..maxOption with a 400 naming the field.
func setPositiveInts(opts []intOption) error {
	for _, f := range opts {
		if f.v == nil {
			continue
		}
		if *f.v <= 0 || *f.v > maxOption {
			return badInput("%s: must be a positive integer (got %d)", f.name, *f.v)
		}
		*f.dst = int(*f.v)
	}
	return nil
}

func refreshOptions(req *refreshViewRequest) (refresh.Options, error) {
	var o refresh.Options
	if req == nil {
		return o, nil
	}
	if err := setPositiveInts([]intOption{
		{"max_rows_per_fragment", req.MaxRowsPerFragment, &o.MaxRowsPerFragment},
		{"concurrency", req.Concurrency, &o.Concurrency},
		{"intra_applier_concurrency", req.IntraApplierConcurrency, &o.IntraApplierConcurrency},
		{"source_task_size", req.SourceTaskSize, &o.SourceTaskSize},
	}); err != nil {
		return o, err
	}
	if req.SrcVersion != nil {
		if req.SrcVersion.Tag != "" {
			return o, badInput("src_version: tag %q of the source is resolved when a view is refreshed, not at create; give a version number", req.SrcVersion.Tag)
		}
		if req.SrcVersion.Version <= 0 {
			return o, badInput("src_version: must be a positive version (got %d)", req.SrcVersion.Version)
		}
		o.SrcVersion = uint64(req.SrcVersion.Version)
	}
	if err := srcBranchOption(req, &o); err != nil {
		return o, err
	}
	if req.OutputLimit != nil {
		if *req.OutputLimit < 0 {
			return o, badInput("output_limit: must be >= 0 (got %d)", *req.OutputLimit)
		}
		o.OutputLimit = req.OutputLimit
	}
	if req.Cluster != nil {
		if strings.TrimSpace(*req.Cluster) == "" {
			return o, badInput("cluster: empty")
		}
		o.Cluster = *req.Cluster
	}
	if req.Manifest != nil {
		o.Manifest = *req.Manifest
	}
	return o, nil
}

func (v *ViewRoutes) refreshView(c *gin.Context) error {
	ctx := c.Request.Context()
	var req refreshViewRequest
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if err := v.resolveSrcTag(ctx, id, req.SrcVersion); err != nil {
		return err
	}
	opts, err := refreshOptions(&req)
	if err != nil {
		return err
	}
	job, err := v.Jobs.Submit(ctx, id, opts)
	if err != nil {
		retryAfter(c, err)
		return err
	}
	c.Data(http.StatusAccepted, "application/json; charset=utf-8", acceptedJSON(job))
	return nil
}

// acceptedJSON is the answer to an accepted refresh, as c.JSON of
// {"job_id", and "coalesced": true when it joined the view's PENDING job
// with the same options} writes it (keys in order), without the map and
// the reflection (it is on every accept).
func acceptedJSON(job *jobs.Job) []byte {
	id, _ := json.Marshal(job.ID)
	b := make([]byte, 0, len(id)+32)
	if job.Coalesced {
		b = append(b, `{"coalesced":true,"job_id":`...)
	} else {
		b = append(b, `{"job_id":`...)
	}
	return append(append(b, id...), '}')
}

func (v *ViewRoutes) getJob(c *gin.Context) error {
	ctx := c.Request.Context()
	// Polled by dashboards: concurrent reads of one job share a read that
	// started after each of them arrived, encoded once (jobs/jobread.go).
	id := c.Param("job_id")
	b, err := v.Jobs.GetJSON(ctx, id)
	if err == nil && requestIdentity(c) != nil {
		var view []string
		if view, err = v.Jobs.JobView(ctx, id); err == nil {
			b, err = shownJobJSON(c, view, b)
		}
	}
	if err != nil {
		return err
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
	return nil
}

type jobIDRequest struct {
	JobID string `json:"job_id"`
}

func (r jobIDRequest) check() error {
	if r.JobID == "" {
		return badInput("job_id: required")
	}
	return nil
}

func (v *ViewRoutes) describeJob(c *gin.Context) error { return v.jobByBody(c, v.Jobs.Get) }

func (v *ViewRoutes) cancelJob(c *gin.Context) error { return v.jobByBody(c, v.Jobs.Cancel) }

// jobByBody decodes {job_id} and answers the job fn returns for it.
func (v *ViewRoutes) jobByBody(c *gin.Context, fn func(context.Context, string) (*jobs.Job, error)) error {
	var req jobIDRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	job, err := fn(c.Request.Context(), req.JobID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, shownJob(c, job))
	return nil
}

func (v *ViewRoutes) listJobs(c *gin.Context) error {
	var req struct {
		View      string `json:"view"`
		State     string `json:"state"`
		PageToken string `json:"page_token"`
		Limit     *int64 `json:"limit"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	f := jobs.ListFilter{State: strings.ToUpper(req.State), PageToken: req.PageToken}
	if req.View != "" {
		id, err := table.ParseID(req.View, c.Query("delimiter"))
		if err != nil {
			return badInput("view: %v", err)
		}
		f.View = id
	}
	if req.Limit != nil {
		if *req.Limit <= 0 || *req.Limit > 1000 {
			return badInput("limit: must be between 1 and 1000 (got %d)", *req.Limit)
		}
		f.Limit = int(*req.Limit)
	}
	list, next, err := v.Jobs.List(c.Request.Context(), f)
	if err != nil {
		return err
	}
	resp := gin.H{"jobs": visibleJobs(c, list)}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

// jobEvents streams the job's events as server-sent events, ending after
// a terminal state. Last-Event-ID resumes. Streams are capped in all and
// per principal (streams.go).
func (v *ViewRoutes) jobEvents(c *gin.Context) error {
	release, why := v.slots().acquire(auth.PrincipalFrom(c.Request.Context()))
	if release == nil {
		tooManyStreams(c, why)
		return nil
	}
	defer release()
	id := c.Param("job_id")
	if _, err := v.Jobs.Get(c.Request.Context(), id); err != nil {
		return err
	}
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Writer.Flush()
	// Ends with the request, or when the server begins shutting down
	// (a stream would otherwise hold the drain to its timeout).
	ctx, cancel := StreamContext(c.Request)
	defer cancel()
	_ = v.Jobs.Events(ctx, id, c.GetHeader("Last-Event-ID"), func(e jobs.Event) error {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(c.Writer, "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data); err != nil {
			return err
		}
		c.Writer.Flush()
		return nil
	})
	return nil
}
