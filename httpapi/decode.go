package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
	"golang.org/x/text/unicode/norm"

	"github.com/mvq-dev/mvq/internal/strictjson"
	"github.com/mvq-dev/mvq/table"
)

// bindJSON decodes a JSON object body into v, strictly. An empty body is
// an empty object. Malformed JSON, trailing data, a duplicate key at any
// depth, an unknown field and a wrong type are 400s naming the field or
// offset; an oversized body is a 413. The spec's identity object and
// context map are accepted in every body (checked for shape, then left to
// the code that reads them from the raw body) unless v declares them.
func bindJSON(c *gin.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if cb, ok := c.Get(checkedBodyKey); ok && cb.(*checkedBody).is(body) {
		// The authentication middleware made the strict checks on this
		// very body (peekBody): only the decode of v is left.
		if cb.(*checkedBody).envelope {
			if body, err = envelopeOf(body, jsonObject(body), v); err != nil {
				return err
			}
		}
		return decodeInto(body, v)
	}
	return decodeStrict(body, v)
}

// checkedKey is the gin context key of a checkedBody.
const checkedBodyKey = "mvq.checked_body"

// checkedBody is a JSON object body that passed checkJSON and the
// envelope checks of takeEnvelope, with its identity members removed;
// envelope: it has a context member (takeEnvelope has work left to do).
type checkedBody struct {
	body     []byte
	envelope bool
}

// is reports whether body is the checked body (a handler may have
// replaced the request body since).
func (cb *checkedBody) is(body []byte) bool { return bytes.Equal(cb.body, body) }

// decodeInto decodes body into v, refusing unknown fields and members
// that name a field in another case (encoding/json matches names
// case-insensitively; the API does not).
func decodeInto(body []byte, v any) error {
	if err := strictjson.CheckFields(body, v); err != nil {
		return strictErr(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonErr(err)
	}
	return nil
}

// decodeStrict is bindJSON on a body already read.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := checkJSON(body); err != nil {
		return err
	}
	body, err := takeEnvelope(body, v)
	if err != nil {
		return err
	}
	return decodeInto(body, v)
}

// MaxJSONDepth bounds how deeply a request body's objects and arrays nest.
const MaxJSONDepth = 64

// checkJSON refuses malformed JSON, data after the value, nesting deeper
// than MaxJSONDepth and duplicate object keys at any depth (encoding/json
// would keep the last one silently), naming the key and where it is.
// The members the authentication middleware reads (bodyFields, the
// envelope) must be spelled exactly too: it decodes them before the
// handler, with encoding/json's case-insensitive matching.
func checkJSON(body []byte) error {
	err := strictjson.Check(body, MaxJSONDepth)
	if err == nil {
		err = strictjson.CheckFields(body, &envelopeFields{})
	}
	return strictErr(err)
}

// envelopeFields are the members read before the handler decodes the body.
type envelopeFields struct {
	bodyFields
	Context json.RawMessage `json:"context"`
}

// strictErr is a strictjson error as a 400 naming the key.
func strictErr(err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) {
		return badInput("%s", se.Msg)
	}
	if err != nil {
		return jsonErr(err)
	}
	return nil
}

// identity is the spec's Identity object; the credentials are read from
// the raw body by the authentication layer.
type identity struct {
	APIKey    *string `json:"api_key"`
	AuthToken *string `json:"auth_token"`
}

// takeEnvelope checks the shape of the spec's identity and context members
// of a body object and removes them when v does not declare them, so a
// strict decode of v accepts them.
func takeEnvelope(body []byte, v any) ([]byte, error) {
	return envelopeOf(body, jsonObject(body), v)
}

// jsonObject decodes body's top-level members; nil when it is not an
// object.
func jsonObject(body []byte) map[string]json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	return obj
}

// envelopeOf is takeEnvelope with body's members already decoded (obj,
// nil when body is not an object). It does not change obj.
func envelopeOf(body []byte, obj map[string]json.RawMessage, v any) ([]byte, error) {
	if obj == nil {
		return body, nil // not an object: the decode of v says so
	}
	removed := false
	for _, name := range []string{"identity", "context"} {
		raw, ok := obj[name]
		if !ok || declaresField(v, name) {
			continue
		}
		if string(raw) != "null" {
			if raw[0] != '{' {
				return nil, badInput("%s: expected an object", name)
			}
			var err error
			if name == "identity" {
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				err = dec.Decode(&identity{})
			} else {
				err = json.Unmarshal(raw, &map[string]string{})
			}
			if err != nil {
				if name == "identity" {
					return nil, prefixed("identity", jsonErr(err), "an object with api_key and auth_token strings")
				}
				return nil, badInput("context: expected an object of string values")
			}
		}
		removed = true
	}
	if !removed {
		return body, nil
	}
	kept := make(map[string]json.RawMessage, len(obj))
	for k, raw := range obj {
		if (k == "identity" || k == "context") && !declaresField(v, k) {
			continue
		}
		kept[k] = raw
	}
	return json.Marshal(kept)
}

// prefixed puts field in front of a decode error's message.
func prefixed(field string, err error, want string) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown field") || strings.Contains(msg, ": expected ") {
		return badInput("%s: %s", field, msg)
	}
	return badInput("%s: expected %s", field, want)
}

// declaresField reports whether v (a pointer to a struct) has a member
// with JSON name name.
func declaresField(v any, name string) bool {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name || (tag == "" && strings.EqualFold(t.Field(i).Name, name)) {
			return true
		}
	}
	return false
}

// readBody reads the whole request body (a body a middleware already read
// is taken as it is, not copied). Past the limit it returns the
// *http.MaxBytesError (a 413 in fail); other read errors are 400s.
func readBody(c *gin.Context) ([]byte, error) {
	if c.Request.Body == nil {
		return nil, nil
	}
	if bb, ok := c.Request.Body.(*bufferedBody); ok {
		if b, ok := bb.take(); ok {
			return b, nil
		}
	}
	body, err := readAll(c.Request.Body, c.Request.ContentLength)
	if err != nil {
		return nil, bodyReadErr(err)
	}
	return body, nil
}

// bodyReadErr is the answer to a body that could not be read: over the
// limit (413) or too slow (408) as they are, anything else a 400.
func bodyReadErr(err error) error {
	var mbe *http.MaxBytesError
	var slow *slowBodyError
	if errors.As(err, &mbe) || errors.As(err, &slow) {
		return err
	}
	return badInput("read body: %v", err)
}

func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badInput("unknown field %s", name)
	}
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return badInput("body: expected a JSON object, got %s", te.Value)
		}
		return badInput("%s: expected %s, got %s", field, typeName(te.Type.String()), te.Value)
	case errors.As(err, &se):
		return badInput("malformed JSON at offset %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badInput("malformed JSON: unexpected end of body")
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return badInput("malformed JSON: %v", err)
}

func typeName(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "string" || goType == "*string":
		return "a string"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.HasPrefix(goType, "[]") || strings.HasPrefix(goType, "*[]"):
		return "an array"
	}
	return "an object"
}

// pathID parses the {id} path parameter with the request's delimiter.
func pathID(c *gin.Context) ([]string, error) {
	id, err := table.ParseID(c.Param("id"), c.Query("delimiter"))
	if err != nil {
		return nil, badInput("id: %v", err) // the path's identifier
	}
	return id, nil
}

// checkBodyID rejects a body id that disagrees with the path (compared in
// Unicode NFC, the form ParseID gives the path).
func checkBodyID(path, body []string) error {
	if body == nil {
		return nil
	}
	body = append([]string(nil), body...)
	for i, p := range body {
		body[i] = norm.NFC.String(p)
	}
	if strings.Join(body, "\x00") != strings.Join(path, "\x00") || len(body) != len(path) {
		return badInput("id: body id %q disagrees with the path id %q", body, path)
	}
	return nil
}

// nonNegative checks an optional integer field.
func nonNegative(field string, v *int64) error {
	if v != nil && *v < 0 {
		return badInput("%s: must be >= 0 (got %d)", field, *v)
	}
	return nil
}

// queryInt parses an optional non-negative integer query parameter.
func queryInt(c *gin.Context, name string, max int64) (int64, error) {
	s := c.Query(name)
	if s == "" {
		return 0, nil
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || fmt.Sprint(n) != s {
		return 0, badInput("%s: %q is not an integer", name, s)
	}
	if n < 0 || n > max {
		return 0, badInput("%s: must be between 0 and %d (got %d)", name, max, n)
	}
	return n, nil
}
