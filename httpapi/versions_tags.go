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

func (s *Server) deleteVersions(c *gin.Context) error {
	var req struct {
		ID     []string `json:"id"`
		Branch *string  `json:"branch"`
		Ranges *[]struct {
			Start *int64 `json:"start_version"`
			End   *int64 `json:"end_version"`
		} `json:"ranges"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if req.Ranges == nil {
		return badInput("ranges: required")
	}
	ranges := make([]table.VersionRange, len(*req.Ranges))
	for i, r := range *req.Ranges {
		if r.Start == nil || r.End == nil {
			return badInput("ranges[%d]: start_version and end_version are required", i)
		}
		ranges[i] = table.VersionRange{Start: *r.Start, End: *r.End}
	}
	n, err := t.DeleteVersions(c.Request.Context(), ranges)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"deleted_count": n})
	return nil
}

type tagRequest struct {
	ID      []string `json:"id"`
	Tag     *string  `json:"tag"`
	Version *int64   `json:"version"`
	Branch  *string  `json:"branch"`
}

// tagArgs decodes a tag request; withVersion says version is required.
func (s *Server) tagArgs(c *gin.Context, withVersion bool) (*table.Table, string, uint64, error) {
	var req tagRequest
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return nil, "", 0, err
	}
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
		return nil, "", 0, err
	}
	var v uint64
	if req.Version != nil {
		v = uint64(*req.Version)
	}
	return t, *req.Tag, v, nil
}

func (s *Server) createTag(c *gin.Context) error {
	t, tag, v, err := s.tagArgs(c, true)
	if err != nil {
		return err
	}
	if err := t.CreateTag(c.Request.Context(), tag, v); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

func (s *Server) updateTag(c *gin.Context) error {
	t, tag, v, err := s.tagArgs(c, true)
	if err != nil {
		return err
	}
	if err := t.UpdateTag(c.Request.Context(), tag, v); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

func (s *Server) deleteTag(c *gin.Context) error {
	t, tag, _, err := s.tagArgs(c, false)
	if err != nil {
		return err
	}
	if err := t.DeleteTag(c.Request.Context(), tag); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

func (s *Server) tagVersion(c *gin.Context) error {
	t, tag, _, err := s.tagArgs(c, false)
	if err != nil {
		return err
	}
	tg, err := t.TagVersion(c.Request.Context(), tag)
	if err != nil {
		return err
	}
	resp := gin.H{"version": tg.Version}
	if tg.Branch != "" {
		resp["branch"] = tg.Branch
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) listTags(c *gin.Context) error {
	return listRefs(s, c, "tags", (*table.Table).Tags, table.TagNames, func(tg table.Tag) gin.H {
		e := gin.H{"version": tg.Version, "manifestSize": tg.ManifestSize}
		if tg.Branch != "" {
			e["branch"] = tg.Branch
		}
		return e
	})
}

// listRefs answers a paged list of a table's refs (tags, branches) under
// field: read reads them all, names sorts their names, entry shapes one.
func listRefs[V any](s *Server, c *gin.Context, field string, read func(*table.Table, context.Context) (map[string]V, error), names func(map[string]V) []string, entry func(V) gin.H) error {
	var req struct {
		ID        []string `json:"id"`
		PageToken *string  `json:"page_token"`
		Limit     *int64   `json:"limit"`
	}
	t, err := s.tableAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	token, limit, err := page(c, req.PageToken, req.Limit)
	if err != nil {
		return err
	}
	refs, err := read(t, c.Request.Context())
	if err != nil {
		return err
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
	return nil
}

func (s *Server) explainPlan(c *gin.Context) error {
	var req struct {
		ID      []string      `json:"id"`
		Branch  *string       `json:"branch"`
		Query   *queryRequest `json:"query"`
		Verbose *bool         `json:"verbose"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
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
		return err
	}
	return s.plan(c, t, *req.Query, false)
}

func (s *Server) analyzePlan(c *gin.Context) error {
	var req queryRequest
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	return s.plan(c, t, req, true)
}

// plan answers explain_plan (analyze false) and analyze_plan.
func (s *Server) plan(c *gin.Context, t *table.Table, req queryRequest, analyze bool) error {
	q, err := req.options()
	if err != nil {
		return err
	}
	plan, err := t.Explain(c.Request.Context(), q, analyze)
	if err != nil {
		return queryErr(err)
	}
	// The REST form of both answers is the plan as a JSON string.
	c.JSON(http.StatusOK, strings.TrimRight(plan, "\n"))
	return nil
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
