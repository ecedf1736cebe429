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

func (s *Server) tableOps2Routes(v1 gin.IRouter) {
	v1.GET("/table", s.listAllTables)
	t := v1.Group("/table/:id")
	t.POST("/declare", s.declareTable)
	t.POST("/register", s.registerTable)
	t.POST("/deregister", s.deregisterTable)
	t.POST("/rename", s.renameTable)
}

// listAllTables lists every table of every namespace (GET /v1/table).
func (s *Server) listAllTables(c *gin.Context) {
	token, limit, err := page(c, nil, nil)
	if err != nil {
		fail(c, err)
		return
	}
	include := true
	if v := c.Query("include_declared"); v != "" {
		if include, err = strconv.ParseBool(v); err != nil {
			fail(c, badInput("include_declared: %q is not true or false", v))
			return
		}
	}
	delim := c.Query("delimiter")
	names, err := s.cat.ListAllTables(c, delim, include)
	if err != nil {
		fail(c, err)
		return
	}
	out, next := table.Page(names, token, limit)
	resp := gin.H{"tables": out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
}

func (s *Server) declareTable(c *gin.Context) {
	var req struct {
		ID              []string          `json:"id"`
		Location        *string           `json:"location"`
		VendCredentials *bool             `json:"vend_credentials"`
		Properties      map[string]string `json:"properties"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	if req.VendCredentials != nil && *req.VendCredentials {
		fail(c, errs.Errorf(errs.CodeUnsupported, "vend_credentials: this server vends no storage credentials; read and write through the API"))
		return
	}
	if req.Location != nil && *req.Location != s.cat.TableLocation(id) {
		fail(c, badInput("location: the directory catalog places table %s at %s, not %q", table.JoinID(id), s.cat.TableLocation(id), *req.Location))
		return
	}
	loc, err := s.cat.DeclareTable(c, id, req.Properties)
	if err != nil {
		fail(c, err)
		return
	}
	props := req.Properties
	if props == nil {
		props = map[string]string{}
	}
	c.JSON(http.StatusOK, gin.H{"location": loc, "properties": props})
}

func (s *Server) registerTable(c *gin.Context) {
	var req struct {
		ID         []string          `json:"id"`
		Location   *string           `json:"location"`
		Mode       string            `json:"mode"`
		Properties map[string]string `json:"properties"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	if req.Location == nil || *req.Location == "" {
		fail(c, badInput("location: required"))
		return
	}
	if len(req.Properties) > 0 {
		fail(c, badInput("properties: register keeps the properties the table's manifest has; set none here"))
		return
	}
	t, err := s.cat.RegisterTable(c, id, *req.Location, req.Mode, func(src table.RegisterSource) error {
		return allowRegister(c, src)
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"location": t.Location(), "properties": gin.H{}})
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
func (s *Server) deregisterTable(c *gin.Context) {
	var req dropRequest
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	cascade, err := req.cascade()
	if err != nil {
		fail(c, err)
		return
	}
	if t, err := s.cat.OpenTable(c, id); err == nil {
		if m, err := t.Load(c, 0); err == nil && m.IsView() {
			fail(c, badInput("%s is a materialized view: deregister is not allowed (its jobs know it by name); drop it instead", table.JoinID(id)))
			return
		}
	}
	if err := s.dropViewsFirst(c, id, cascade); err != nil {
		fail(c, err)
		return
	}
	loc, err := s.cat.DeregisterTable(c, id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "location": loc, "properties": gin.H{}})
}

func (s *Server) renameTable(c *gin.Context) {
	var req struct {
		ID             []string `json:"id"`
		NewTableName   *string  `json:"new_table_name"`
		NewNamespaceID []string `json:"new_namespace_id"`
	}
	id, ok := pathAndBody(c, &req, func() []string { return req.ID })
	if !ok {
		return
	}
	if req.NewTableName == nil {
		fail(c, badInput("new_table_name: required"))
		return
	}
	if err := table.ValidatePart(*req.NewTableName); err != nil {
		fail(c, badInput("new_table_name: %v", err))
		return
	}
	ns := id[:len(id)-1]
	if req.NewNamespaceID != nil {
		ns = req.NewNamespaceID
		for i, p := range ns {
			if err := table.ValidatePart(p); err != nil {
				fail(c, badInput("new_namespace_id[%d]: %v", i, err))
				return
			}
		}
	}
	newID := append(append([]string{}, ns...), *req.NewTableName)
	// The route's rule checked admin on the table; the new name needs
	// write where it lands.
	if v, ok := c.Get(identityKey); ok {
		if who, ok := v.(*auth.Identity); ok && who != nil && !who.AllowsTable(auth.Write, newID) {
			fail(c, denied(who, auth.Write, newID))
			return
		}
	}
	if err := s.cat.RenameTable(c, id, newID); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{})
}

// insertDeclared answers an insert into a declared table without data: it
// creates the table from the body (its schema from the body). It reports
// whether it answered.
func (s *Server) insertDeclared(c *gin.Context) bool {
	id, err := pathID(c)
	if err != nil {
		return false // insertIntoTable answers
	}
	if ok, err := s.cat.Declared(c, id); err != nil || !ok {
		return false
	}
	switch m := strings.ToLower(c.Query("mode")); m {
	case "", "append", "overwrite":
	default:
		fail(c, badInput("mode %q: want append or overwrite", m))
		return true
	}
	rdr, err := s.bodyRecords(c, nil)
	if err != nil {
		fail(c, err)
		return true
	}
	defer rdr.Release()
	_, m, err := s.cat.CreateDeclared(c, id, func() (*table.Table, *table.Manifest, error) {
		return s.cat.CreateTable(c, id, rdr.Schema(), rdr, "", nil)
	})
	if err != nil {
		fail(c, err)
		return true
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version, "num_inserted_rows": m.NumRows()})
	return true
}
