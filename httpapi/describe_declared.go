package httpapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/table"
)

// describeDeclared answers the describe of a declared table (declared,
// no version yet): its location, declared properties and
// is_only_declared. It reports whether it answered: false, writing
// nothing, when id is not declared, and false with the error when the
// catalog cannot tell.
func (s *Server) describeDeclared(c *gin.Context, id []string, opts map[string]string) (bool, error) {
	props, ok, err := s.cat.DeclaredProperties(c.Request.Context(), id)
	if err != nil || !ok {
		return false, err
	}
	if props == nil {
		props = map[string]string{}
	}
	loc := s.cat.TableLocation(id)
	resp := gin.H{
		"table":            id[len(id)-1],
		"namespace":        id[:len(id)-1],
		"location":         loc,
		"table_uri":        loc,
		"metadata":         map[string]string{},
		"properties":       props,
		"is_only_declared": true,
		// Lance clients commit its first version through version/create.
		"managed_versioning": s.cat.Format() == table.FormatLance,
	}
	if opts != nil {
		resp["storage_options"] = opts
	}
	c.JSON(http.StatusOK, resp)
	return true, nil
}
