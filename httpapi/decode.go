package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/table"
)

// bindJSON decodes a JSON object body into v. An empty body is an empty
// object. Wrong types, malformed JSON and trailing data are 400s naming the
// field or offset; an oversized body is a 413.
func bindJSON(c *gin.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil {
		return jsonErr(err)
	}
	if dec.More() {
		return badInput("malformed JSON: data after the object")
	}
	return nil
}

// readBody reads the whole request body. Past the limit it returns the
// *http.MaxBytesError (a 413 in fail); other read errors are 400s.
func readBody(c *gin.Context) ([]byte, error) {
	if c.Request.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badInput("read body: %v", err)
	}
	return body, nil
}

func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
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
	return table.ParseID(c.Param("id"), c.Query("delimiter"))
}

// checkBodyID rejects a body id that disagrees with the path.
func checkBodyID(path, body []string) error {
	if body == nil {
		return nil
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
