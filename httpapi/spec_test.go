package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	yaml "github.com/pb33f/go-yaml"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
)

// specPath is the Lance Namespace REST spec the API conforms to.
const specPath = "../docs/spec/lance-namespace.yaml"

// rewriteNullable rewrites the OpenAPI 3.0 keyword nullable (which the
// spec still uses in places, though it declares 3.1) into 3.1 type
// unions, the rewrite validators need before they compile the document:
//
//	type: T, nullable: true      -> type: [T, "null"] (and null in an enum)
//	$ref: R, nullable: true      -> anyOf: [{$ref: R}, {type: "null"}]
//	nullable: true without type  -> dropped (anything, null included)
//	nullable: false              -> dropped
//
// It also quotes the response status codes the spec writes as YAML
// integers, which OpenAPI wants as strings.
func rewriteNullable(n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			rewriteNullable(c)
		}
	case yaml.MappingNode:
		nullable := false
		var keep []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "nullable" && v.Kind == yaml.ScalarNode {
				nullable = v.Value == "true"
				continue
			}
			if k.Value == "responses" && v.Kind == yaml.MappingNode {
				// Status codes written as YAML integers: OpenAPI wants
				// string keys ("200").
				for j := 0; j < len(v.Content); j += 2 {
					v.Content[j].Tag, v.Content[j].Style = "!!str", yaml.DoubleQuotedStyle
				}
			}
			keep = append(keep, k, v)
		}
		n.Content = keep
		for _, c := range n.Content {
			rewriteNullable(c)
		}
		if !nullable {
			return
		}
		str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch k.Value {
			case "type":
				if v.Kind == yaml.ScalarNode {
					n.Content[i+1] = &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{str(v.Value), str("null")}}
				}
			case "enum":
				v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"})
			case "$ref":
				ref := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("$ref"), str(v.Value)}}
				null := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("type"), str("null")}}
				n.Content[i] = str("anyOf")
				n.Content[i+1] = &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{ref, null}}
			}
		}
	}
}

var (
	specOnce sync.Once
	specVal  validator.Validator
	specOps  []string
	specErr  error
)

// specValidator compiles the spec (rewritten to 3.1 type unions) into a
// validator and lists its operations as "METHOD /path/{param}".
func specValidator(t *testing.T) (validator.Validator, []string) {
	t.Helper()
	specOnce.Do(func() {
		raw, err := os.ReadFile(specPath)
		if err != nil {
			specErr = err
			return
		}
		var root yaml.Node
		if err := yaml.Unmarshal(raw, &root); err != nil {
			specErr = err
			return
		}
		rewriteNullable(&root)
		if out := mustYAML(&root); bytes.Contains(out, []byte("nullable: true")) || bytes.Contains(out, []byte("nullable: false")) {
			specErr = fmt.Errorf("nullable left after the rewrite")
			return
		}
		doc, err := libopenapi.NewDocument(mustYAML(&root))
		if err != nil {
			specErr = err
			return
		}
		model, err := doc.BuildV3Model()
		if err != nil {
			specErr = err
			return
		}
		for path, item := range model.Model.Paths.PathItems.FromOldest() {
			for method := range item.GetOperations().FromOldest() {
				specOps = append(specOps, strings.ToUpper(method)+" "+path)
			}
		}
		sort.Strings(specOps)
		v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation())
		if len(errs) > 0 {
			specErr = fmt.Errorf("validator: %v", errs)
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok {
			specErr = fmt.Errorf("the rewritten spec is not a valid OpenAPI document: %v", verrs)
			return
		}
		specVal = v
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return specVal, specOps
}

func mustYAML(n *yaml.Node) []byte {
	b, err := yaml.Marshal(n)
	if err != nil {
		panic(err)
	}
	return b
}

// specOpOf returns the spec operation a request path matches, or "".
func specOpOf(ops []string, method, path string) string {
	xs := strings.Split(path, "/")
	best := ""
	for _, op := range ops {
		m, p, _ := strings.Cut(op, " ")
		if m != method {
			continue
		}
		ps := strings.Split(p, "/")
		if len(ps) != len(xs) {
			continue
		}
		ok := true
		for i := range ps {
			if !strings.HasPrefix(ps[i], "{") && ps[i] != xs[i] {
				ok = false
				break
			}
		}
		// A literal segment beats a parameter (version/batch-create over
		// {id}/...): keep the match with fewer parameters.
		if ok && (best == "" || strings.Count(p, "{") < strings.Count(best, "{")) {
			best = op
		}
	}
	return best
}

// exchange is one request and response checked against the spec.
type exchange struct {
	op     string
	status int
}

// How an exchange is checked against the spec.
type check int

const (
	checkBoth     check = iota // request and response
	checkResponse              // a request the spec would refuse: its error answer only
	checkNone                  // an extension: not in the spec
)

// specClient sends requests to the API and checks each request and
// response against the spec as chk says.
type specClient struct {
	*client
	v    validator.Validator
	ops  []string
	seen []exchange
}

func (sc *specClient) send(method, path, ctype string, body []byte, chk check, hdr ...string) (int, []byte) {
	t := sc.t
	t.Helper()
	req, err := http.NewRequest(method, sc.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if chk == checkNone {
		return resp.StatusCode, out
	}
	op := specOpOf(sc.ops, method, req.URL.Path)
	if op == "" {
		t.Fatalf("%s %s is no operation of the spec; mark it as an extension", method, path)
	}
	// Validate against fresh copies: the validator reads the bodies.
	vreq, _ := http.NewRequest(method, sc.url+path, bytes.NewReader(body))
	vreq.Header = req.Header.Clone()
	if ok, errs := sc.v.ValidateHttpRequestSync(vreq); !ok && chk == checkBoth {
		t.Errorf("request %s %s %.300s does not conform to the spec: %s", method, path, body, verrs(errs))
	}
	vreq, _ = http.NewRequest(method, sc.url+path, bytes.NewReader(body))
	vreq.Header = req.Header.Clone()
	resp.Body = io.NopCloser(bytes.NewReader(out))
	if chk == checkResponse && resp.StatusCode < 400 {
		t.Errorf("%s %s %.300s: a request the spec refuses was answered %d", method, path, body, resp.StatusCode)
	}
	if ok, errs := sc.v.ValidateHttpResponse(vreq, resp); !ok {
		t.Errorf("response to %s %s (%d %s %.500s) does not conform to the spec: %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), out, verrs(errs))
	}
	sc.seen = append(sc.seen, exchange{op, resp.StatusCode})
	return resp.StatusCode, out
}

func verrs[E error](errs []E) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n  - ")
		b.WriteString(e.Error())
	}
	return b.String()
}
