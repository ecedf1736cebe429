package httpapi

import (
	"encoding/json"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/table"
)

// createProps are the spec's `properties` query parameter of table
// create: a JSON object of strings, kept in the table's properties (and
// shown by describe). Keys starting with "mvq." are the server's own.
type createProps map[string]string

// createParams reads table create's query parameters beyond mode:
// properties (kept) and storage_options (refused: this server writes its
// warehouse with its own configuration, and takes no per-request storage
// overrides).
func createParams(c *gin.Context) (createProps, error) {
	if v, ok := c.GetQuery("storage_options"); ok && strings.TrimSpace(v) != "" && strings.TrimSpace(v) != "{}" {
		return nil, badInput("storage_options: not supported: tables are written with the server's warehouse configuration")
	}
	v, ok := c.GetQuery("properties")
	if !ok || strings.TrimSpace(v) == "" {
		return nil, nil
	}
	if err := checkJSON([]byte(v)); err != nil {
		return nil, badInput("properties: %v", err)
	}
	var props map[string]string
	if err := json.Unmarshal([]byte(v), &props); err != nil {
		return nil, badInput("properties: expected a JSON object of string values, such as {\"team\":\"eng\"}")
	}
	for k := range props {
		if k == "" || strings.HasPrefix(strings.ToLower(k), "mvq.") {
			return nil, badInput("properties: key %q is reserved (keys starting with mvq. are the server's)", k)
		}
	}
	return props, nil
}

// raw is the properties as a manifest keeps them (JSON strings).
func (p createProps) raw() map[string]json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(p))
	for k, v := range p {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	return out
}

// userProperties are the properties of m a client set (not the
// server's mvq.* ones), as create answers them.
func userProperties(m *table.Manifest) map[string]string {
	out := map[string]string{}
	for k, v := range m.Properties {
		if !strings.HasPrefix(k, "mvq.") {
			out[k] = propertyText(v)
		}
	}
	return out
}

// propertyText is a manifest property as describe shows it: a JSON
// string as its text, anything else (the server's own documents) as JSON.
func propertyText(v json.RawMessage) string {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
