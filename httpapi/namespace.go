package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

func fmtAny(v any) string { return fmt.Sprint(v) }

// MaxPageLimit caps list page sizes.
const MaxPageLimit = 10000

func (s *Server) createNamespace(c *gin.Context) {
	var req struct {
		ID         []string          `json:"id"`
		Mode       string            `json:"mode"`
		Properties map[string]string `json:"properties"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	if err := s.cat.CreateNamespace(c, id, req.Mode, req.Properties); err != nil {
		fail(c, err)
		return
	}
	props := req.Properties
	if props == nil {
		props = map[string]string{}
	}
	c.JSON(http.StatusOK, gin.H{"properties": props})
}

// page reads page_token and limit from the query string or the body.
func page(c *gin.Context, bodyToken *string, bodyLimit *int64) (string, int, error) {
	token := c.Query("page_token")
	if token == "" && bodyToken != nil {
		token = *bodyToken
	}
	limit, err := queryInt(c, "limit", MaxPageLimit)
	if err != nil {
		return "", 0, err
	}
	if limit == 0 && bodyLimit != nil {
		if *bodyLimit < 0 || *bodyLimit > MaxPageLimit {
			return "", 0, badInput("limit: must be between 0 and %d (got %d)", MaxPageLimit, *bodyLimit)
		}
		limit = *bodyLimit
	}
	return token, int(limit), nil
}

type listBody struct {
	ID        []string `json:"id"`
	PageToken *string  `json:"page_token"`
	Limit     *int64   `json:"limit"`
}

func (s *Server) listNamespaces(c *gin.Context) {
	s.list(c, "namespaces", s.cat.ListNamespaces)
}

func (s *Server) listTables(c *gin.Context) {
	s.list(c, "tables", s.cat.ListTables)
}

func (s *Server) list(c *gin.Context, key string, fn func(ctx context.Context, id []string) ([]string, error)) {
	id, err := pathID(c)
	if err != nil {
		fail(c, err)
		return
	}
	var body listBody
	if c.Request.Method == http.MethodPost {
		if err := bindJSON(c, &body); err != nil {
			fail(c, err)
			return
		}
	}
	token, limit, err := page(c, body.PageToken, body.Limit)
	if err != nil {
		fail(c, err)
		return
	}
	names, err := fn(c, id)
	if err != nil {
		fail(c, err)
		return
	}
	out, next := table.Page(names, token, limit)
	resp := gin.H{key: out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
}

func (s *Server) describeNamespace(c *gin.Context) {
	var req struct {
		ID []string `json:"id"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	props, err := s.cat.DescribeNamespace(c, id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"properties": props})
}

func (s *Server) namespaceExists(c *gin.Context) {
	var req struct {
		ID []string `json:"id"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	if _, err := s.cat.DescribeNamespace(c, id); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusOK)
}

func (s *Server) dropNamespace(c *gin.Context) {
	var req struct {
		ID       []string          `json:"id"`
		Mode     string            `json:"mode"`
		Behavior string            `json:"behavior"`
		Cascade  *bool             `json:"cascade"`
		Context  map[string]string `json:"context"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	// Views elsewhere that read its tables: 409, or dropped with cascade
	// (namespace_drop.go).
	cascade, err := dropRequest{Cascade: req.Cascade, Context: req.Context}.cascade()
	if err != nil {
		fail(c, err)
		return
	}
	if strings.EqualFold(req.Behavior, "cascade") {
		views, err := s.viewsOutside(c, id)
		if err != nil && errs.CodeOf(err) != errs.CodeNamespaceNotFound {
			fail(c, err)
			return
		}
		if len(views) > 0 && !cascade {
			fail(c, errs.Errorf(errs.CodeInvalidTableState, "namespace %s has tables that views outside it read: %s; drop them first, or send \"cascade\": true to drop them too", table.JoinID(id), sortedIDs(views)))
			return
		}
		if err := s.dropDependents(c, views); err != nil {
			fail(c, err)
			return
		}
	}
	if err := s.cat.DropNamespace(c, id, req.Mode, req.Behavior); err != nil {
		fail(c, err)
		return
	}
	s.dropped(c, id, true)
	c.JSON(http.StatusOK, gin.H{"properties": gin.H{}})
}
