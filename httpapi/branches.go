package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// Table branches (table/branch.go): branches/create|list|delete, and the
// spec's `branch` on the operations that take one. A JSON body carries it
// as a field; the Arrow IPC and bodyless operations as the `branch` query
// parameter (taken on JSON operations too, where it must agree with the
// body). Absent, "" and "main" are the main line.

// branchArg is the branch a request names: the body's field (nil when the
// body has none) or the query parameter.
func branchArg(c *gin.Context, body *string) (string, error) {
	q, inQuery := c.GetQuery("branch")
	switch {
	case body != nil && inQuery && *body != q:
		return "", badInput("branch: the query parameter (%q) and the body (%q) disagree", q, *body)
	case body != nil:
		return *body, nil
	}
	return q, nil
}

// tableOnBranch is tableAndBody, then onBranch with the decoded body's
// branch: the table a request with a branch field reads or writes.
func (s *Server) tableOnBranch(c *gin.Context, req any, fields func() ([]string, *string)) (*table.Table, error) {
	t, err := s.tableAndBody(c, req, func() []string { id, _ := fields(); return id })
	if err != nil {
		return nil, err
	}
	_, branch := fields()
	return onBranch(c, t, branch)
}

// onBranch returns the handle on the branch of t the request names; an
// unknown branch is TableBranchNotFound (404), a bad name invalid input.
func onBranch(c *gin.Context, t *table.Table, body *string) (*table.Table, error) {
	name, err := branchArg(c, body)
	if err == nil {
		if name != "" && name != table.MainBranch {
			err = table.ValidateBranch(name) // its message names the field
		}
	}
	var b *table.Table
	if err == nil {
		b, err = t.OnBranch(c.Request.Context(), name)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// branchName is the handle branch a request's name stands for ("" for
// main).
func branchName(b string) string {
	if b == table.MainBranch {
		return ""
	}
	return b
}

func (s *Server) createBranch(c *gin.Context) error {
	var req struct {
		ID          []string `json:"id"`
		Name        *string  `json:"name"`
		FromBranch  *string  `json:"from_branch"`
		FromVersion *int64   `json:"from_version"`
	}
	t, err := s.tableAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	switch {
	case req.Name == nil:
		err = badInput("name: required")
	case req.FromVersion != nil && *req.FromVersion <= 0:
		err = badInput("from_version: must be a version of the source (>= 1, got %d)", *req.FromVersion)
	}
	if err != nil {
		return err
	}
	from := ""
	if req.FromBranch != nil {
		from = *req.FromBranch
		if from != "" && from != table.MainBranch {
			if verr := table.ValidateBranch(from); verr != nil {
				return badInput("from_branch: %s", verr.Error())
			}
		}
	}
	var v uint64
	if req.FromVersion != nil {
		v = uint64(*req.FromVersion)
	}
	if _, err := t.CreateBranch(c.Request.Context(), *req.Name, from, v); err != nil {
		if errs.CodeOf(err) == errs.CodeInvalidInput {
			err = badInput("name: %s", err.Error())
		}
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

func (s *Server) deleteBranch(c *gin.Context) error {
	var req struct {
		ID   []string `json:"id"`
		Name *string  `json:"name"`
	}
	t, err := s.tableAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if req.Name == nil {
		return badInput("name: required")
	}
	if err := table.ValidateBranch(*req.Name); err != nil {
		return badInput("name: %s", err.Error())
	}
	if err := t.DeleteBranch(c.Request.Context(), *req.Name); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

func (s *Server) listBranches(c *gin.Context) error {
	return listRefs(s, c, "branches", (*table.Table).Branches, table.BranchNames, func(b table.BranchInfo) gin.H {
		e := gin.H{"parentVersion": b.ParentVersion, "createAt": b.CreateAt, "manifestSize": b.ManifestSize}
		if b.ParentBranch != "" {
			e["parentBranch"] = b.ParentBranch
		}
		return e
	})
}

// srcBranchOption sets the refresh's src_branch (an mvq extension): a
// branch of the view's source, "main" or absent for main. A src_version
// naming a tag implies the tag's branch, and a src_branch that says
// otherwise is refused. Whether the branch exists is the engine's check
// at submit (404 naming it).
func srcBranchOption(req *refreshViewRequest, o *refresh.Options) error {
	if req.SrcBranch != nil {
		b := branchName(*req.SrcBranch)
		if b != "" {
			if err := table.ValidateBranch(b); err != nil {
				return badInput("src_branch: %s", err.Error())
			}
		}
		o.SrcBranch = b
	}
	if req.SrcVersion != nil && req.SrcVersion.Branch != "" {
		if req.SrcBranch != nil && o.SrcBranch != req.SrcVersion.Branch {
			return badInput("src_branch: %q, but src_version names a tag of branch %q", *req.SrcBranch, req.SrcVersion.Branch)
		}
		o.SrcBranch = req.SrcVersion.Branch
	}
	return nil
}
