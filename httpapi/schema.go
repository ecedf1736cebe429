package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/table"
)

// Schema evolution (table/schema_evolve.go): alter_columns,
// drop_columns, update_field_metadata, schema_metadata/update. Each
// commits one new version that changes only the manifest, on the line the
// request's branch names (schema_metadata/update: the query parameter).

func (s *Server) schemaRoutes(v1 gin.IRouter) {
	t := v1.Group("/table/:id")
	t.POST("/alter_columns", s.alterColumns)
	t.POST("/drop_columns", s.dropColumns)
	t.POST("/update_field_metadata", s.updateFieldMetadata)
	t.POST("/schema_metadata/update", s.updateSchemaMetadata)
}

type alterColumnsEntry struct {
	Path          *string         `json:"path"`
	DataType      json.RawMessage `json:"data_type"`
	Rename        *string         `json:"rename"`
	Nullable      *bool           `json:"nullable"`
	VirtualColumn json.RawMessage `json:"virtual_column"`
}

func (s *Server) alterColumns(c *gin.Context) {
	var req struct {
		ID          []string             `json:"id"`
		Branch      *string              `json:"branch"`
		Alterations *[]alterColumnsEntry `json:"alterations"`
	}
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return
	}
	alts, err := alterations(req.Alterations)
	if err != nil {
		fail(c, err)
		return
	}
	m, err := t.AlterColumns(c, alts)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version})
}

// alterations checks the request's entries and converts them.
func alterations(entries *[]alterColumnsEntry) ([]table.Alteration, error) {
	if entries == nil {
		return nil, badInput("alterations: required")
	}
	out := make([]table.Alteration, 0, len(*entries))
	for i, e := range *entries {
		field := fmt.Sprintf("alterations[%d]", i)
		if e.Path == nil {
			return nil, badInput("%s.path: required", field)
		}
		if len(e.VirtualColumn) > 0 && string(e.VirtualColumn) != "null" {
			return nil, badInput("%s.virtual_column: altering a virtual column is not supported; drop it and add it again (add_columns)", field)
		}
		a := table.Alteration{Field: field, Path: *e.Path, Rename: e.Rename, Nullable: e.Nullable}
		if len(e.DataType) > 0 && string(e.DataType) != "null" {
			dt, err := jsonDataType(e.DataType, *e.Path)
			if err != nil {
				return nil, badInput("%s.data_type: %v", field, err)
			}
			a.DataType = dt
		}
		out = append(out, a)
	}
	return out, nil
}

// jsonDataType reads a JsonArrowDataType.
func jsonDataType(raw json.RawMessage, name string) (arrow.DataType, error) {
	var dt arrowjson.DataType
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&dt); err != nil {
		return nil, fmt.Errorf("expected a JSON Arrow data type such as {\"type\": \"int64\"}: %v", jsonErr(err))
	}
	sch, err := arrowjson.Schema{Fields: []arrowjson.Field{{Name: name, Type: dt, Nullable: true}}}.ToArrow()
	if err != nil {
		return nil, err
	}
	return sch.Field(0).Type, nil
}

func (s *Server) dropColumns(c *gin.Context) {
	var req struct {
		ID      []string  `json:"id"`
		Branch  *string   `json:"branch"`
		Columns *[]string `json:"columns"`
	}
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return
	}
	if req.Columns == nil {
		fail(c, badInput("columns: required"))
		return
	}
	m, err := t.DropColumns(c, *req.Columns)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version})
}

func (s *Server) updateFieldMetadata(c *gin.Context) {
	var req struct {
		ID      []string `json:"id"`
		Branch  *string  `json:"branch"`
		Updates *[]struct {
			Path     *string             `json:"path"`
			Metadata *map[string]*string `json:"metadata"`
			Replace  *bool               `json:"replace"`
		} `json:"updates"`
	}
	t, ok := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if !ok {
		return
	}
	if req.Updates == nil {
		fail(c, badInput("updates: required"))
		return
	}
	ups := make([]table.FieldMetadataUpdate, 0, len(*req.Updates))
	for i, u := range *req.Updates {
		field := fmt.Sprintf("updates[%d]", i)
		if u.Path == nil {
			fail(c, badInput("%s.path: required", field))
			return
		}
		if u.Metadata == nil {
			fail(c, badInput("%s.metadata: required", field))
			return
		}
		ups = append(ups, table.FieldMetadataUpdate{Field: field, Path: *u.Path, Metadata: *u.Metadata, Replace: u.Replace != nil && *u.Replace})
	}
	m, fields, err := t.UpdateFieldMetadata(c, ups)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version, "fields": fields})
}

// updateSchemaMetadata replaces the schema metadata. The REST body is the
// map itself, and so is the answer.
func (s *Server) updateSchemaMetadata(c *gin.Context) {
	id, err := pathID(c)
	if err != nil {
		fail(c, err)
		return
	}
	body, err := readBody(c)
	if err != nil {
		fail(c, err)
		return
	}
	if err := checkJSON(body); err != nil {
		fail(c, err)
		return
	}
	var md map[string]string
	if err := json.Unmarshal(body, &md); err != nil || md == nil {
		fail(c, badInput("body: expected a JSON object of string values (the schema metadata)"))
		return
	}
	t, err := s.cat.OpenTable(c, id)
	if err != nil {
		fail(c, err)
		return
	}
	t, ok := onBranch(c, t, nil)
	if !ok {
		return
	}
	if _, err := t.UpdateSchemaMetadata(c, md); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, md)
}
