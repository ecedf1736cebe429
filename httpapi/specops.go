package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
)

// SpecOperations are the operations of the Lance Namespace REST spec
// (docs/spec/lance-namespace.yaml), as "METHOD path" with the spec's
// {param} segments. The conformance test checks this list against the
// spec document.
var SpecOperations = []string{
	"POST /v1/namespace/{id}/create", "GET /v1/namespace/{id}/list", "POST /v1/namespace/{id}/describe",
	"POST /v1/namespace/{id}/drop", "POST /v1/namespace/{id}/exists", "GET /v1/namespace/{id}/table/list",
	"GET /v1/table", "POST /v1/table/{id}/register", "POST /v1/table/{id}/describe", "POST /v1/table/{id}/exists",
	"POST /v1/table/{id}/drop", "POST /v1/table/{id}/deregister", "POST /v1/table/{id}/restore",
	"POST /v1/table/{id}/rename", "POST /v1/table/{id}/schema_metadata/update", "POST /v1/table/{id}/version/list",
	"POST /v1/table/{id}/version/create", "POST /v1/table/{id}/version/describe", "POST /v1/table/{id}/version/delete",
	"POST /v1/table/version/batch-create", "POST /v1/table/batch-commit", "POST /v1/table/{id}/alter_columns",
	"POST /v1/table/{id}/update_field_metadata", "POST /v1/table/{id}/drop_columns", "POST /v1/table/{id}/stats",
	"POST /v1/table/{id}/insert", "POST /v1/table/{id}/merge_insert", "POST /v1/table/{id}/update",
	"POST /v1/table/{id}/delete", "POST /v1/table/{id}/query", "POST /v1/table/{id}/count_rows",
	"POST /v1/table/{id}/create", "POST /v1/table/{id}/explain_plan", "POST /v1/table/{id}/analyze_plan",
	"POST /v1/table/{id}/add_columns", "POST /v1/table/{id}/backfill_column",
	"POST /v1/materialized_view/{id}/refresh", "POST /v1/materialized_view/{id}/create",
	"POST /v1/table/{id}/create_index", "POST /v1/table/{id}/create_scalar_index", "POST /v1/table/{id}/index/list",
	"POST /v1/table/{id}/index/{index_name}/stats", "POST /v1/table/{id}/index/{index_name}/drop",
	"POST /v1/table/{id}/tags/list", "POST /v1/table/{id}/tags/version", "POST /v1/table/{id}/declare",
	"POST /v1/table/{id}/tags/create", "POST /v1/table/{id}/tags/delete", "POST /v1/table/{id}/tags/update",
	"POST /v1/table/{id}/branches/list", "POST /v1/table/{id}/branches/create", "POST /v1/table/{id}/branches/delete",
	"POST /v1/transaction/{id}/describe", "POST /v1/transaction/{id}/alter",
}

// notImplemented is the answer to a spec operation this server has no
// route for: a 501 with the spec's ErrorResponse body (code 0,
// Unsupported), so a spec client learns the operation exists but is not
// served here, instead of a 404 it would take for a missing table.
var notImplemented = statusInfo{http.StatusNotImplemented, "/errors/not-implemented", "Operation not implemented"}

// specOperation returns the spec operation method and path match, or "".
func specOperation(method, path string) string {
	for _, op := range SpecOperations {
		m, p, _ := strings.Cut(op, " ")
		if m != method {
			continue
		}
		pattern := strings.NewReplacer("{id}", ":id", "{index_name}", ":index_name").Replace(p)
		if routeMatches(pattern, path) {
			return op
		}
	}
	return ""
}

// noRoute answers a request no route matched: a 501 for a spec operation
// not served here, a 404 otherwise.
func noRoute(c *gin.Context) {
	if op := specOperation(c.Request.Method, c.Request.URL.Path); op != "" {
		routerProblem(c, notImplemented, errs.CodeUnsupported, "operation "+op+" of the Lance Namespace spec is not implemented by this server (docs/conformance.md)")
		return
	}
	routerProblem(c, routeNotFound, errs.CodeUnsupported, "no route "+c.Request.Method+" "+c.Request.URL.Path+"; the API is under /v1 (docs/ARCHITECTURE.md#api), the jobs console at /ui/")
}
