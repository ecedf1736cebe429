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

func (s *Server) createNamespace(c *gin.Context) error {
	var req struct {
		ID         []string          `json:"id"`
		Mode       string            `json:"mode"`
		Properties map[string]string `json:"properties"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if err := s.cat.CreateNamespace(c.Request.Context(), id, req.Mode, req.Properties); err != nil {
		return err
	}
	props := req.Properties
	if props == nil {
		props = map[string]string{}
	}
	c.JSON(http.StatusOK, gin.H{"properties": props})
	return nil
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

func (s *Server) listNamespaces(c *gin.Context) error {
	return s.list(c, "namespaces", s.cat.ListNamespaces)
}

func (s *Server) listTables(c *gin.Context) error {
	return s.list(c, "tables", s.cat.ListTables)
}

func (s *Server) list(c *gin.Context, key string, fn func(ctx context.Context, id []string) ([]string, error)) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body listBody
	if c.Request.Method == http.MethodPost {
		if err := bindJSON(c, &body); err != nil {
			return err
		}
	}
	token, limit, err := page(c, body.PageToken, body.Limit)
	if err != nil {
		return err
	}
	names, err := fn(c.Request.Context(), id)
	if err != nil {
		return err
	}
	out, next := table.Page(names, token, limit)
	resp := gin.H{key: out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) describeNamespace(c *gin.Context) error {
	var req struct {
		ID []string `json:"id"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	props, err := s.cat.DescribeNamespace(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"properties": props})
	return nil
}

func (s *Server) namespaceExists(c *gin.Context) error {
	var req struct {
		ID []string `json:"id"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if _, err := s.cat.DescribeNamespace(c.Request.Context(), id); err != nil {
		return err
	}
	c.Status(http.StatusOK)
	return nil
}

func (s *Server) dropNamespace(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		ID       []string          `json:"id"`
		Mode     string            `json:"mode"`
		Behavior string            `json:"behavior"`
		Cascade  *bool             `json:"cascade"`
		Context  map[string]string `json:"context"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	// Views elsewhere that read its tables: 409, or dropped with cascade
	// (namespace_drop.go).
	cascade, err := dropRequest{Cascade: req.Cascade, Context: req.Context}.cascade()
	if err != nil {
		return err
	}
	if strings.EqualFold(req.Behavior, "cascade") {
		views, err := s.viewsOutside(ctx, id)
		if err != nil && errs.CodeOf(err) != errs.CodeNamespaceNotFound {
			return err
		}
		if len(views) > 0 && !cascade {
			return errs.Errorf(errs.CodeInvalidTableState, "namespace %s has tables that views outside it read: %s; drop them first, or send \"cascade\": true to drop them too", table.JoinID(id), sortedIDs(views))
		}
		if err := s.dropDependents(c, views); err != nil {
			return err
		}
	}
	if err := s.cat.DropNamespace(ctx, id, req.Mode, req.Behavior); err != nil {
		return err
	}
	s.dropped(c, id, true)
	c.JSON(http.StatusOK, gin.H{"properties": gin.H{}})
	return nil
}
