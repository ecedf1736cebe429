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

type alterColumnsEntry struct {
	Path          *string         `json:"path"`
	DataType      json.RawMessage `json:"data_type"`
	Rename        *string         `json:"rename"`
	Nullable      *bool           `json:"nullable"`
	VirtualColumn json.RawMessage `json:"virtual_column"`
}

func (s *Server) alterColumns(c *gin.Context) error {
	var req struct {
		ID          []string             `json:"id"`
		Branch      *string              `json:"branch"`
		Alterations *[]alterColumnsEntry `json:"alterations"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	alts, err := alterations(req.Alterations)
	if err != nil {
		return err
	}
	m, err := t.AlterColumns(c.Request.Context(), alts)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version})
	return nil
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

func (s *Server) dropColumns(c *gin.Context) error {
	var req struct {
		ID      []string  `json:"id"`
		Branch  *string   `json:"branch"`
		Columns *[]string `json:"columns"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if req.Columns == nil {
		return badInput("columns: required")
	}
	m, err := t.DropColumns(c.Request.Context(), *req.Columns)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version})
	return nil
}

func (s *Server) updateFieldMetadata(c *gin.Context) error {
	var req struct {
		ID      []string `json:"id"`
		Branch  *string  `json:"branch"`
		Updates *[]struct {
			Path     *string             `json:"path"`
			Metadata *map[string]*string `json:"metadata"`
			Replace  *bool               `json:"replace"`
		} `json:"updates"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if req.Updates == nil {
		return badInput("updates: required")
	}
	ups := make([]table.FieldMetadataUpdate, 0, len(*req.Updates))
	for i, u := range *req.Updates {
		field := fmt.Sprintf("updates[%d]", i)
		if u.Path == nil {
			return badInput("%s.path: required", field)
		}
		if u.Metadata == nil {
			return badInput("%s.metadata: required", field)
		}
		ups = append(ups, table.FieldMetadataUpdate{Field: field, Path: *u.Path, Metadata: *u.Metadata, Replace: u.Replace != nil && *u.Replace})
	}
	m, fields, err := t.UpdateFieldMetadata(c.Request.Context(), ups)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version, "fields": fields})
	return nil
}

// updateSchemaMetadata replaces the schema metadata. The REST body is the
// map itself, and so is the answer.
func (s *Server) updateSchemaMetadata(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := pathID(c)
	if err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := checkJSON(body); err != nil {
		return err
	}
	var md map[string]string
	if err := json.Unmarshal(body, &md); err != nil || md == nil {
		return badInput("body: expected a JSON object of string values (the schema metadata)")
	}
	t, err := s.cat.OpenTable(ctx, id)
	if err != nil {
		return err
	}
	t, err = onBranch(c, t, nil)
	if err != nil {
		return err
	}
	if _, err := t.UpdateSchemaMetadata(ctx, md); err != nil {
		return err
	}
	c.JSON(http.StatusOK, md)
	return nil
}
