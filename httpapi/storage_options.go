package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/goccy/go-yaml"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
)

// StorageOptions are the storage_options the operator lets the API hand
// to Lance clients (describe, declare and create of a table) so that
// they reach the warehouse's bucket themselves: keys such as
// aws_access_key_id, aws_endpoint, aws_region or allow_http, passed as
// they are to Lance. Each rule names a principal ("*": every caller,
// also an unauthenticated one) and optionally a namespace that bounds
// the tables it answers for; the first rule that matches answers. A
// caller no rule matches gets none, and one that asks for
// vend_credentials then gets a 406 naming the field. The API answers
// options only on a route whose rule the caller already passed (read
// for describe, write for declare and create), so a rule gives nothing
// to a principal its grants would not let near the table.
type StorageOptions struct {
	rules []storageRule
}

type storageRule struct {
	Principal string            `json:"principal"`
	Namespace string            `json:"namespace"`
	Options   map[string]string `json:"options"`

	ns []string // Namespace split on "$"; nil: any
}

// LoadStorageOptions reads the storage options file (YAML or JSON):
//
//	storage_options:
//	  - principal: alice          # or "*"
//	    namespace: docs           # optional; tables under it only
//	    options: {aws_access_key_id: ..., aws_secret_access_key: ...}
func LoadStorageOptions(path string) (*StorageOptions, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("storage options file: %w", err)
	}
	return ParseStorageOptions(data)
}

// ParseStorageOptions is LoadStorageOptions over the file's bytes.
func ParseStorageOptions(data []byte) (*StorageOptions, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		// The position only: the parser's own message quotes the lines
		// around the error, which hold credentials.
		return nil, fmt.Errorf("storage options file: %s", yaml.FormatError(err, false, false))
	}
	var doc struct {
		Rules []storageRule `json:"storage_options"`
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("storage options file: %v", err)
	}
	if len(doc.Rules) == 0 {
		return nil, fmt.Errorf("storage options file: storage_options: want at least one rule")
	}
	for i := range doc.Rules {
		r := &doc.Rules[i]
		at := fmt.Sprintf("storage options file: storage_options[%d]", i)
		if strings.TrimSpace(r.Principal) == "" {
			return nil, fmt.Errorf("%s.principal: required (a principal, or \"*\" for every caller)", at)
		}
		if len(r.Options) == 0 {
			return nil, fmt.Errorf("%s.options: want at least one option", at)
		}
		for k := range r.Options {
			if k == "" || strings.TrimSpace(k) != k {
				return nil, fmt.Errorf("%s.options: key %q: want a non-empty name without surrounding spaces", at, k)
			}
		}
		if r.Namespace != "" && r.Namespace != auth.All {
			r.ns = strings.Split(r.Namespace, auth.Delimiter)
			for _, p := range r.ns {
				if p == "" {
					return nil, fmt.Errorf("%s.namespace %q: an empty part", at, r.Namespace)
				}
			}
		}
	}
	return &StorageOptions{rules: doc.Rules}, nil
}

// For returns the options of the first rule for principal (empty when
// unauthenticated) that covers the table id, or nil.
func (o *StorageOptions) For(principal string, id []string) map[string]string {
	if o == nil {
		return nil
	}
	for _, r := range o.rules {
		if r.Principal != auth.All && r.Principal != principal {
			continue
		}
		if r.ns != nil && (len(id) <= len(r.ns) || !equalParts(id[:len(r.ns)], r.ns)) {
			continue
		}
		out := make(map[string]string, len(r.Options))
		for k, v := range r.Options {
			out[k] = v
		}
		return out
	}
	return nil
}

func equalParts(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// storageOptions are the options for the caller of c on table id, and
// the 406 naming field when vend is true and there are none.
func (s *Server) storageOptions(c *gin.Context, id []string, vend *bool, field string) (map[string]string, error) {
	principal := ""
	if v, ok := c.Get(identityKey); ok {
		if who, _ := v.(*auth.Identity); who != nil {
			principal = who.Principal
		}
	}
	opts := s.cfg.StorageOptions.For(principal, id)
	if vend != nil && *vend && len(opts) == 0 {
		return nil, errs.Errorf(errs.CodeUnsupported, "%s: this server has no storage credentials configured for this caller on this table; read and write through the API", field)
	}
	return opts, nil
}
