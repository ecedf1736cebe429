package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/table"
)

// Version deletion, tags and query plans (routes added by
// versionTagRoutes).

func (s *Server) versionTagRoutes(v1 gin.IRouter) {
	t := v1.Group("/table/:id")
	t.POST("/version/delete", s.deleteVersions)
	t.POST("/tags/create", s.createTag)
	t.POST("/tags/list", s.listTags)
	t.POST("/tags/version", s.tagVersion)
	t.POST("/tags/update", s.updateTag)
	t.POST("/tags/delete", s.deleteTag)
	t.POST("/explain_plan", s.explainPlan)
	t.POST("/analyze_plan", s.analyzePlan)
}

func (s *Server) deleteVersions(c *gin.Context) {
	var req struct {
		ID     []string `json:"id"`
		Branch *string  `json:"branch"`
		Ranges *[]struct {
			Start *int64 `json:"start_version"`
			End   *int64 `json:"end_version"`
		} `json:"ranges"`
	}
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return
	}
	if req.Ranges == nil {
		fail(c, badInput("ranges: required"))
		return
	}
	ranges := make([]table.VersionRange, len(*req.Ranges))
	for i, r := range *req.Ranges {
		if r.Start == nil || r.End == nil {
			fail(c, badInput("ranges[%d]: start_version and end_version are required", i))
			return
		}
		ranges[i] = table.VersionRange{Start: *r.Start, End: *r.End}
	}
	n, err := t.DeleteVersions(c, ranges)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted_count": n})
}

type tagRequest struct {
	ID      []string `json:"id"`
	Tag     *string  `json:"tag"`
	Version *int64   `json:"version"`
	Branch  *string  `json:"branch"`
}

// tagArgs decodes a tag request; withVersion says version is required.
func (s *Server) tagArgs(c *gin.Context, withVersion bool) (*table.Table, string, uint64, bool) {
	var req tagRequest
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return nil, "", 0, false
	}
	var err error
	if req.Tag == nil {
		err = badInput("tag: required")
	}
	if err == nil && withVersion {
		if req.Version == nil {
			err = badInput("version: required")
		} else if *req.Version <= 0 {
			err = badInput("version: must be a version of the table (>= 1, got %d)", *req.Version)
		}
	} else if err == nil && req.Version != nil {
		err = badInput("version: not taken by this operation")
	}
	if err != nil {
		fail(c, err)
		return nil, "", 0, false
	}
	var v uint64
	if req.Version != nil {
		v = uint64(*req.Version)
	}
	return t, *req.Tag, v, true
}

func (s *Server) createTag(c *gin.Context) {
	t, tag, v, ok := s.tagArgs(c, true)
	if !ok {
		return
	}
	if err := t.CreateTag(c, tag, v); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{})
}

func (s *Server) updateTag(c *gin.Context) {
	t, tag, v, ok := s.tagArgs(c, true)
	if !ok {
		return
	}
	if err := t.UpdateTag(c, tag, v); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{})
}

func (s *Server) deleteTag(c *gin.Context) {
	t, tag, _, ok := s.tagArgs(c, false)
	if !ok {
		return
	}
	if err := t.DeleteTag(c, tag); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{})
}

func (s *Server) tagVersion(c *gin.Context) {
	t, tag, _, ok := s.tagArgs(c, false)
	if !ok {
		return
	}
	tg, err := t.TagVersion(c, tag)
	if err != nil {
		fail(c, err)
		return
	}
	resp := gin.H{"version": tg.Version}
	if tg.Branch != "" {
		resp["branch"] = tg.Branch
	}
	c.JSON(http.StatusOK, resp)
}

func (s *Server) listTags(c *gin.Context) {
	listRefs(s, c, "tags", (*table.Table).Tags, table.TagNames, func(tg table.Tag) gin.H {
		e := gin.H{"version": tg.Version, "manifestSize": tg.ManifestSize}
		if tg.Branch != "" {
			e["branch"] = tg.Branch
		}
		return e
	})
}

// listRefs answers a paged list of a table's refs (tags, branches) under
// field: read reads them all, names sorts their names, entry shapes one.
func listRefs[V any](s *Server, c *gin.Context, field string, read func(*table.Table, context.Context) (map[string]V, error), names func(map[string]V) []string, entry func(V) gin.H) {
	var req struct {
		ID        []string `json:"id"`
		PageToken *string  `json:"page_token"`
		Limit     *int64   `json:"limit"`
	}
	t, ok := s.tableAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	token, limit, err := page(c, req.PageToken, req.Limit)
	if err != nil {
		fail(c, err)
		return
	}
	refs, err := read(t, c)
	if err != nil {
		fail(c, err)
		return
	}
	shown, next := table.Page(names(refs), token, limit)
	out := make(map[string]any, len(shown))
	for _, n := range shown {
		out[n] = entry(refs[n])
	}
	resp := gin.H{field: out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
}

func (s *Server) explainPlan(c *gin.Context) {
	var req struct {
		ID      []string      `json:"id"`
		Branch  *string       `json:"branch"`
		Query   *queryRequest `json:"query"`
		Verbose *bool         `json:"verbose"`
	}
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return
	}
	var err error
	if req.Query == nil {
		err = badInput("query: required")
	}
	if err == nil && req.Verbose != nil && *req.Verbose {
		err = badInput("verbose: not supported; the plan is DuckDB's physical plan")
	}
	if err == nil {
		err = checkBodyID(t.ID(), req.Query.ID)
	}
	if err == nil && req.Query.Branch != nil && branchName(*req.Query.Branch) != t.Branch() {
		err = badInput("query.branch: %q is not the request's branch", *req.Query.Branch)
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.plan(c, t, *req.Query, false)
}

func (s *Server) analyzePlan(c *gin.Context) {
	var req queryRequest
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return
	}
	s.plan(c, t, req, true)
}

// plan answers explain_plan (analyze false) and analyze_plan.
func (s *Server) plan(c *gin.Context, t *table.Table, req queryRequest, analyze bool) {
	q, err := req.options()
	if err != nil {
		fail(c, err)
		return
	}
	plan, err := t.Explain(c, q, analyze)
	if err != nil {
		fail(c, queryErr(err))
		return
	}
	// The REST form of both answers is the plan as a JSON string.
	c.JSON(http.StatusOK, strings.TrimRight(plan, "\n"))
}

// versionRef is a refresh's src_version: a version number, or (an
// extension of the spec's integer) the name of a tag of the source.
type versionRef struct {
	Version int64
	Tag     string
	// Branch is the branch of the version a tag named ("": main).
	Branch string
}

func (r *versionRef) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &r.Tag); err != nil {
			return err
		}
		if r.Tag == "" {
			return badInput("src_version: an empty tag")
		}
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var n json.Number
	if err := d.Decode(&n); err != nil {
		return badInput("src_version: want a version number or a tag name")
	}
	v, err := n.Int64()
	if err != nil {
		return badInput("src_version: %s is not a version number", n)
	}
	r.Version = v
	return nil
}

// resolveSrcTag turns a src_version naming a tag into the version the tag
// points at, on the view's source table (found by identity, as refresh
// finds it).
func (v *ViewRoutes) resolveSrcTag(ctx context.Context, id []string, ref *versionRef) error {
	if ref == nil || ref.Tag == "" {
		return nil
	}
	view, err := v.Engine.View(ctx, id)
	if err != nil {
		return err
	}
	src, err := v.Engine.Source(ctx, view)
	if err != nil {
		return err
	}
	tg, err := src.TagVersion(ctx, ref.Tag)
	if err != nil {
		return err
	}
	ref.Version, ref.Tag, ref.Branch = int64(tg.Version), "", tg.Branch
	return nil
}
