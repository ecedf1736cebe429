package httpapi

import (
	"encoding/json"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/jobs"
)

// Who may read a job, and how much of it. A job is read with read on its
// view, or with refresh on it: a principal that may start and cancel the
// view's jobs follows the ones it started (and any other of that view:
// jobs coalesce, so "its own" would not be one job). The request's
// manifest (env_vars and all) is shown only to principals with write on
// the view, those who may set the view's stored manifest; others see
// RedactedManifest in its place, and the manifest_checksum.

// RedactedManifest stands for a job request's manifest in what a principal
// without write on the job's view reads.
const RedactedManifest = "(redacted: shown to principals with write on the view)"

// requestIdentity is the request's identity; nil without authentication
// (MVQ_AUTH=none), where everything is shown.
func requestIdentity(c *gin.Context) *auth.Identity {
	v, ok := c.Get(identityKey)
	if !ok {
		return nil
	}
	id, _ := v.(*auth.Identity)
	return id
}

// readsJobs reports whether id may read the jobs of view.
func readsJobs(id *auth.Identity, view []string) bool {
	return id.AllowsTable(auth.Read, view) || id.AllowsTable(auth.Refresh, view)
}

// seesManifest reports whether the request's principal sees the manifests
// of view's jobs.
func seesManifest(c *gin.Context, view []string) bool {
	id := requestIdentity(c)
	return id == nil || id.AllowsTable(auth.Write, view)
}

// shownJob is j as the request's principal may see it.
func shownJob(c *gin.Context, j *jobs.Job) *jobs.Job {
	if j == nil || j.Request.Manifest == "" || seesManifest(c, j.ViewID()) {
		return j
	}
	cp := *j
	cp.Request.Manifest = RedactedManifest
	return &cp
}

// shownJobJSON is shownJob over an encoded job (the shared read of a job
// GET): the request's manifest replaced, the rest as it was.
func shownJobJSON(c *gin.Context, view []string, b []byte) ([]byte, error) {
	if seesManifest(c, view) {
		return b, nil
	}
	var top map[string]json.RawMessage
	var req map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "decode job", Err: err}
	}
	if raw, ok := top["request"]; ok {
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, &errs.Error{Code: errs.CodeInternal, Message: "decode job request", Err: err}
		}
	}
	if m, ok := req["manifest"]; !ok || string(m) == `""` {
		return b, nil
	}
	req["manifest"], _ = json.Marshal(RedactedManifest)
	var err error
	if top["request"], err = json.Marshal(req); err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "encode job request", Err: err}
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, &errs.Error{Code: errs.CodeInternal, Message: "encode job", Err: err}
	}
	return out, nil
}
