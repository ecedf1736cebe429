package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Catalog operations beyond create/drop: list all, declare, register,
// deregister, rename (routes added by tableOps2Routes).

// listAllTables lists every table of every namespace (GET /v1/table).
func (s *Server) listAllTables(c *gin.Context) error {
	token, limit, err := page(c, nil, nil)
	if err != nil {
		return err
	}
	include := true
	if v := c.Query("include_declared"); v != "" {
		if include, err = strconv.ParseBool(v); err != nil {
			return badInput("include_declared: %q is not true or false", v)
		}
	}
	delim := c.Query("delimiter")
	names, err := s.cat.ListAllTables(c.Request.Context(), delim, include)
	if err != nil {
		return err
	}
	out, next := table.Page(names, token, limit)
	resp := gin.H{"tables": out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) declareTable(c *gin.Context) error {
	var req struct {
		ID              []string          `json:"id"`
		Location        *string           `json:"location"`
		VendCredentials *bool             `json:"vend_credentials"`
		Properties      map[string]string `json:"properties"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	opts, err := s.storageOptions(c, id, req.VendCredentials, "vend_credentials")
	if err != nil {
		return err
	}
	if req.Location != nil && *req.Location != s.cat.TableLocation(id) {
		return badInput("location: the directory catalog places table %s at %s, not %q", table.JoinID(id), s.cat.TableLocation(id), *req.Location)
	}
	loc, err := s.cat.DeclareTable(c.Request.Context(), id, req.Properties)
	if err != nil {
		return err
	}
	props := req.Properties
	if props == nil {
		props = map[string]string{}
	}
	resp := gin.H{"location": loc, "properties": props, "managed_versioning": s.cat.Format() == table.FormatLance}
	if opts != nil {
		resp["storage_options"] = opts
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) registerTable(c *gin.Context) error {
	var req struct {
		ID         []string          `json:"id"`
		Location   *string           `json:"location"`
		Mode       string            `json:"mode"`
		Properties map[string]string `json:"properties"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if req.Location == nil || *req.Location == "" {
		return badInput("location: required")
	}
	if len(req.Properties) > 0 {
		return badInput("properties: register keeps the properties the table's manifest has; set none here")
	}
	t, err := s.cat.RegisterTable(c.Request.Context(), id, *req.Location, req.Mode, func(src table.RegisterSource) error {
		return allowRegister(c, src)
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"location": t.Location(), "properties": gin.H{}})
	return nil
}

// allowRegister checks the caller may adopt src (the route's rule checked
// admin on the new table): a folder deregister left needs admin on the
// namespace its table was deregistered from (a root admin when no record
// says which); any other folder lies inside the new table's namespace
// (table.RegisterSource), whose admin the caller must be.
func allowRegister(c *gin.Context, src table.RegisterSource) error {
	v, ok := c.Get(identityKey)
	if !ok {
		return nil
	}
	who, _ := v.(*auth.Identity)
	if who == nil {
		return nil
	}
	ns := src.Namespace
	if !src.Known {
		ns = nil
	}
	if who.AllowsNamespace(auth.Admin, ns) {
		return nil
	}
	switch {
	case !src.Known:
		return errs.Errorf(errs.CodePermissionDenied, "location: principal %s may not register %s: no record says which namespace it was deregistered from, so only an admin of the root may", who.Principal, src.Location)
	case src.Deregistered:
		return errs.Errorf(errs.CodePermissionDenied, "location: principal %s may not register %s: it was deregistered from a namespace the principal has no admin grant on", who.Principal, src.Location)
	}
	return errs.Errorf(errs.CodePermissionDenied, "location: principal %s has no admin grant on %s, where %s lies", who.Principal, nsName(ns), src.Location)
}

func nsName(ns []string) string {
	if len(ns) == 0 {
		return "the root"
	}
	return table.JoinID(ns)
}

// deregisterTable deregisters a table; views reading it make it a 409
// listing them, as for drop, unless cascade (dropRequest) drops them.
func (s *Server) deregisterTable(c *gin.Context) error {
	ctx := c.Request.Context()
	var req dropRequest
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	cascade, err := req.cascade()
	if err != nil {
		return err
	}
	if t, err := s.cat.OpenTable(ctx, id); err == nil {
		if m, err := t.Load(ctx, 0); err == nil && m.IsView() {
			return badInput("%s is a materialized view: deregister is not allowed (its jobs know it by name); drop it instead", table.JoinID(id))
		}
	}
	if err := s.dropViewsFirst(c, id, cascade); err != nil {
		return err
	}
	loc, err := s.cat.DeregisterTable(ctx, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "location": loc, "properties": gin.H{}})
	return nil
}

func (s *Server) renameTable(c *gin.Context) error {
	var req struct {
		ID             []string `json:"id"`
		NewTableName   *string  `json:"new_table_name"`
		NewNamespaceID []string `json:"new_namespace_id"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	if req.NewTableName == nil {
		return badInput("new_table_name: required")
	}
	if err := table.ValidatePart(*req.NewTableName); err != nil {
		return badInput("new_table_name: %v", err)
	}
	ns := id[:len(id)-1]
	if req.NewNamespaceID != nil {
		ns = req.NewNamespaceID
		for i, p := range ns {
			if err := table.ValidatePart(p); err != nil {
				return badInput("new_namespace_id[%d]: %v", i, err)
			}
		}
	}
	newID := append(append([]string{}, ns...), *req.NewTableName)
	// The route's rule checked admin on the table; the new name needs
	// write where it lands.
	if v, ok := c.Get(identityKey); ok {
		if who, ok := v.(*auth.Identity); ok && who != nil && !who.AllowsTable(auth.Write, newID) {
			return denied(who, auth.Write, newID)
		}
	}
	if err := s.cat.RenameTable(c.Request.Context(), id, newID); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

// insertDeclared answers an insert into a declared table without data: it
// creates the table from the body (its schema from the body). It reports
// whether it answered, or the error to answer.
func (s *Server) insertDeclared(c *gin.Context) (bool, error) {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return false, nil // insertIntoTable answers
	}
	if ok, err := s.cat.Declared(ctx, id); err != nil || !ok {
		return false, nil
	}
	switch m := strings.ToLower(c.Query("mode")); m {
	case "", "append", "overwrite":
	default:
		return false, badInput("mode %q: want append or overwrite", m)
	}
	rdr, err := s.bodyRecords(c, nil)
	if err != nil {
		return false, err
	}
	defer rdr.Release()
	_, m, err := s.cat.CreateDeclared(ctx, id, func() (*table.Table, *table.Manifest, error) {
		return s.cat.CreateTable(ctx, id, rdr.Schema(), rdr, "", nil)
	})
	if err != nil {
		return false, err
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version, "num_inserted_rows": m.NumRows()})
	return true, nil
}
