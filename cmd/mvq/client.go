package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/mvq-dev/mvq/errs"
)

// client talks to the mvq HTTP API.
type client struct {
	base  string // http://host:port, no trailing slash
	token string
	hc    *http.Client
}

// apiError is a failed API call, shown as one line: what failed, why,
// and what to do.
type apiError struct {
	Status int
	Title  string
	Detail string
	Hint   string
}

func (e *apiError) Error() string {
	msg := e.Title
	if e.Detail != "" {
		if msg != "" {
			msg += ": "
		}
		msg += e.Detail
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	msg = fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// hintForCode says what to do about an error the API names by its code,
// for the errors a command line user can fix with another command.
func hintForCode(code errs.Code) string {
	switch code {
	case errs.CodeNamespaceNotFound:
		return "create the namespace first: mvq ns create NAMESPACE"
	case errs.CodeNamespaceAlreadyExists:
		return "mvq ns create NAME --exist-ok accepts one that exists"
	case errs.CodeTableNotFound:
		return "mvq table ls NAMESPACE lists its tables and views (quote names with $)"
	case errs.CodeTableAlreadyExists:
		return "--mode overwrite replaces it, --mode exist_ok keeps it"
	}
	return ""
}

// hintFor says what to do about a failed call.
func hintFor(status int, hasToken bool, retryAfter string) string {
	switch status {
	case http.StatusUnauthorized:
		if hasToken {
			return "the token was refused: check --token / MVQ_TOKEN"
		}
		return "this API needs a token: pass --token or set MVQ_TOKEN"
	case http.StatusForbidden:
		return "ask an admin for a grant on it (README: Credentials and grants)"
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if retryAfter != "" {
			return "retry after " + retryAfter + "s"
		}
		return "retry in a moment"
	case http.StatusMethodNotAllowed:
		return "is --url an mvq API of the same version?"
	}
	return ""
}

// unreachable turns a connection failure into a message that says how to
// start the API.
func (c *client) unreachable(err error) error {
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) {
		return fmt.Errorf("cannot reach the mvq API at %s: start one with `mvq dev`, or point --url / MVQ_URL at it (%v)", c.base, err)
	}
	return err
}

// do sends a request and returns the response of a 2xx answer; any other
// status is an *apiError built from the problem body.
func (c *client) do(ctx context.Context, method, path string, body io.Reader, contentType, accept string, headers ...[2]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &apiError{Status: resp.StatusCode, Hint: hintFor(resp.StatusCode, c.token != "", resp.Header.Get("Retry-After"))}
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Code   *int   `json:"code"`
	}
	if json.Unmarshal(b, &p) == nil && (p.Title != "" || p.Detail != "") {
		e.Title, e.Detail = p.Title, p.Detail
		if e.Hint == "" && p.Code != nil {
			e.Hint = hintForCode(errs.Code(*p.Code))
		}
	} else {
		e.Detail = strings.TrimSpace(string(b))
		if len(e.Detail) > 300 {
			e.Detail = e.Detail[:300] + "…"
		}
	}
	return nil, e
}

// call sends in as JSON (nil: no body) and decodes the answer into out
// (nil: discarded).
func (c *client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, body, ct, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: undecodable answer: %w", method, path, err)
	}
	return nil
}

// idPath is an identifier as a path segment ("docs$articles").
func idPath(id string) string { return url.PathEscape(nameArg(id)) }

// nameArg is an identifier as typed: NAMESPACE$NAME, or NAMESPACE/NAME,
// which a shell leaves alone unquoted (no part may hold a '/', so the two
// cannot mean different things).
func nameArg(id string) string { return strings.ReplaceAll(id, "/", "$") }
