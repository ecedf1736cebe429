package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/table"
)

// The Apache Polaris notification route (seed 004,
// docs/spec/polaris-notifications-api.yaml): other engines announce the
// commits of their Iceberg tables, which package iceberg mirrors as
// external tables. It speaks the Iceberg REST catalog's error shape, not
// the Lance one.
const (
	catalogRoot       = "/api/catalog/v1"
	notificationRoute = catalogRoot + "/:prefix/namespaces/:namespace/tables/:table/notifications"
	// DefaultCatalogPrefix is the {prefix} the route answers unless
	// configured (MVQ_CATALOG_PREFIX): the warehouse's name.
	DefaultCatalogPrefix = "mvq"
)

// catalogTarget is the table a catalog route names: the namespace parts
// (separated by 0x1F) and the table. A wrong prefix is CodeTableNotFound.
func (s *Server) catalogTarget(c *gin.Context) ([]string, error) {
	prefix := s.cfg.CatalogPrefix
	if prefix == "" {
		prefix = DefaultCatalogPrefix
	}
	if c.Param("prefix") != prefix {
		return nil, errs.Errorf(errs.CodeTableNotFound, "catalog prefix %q not found: this catalog is %q", c.Param("prefix"), prefix)
	}
	var id []string
	for _, p := range strings.Split(c.Param("namespace"), "\x1f") {
		if err := table.ValidatePart(p); err != nil {
			return nil, badInput("namespace: %v", err)
		}
		id = append(id, p)
	}
	name := c.Param("table")
	if err := table.ValidatePart(name); err != nil {
		return nil, badInput("table: %v", err)
	}
	id = append(id, name)
	if n := len(strings.Join(id, "$")); n > table.MaxIDBytes {
		return nil, badInput("table: identifier longer than %d bytes", table.MaxIDBytes)
	}
	return id, nil
}

// sendNotification is sendNotification of the spec: 204 on success.
func (s *Server) sendNotification(c *gin.Context) error {
	id, err := s.catalogTarget(c)
	if err != nil {
		return err
	}
	var req iceberg.Request
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := s.notifier.Notify(c.Request.Context(), id, req); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// IcebergError is the Iceberg REST catalog's error body,
// {"error": {"message", "type", "code"}}.
type IcebergError struct {
	Error IcebergErrorModel `json:"error"`
}

// IcebergErrorModel is the spec's ErrorModel.
type IcebergErrorModel struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
}

// icebergTypes maps domain codes to the Iceberg exception type and status
// of the catalog routes (the statusOf of the Lance routes).
var icebergTypes = map[errs.Code]struct {
	status int
	typ    string
}{
	errs.CodeInvalidInput:           {http.StatusBadRequest, "BadRequestException"},
	errs.CodeSchemaValidation:       {http.StatusBadRequest, "BadRequestException"},
	errs.CodeUnauthenticated:        {http.StatusUnauthorized, "NotAuthorizedException"},
	errs.CodePermissionDenied:       {http.StatusForbidden, "ForbiddenException"},
	errs.CodeNamespaceNotFound:      {http.StatusNotFound, "NoSuchNamespaceException"},
	errs.CodeTableNotFound:          {http.StatusNotFound, "NoSuchTableException"},
	errs.CodeTableAlreadyExists:     {http.StatusConflict, "AlreadyExistsException"},
	errs.CodeConcurrentModification: {http.StatusConflict, "CommitFailedException"},
	errs.CodeInvalidTableState:      {http.StatusConflict, "CommitFailedException"},
	errs.CodeThrottling:             {http.StatusTooManyRequests, "TooManyRequestsException"},
	errs.CodeServiceUnavailable:     {http.StatusServiceUnavailable, "ServiceUnavailableException"},
	errs.CodeUnsupported:            {http.StatusNotAcceptable, "UnsupportedOperationException"},
}

// isCatalogRoute reports whether the request is for a catalog route
// (whose errors take the Iceberg shape).
func isCatalogRoute(c *gin.Context) bool { return strings.HasPrefix(c.FullPath(), catalogRoot+"/") }

// icebergFail is fail for the catalog routes.
func icebergFail(c *gin.Context, err error) {
	code := errs.CodeOf(err)
	info, ok := icebergTypes[code]
	if !ok {
		info.status, info.typ = http.StatusInternalServerError, "ServerErrorException"
	}
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		info.status, info.typ = http.StatusRequestEntityTooLarge, "BadRequestException"
		msg = fmt.Sprintf("request body larger than %d bytes", mbe.Limit)
	}
	var te *errs.Error
	if info.status == http.StatusServiceUnavailable && errors.As(err, &te) && te.Message != "" {
		msg = te.Message
	} else if info.status >= 500 {
		slog.ErrorContext(c.Request.Context(), "request failed", "route", c.FullPath(), "err", err)
		msg = "internal error; see the server log"
	}
	c.Header("Content-Type", errorContentType)
	c.AbortWithStatusJSON(info.status, IcebergError{Error: IcebergErrorModel{Message: msg, Type: info.typ, Code: info.status}})
}
