package httpapi

import (
	"context"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// dropRequest is a table drop's body. cascade (at the top, or "true" under
// context or properties, the Lance request's string maps) also drops the
// views that read the table, and theirs; without it a table with such
// views is a 409 listing them.
type dropRequest struct {
	ID         []string          `json:"id"`
	Cascade    *bool             `json:"cascade"`
	Context    map[string]string `json:"context"`
	Properties map[string]string `json:"properties"`
}

func (r dropRequest) cascade() (bool, error) {
	on := r.Cascade != nil && *r.Cascade
	for name, m := range map[string]map[string]string{"context": r.Context, "properties": r.Properties} {
		for k, v := range m {
			if k != "cascade" {
				return false, badInput("%s.%s: unknown key (a drop takes only cascade)", name, k)
			}
			switch strings.ToLower(v) {
			case "true":
				on = true
			case "false":
			default:
				return false, badInput("%s.cascade: want \"true\" or \"false\", got %q", name, v)
			}
		}
	}
	return on, nil
}

// viewsToDrop returns the views that read table id, transitively, deepest
// first (each after every view that reads it), and the direct ones. No
// view layer: none.
func (s *Server) viewsToDrop(ctx context.Context, id []string) (all, direct [][]string, err error) {
	if s.views == nil {
		return nil, nil, nil
	}
	return s.views.ToDrop(ctx, id)
}

// dropDependents drops the views views (deepest first) for a cascading
// drop, cancelling their jobs; a view gone meanwhile is skipped.
func (s *Server) dropDependents(c *gin.Context, views [][]string) error {
	for _, v := range views {
		if err := s.cat.DropTable(c.Request.Context(), v); err != nil && errs.CodeOf(err) != errs.CodeTableNotFound {
			return err
		}
		s.dropped(c, v, false)
	}
	return nil
}

// dropViewsFirst is what a drop or deregister of table id does before
// removing it: a 409 naming the views that read it, or with cascade their
// drop (deepest first).
func (s *Server) dropViewsFirst(c *gin.Context, id []string, cascade bool) error {
	views, direct, err := s.viewsToDrop(c.Request.Context(), id)
	if err != nil {
		return err
	}
	if len(direct) > 0 && !cascade {
		return errs.Errorf(errs.CodeInvalidTableState, "table %s has views that read it: %s; drop them first, or send \"cascade\": true to drop them too", table.JoinID(id), joinIDs(direct))
	}
	return s.dropDependents(c, views)
}

func joinIDs(ids [][]string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = table.JoinID(id)
	}
	return strings.Join(parts, ", ")
}
