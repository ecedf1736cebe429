// Package strictjson checks JSON the way encoding/json does not: it
// refuses duplicate object keys (encoding/json keeps the last one
// silently), nesting beyond a bound, and data after the value.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Error is a problem Check found in otherwise well-formed JSON.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Check reads data as exactly one JSON value, token by token. Malformed
// JSON is the decoder's error (*json.SyntaxError, io.ErrUnexpectedEOF);
// a duplicate key at any depth, nesting deeper than maxDepth objects and
// arrays, and data after the value are an *Error naming the key and where
// it is ("duplicate key \"q\" in x[1].y").
func Check(data []byte, maxDepth int) error {
	if json.Valid(data) && quickCheck(data, maxDepth) {
		return nil // fast.go
	}
	return checkTokens(data, maxDepth)
}

// checkTokens is Check by encoding/json's tokens; it makes every error.
func checkTokens(data []byte, maxDepth int) error {
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]struct{}
		key     string
		idx     int
		path    string
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := stack[len(stack)-1]
		if top.obj {
			if top.path == "" {
				return top.key
			}
			return top.path + "." + top.key
		}
		return top.path + "[" + strconv.Itoa(top.idx) + "]"
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			top := stack[n-1]
			if key, ok := tok.(string); ok {
				if _, dup := top.keys[key]; dup {
					if top.path == "" {
						return &Error{Msg: fmt.Sprintf("duplicate key %q", key)}
					}
					return &Error{Msg: fmt.Sprintf("duplicate key %q in %s", key, top.path)}
				}
				top.keys[key] = struct{}{}
				top.key, top.wantKey = key, false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			if len(stack) >= maxDepth {
				return &Error{Msg: fmt.Sprintf("%s: nesting deeper than %d", childPath(), maxDepth)}
			}
			stack = append(stack, &frame{obj: d == '{', wantKey: d == '{', keys: map[string]struct{}{}, path: childPath()})
			continue
		}
		if _, ok := tok.(json.Delim); ok { // '}' or ']'
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			break
		}
		if top := stack[len(stack)-1]; top.obj {
			top.wantKey = true
		} else {
			top.idx++
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Msg: "data after the JSON value"}
	}
	return nil
}
