package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/internal/strictjson"
	"github.com/mvq-dev/mvq/jobs"
	"github.com/mvq-dev/mvq/refresh"
	"github.com/mvq-dev/mvq/table"
)

// What a route's grant is checked on.
type targetKind int

const (
	targetPath      targetKind = iota // the :id path parameter, a table or view
	targetNSPath                      // the :id path parameter, a namespace
	targetJobParam                    // the view of the job :job_id names
	targetJobBody                     // the view of the job the body's job_id names
	targetJobList                     // the body's view; without one, the list is filtered
	targetNamespace                   // the body's namespace (the root without one)
	targetRoot                        // the whole catalog (admin)
	targetTables                      // every table the request involves: the handler checks each (txn.go)
)

// targetCatalogTable is the catalog route's namespace and table
// (catalogTarget); a value apart from the list above.
const targetCatalogTable targetKind = 100

// routeRule is what a route needs (its entry in the route table,
// routes.go): an action on a target. jsonBody marks routes whose body is a
// JSON object, which may carry identity; source marks view create, which
// also needs read on the source_query's table. open routes need no
// credentials; they carry no tenant data (the jobs console's files are
// static: its data comes from API calls that carry the user's token). A
// route registered outside the table needs admin at the root.
type routeRule struct {
	action   auth.Action
	target   targetKind
	jsonBody bool
	source   bool
	open     bool
}

// identityKey holds the request's *auth.Identity in the gin context.
const identityKey = "mvq.auth.identity"

// bodyFields are the fields of a JSON body the middleware reads. They are
// decoded with encoding/json's own field matching, as the handlers decode
// them, so the middleware checks what the handler will act on.
type bodyFields struct {
	Identity *struct {
		APIKey    string `json:"api_key"`
		AuthToken string `json:"auth_token"`
	} `json:"identity"`
	JobID       *string `json:"job_id"`
	View        *string `json:"view"`
	Namespace   *string `json:"namespace"`
	SourceQuery *string `json:"source_query"`
}

// maxUnauthenticatedBody bounds the JSON body read to find credentials in
// it when no header carries one: an anonymous client cannot make the API
// buffer a large body before it is authenticated.
const maxUnauthenticatedBody = 1 << 20

// authenticate is the middleware that authenticates every request but the
// open routes, rate-limits its principal, and checks its grant for the
// route; the principal is in the request context (auth.PrincipalFrom)
// before any handler runs. The spec's identity object is taken out of
// JSON bodies (mode none included), so handlers never see credentials.
// With no authenticator (MVQ_AUTH=none) every request is allowed.
func (s *Server) authenticate() gin.HandlerFunc {
	limiter := auth.NewLimiter()
	return func(c *gin.Context) {
		path := c.FullPath()
		rule, known := s.rules[c.Request.Method+" "+path]
		if known && rule.open {
			c.Next()
			return
		}
		peek := known && rule.jsonBody && c.Request.Body != nil
		if s.cfg.Auth == nil {
			if peek {
				if _, err := peekBody(c, -1, false); err != nil {
					fail(c, err)
					return
				}
			}
			c.Next()
			return
		}
		unauthorized := func(err error) {
			c.Header("WWW-Authenticate", `Bearer realm="mvq"`)
			fail(c, err)
		}
		// A header credential is checked before the body is read.
		cred, err := headerCredential(c.Request.Header)
		if err != nil {
			unauthorized(err)
			return
		}
		var id *auth.Identity
		if cred != "" {
			if id, err = s.authn(c, cred); err != nil {
				unauthorized(err)
				return
			}
		}
		var body bodyFields
		if peek {
			limit := int64(-1)
			if id == nil {
				limit = maxUnauthenticatedBody
			}
			if body, err = peekBody(c, limit, true); err != nil {
				if errs.CodeOf(err) == errs.CodeUnauthenticated {
					unauthorized(err)
				} else {
					fail(c, err)
				}
				return
			}
		}
		bodyCred, err := body.credential()
		switch {
		case err != nil:
			unauthorized(err)
			return
		case id != nil && bodyCred != "" && bodyCred != cred:
			unauthorized(errs.Errorf(errs.CodeUnauthenticated, "several different credentials in one request; send one"))
			return
		case id == nil && bodyCred == "":
			unauthorized(errs.Errorf(errs.CodeUnauthenticated, "missing credentials: send Authorization: Bearer <token>, an x-api-key header, or identity.api_key in the body"))
			return
		case id == nil:
			if id, err = s.authn(c, bodyCred); err != nil {
				unauthorized(err)
				return
			}
		}
		c.Request = c.Request.WithContext(auth.WithPrincipal(c.Request.Context(), id.Principal))
		c.Set(identityKey, id)
		if ok, wait := limiter.Allow(id, time.Now()); !ok {
			c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			fail(c, errs.Errorf(errs.CodeThrottling, "principal %s is over its rate limit of %g requests per second", id.Principal, id.RateLimit))
			return
		}
		if path == "" {
			c.Next() // no such route (or method): the 404 (405) says so
			return
		}
		if !known {
			// A route without a rule needs admin at the root: new routes
			// are closed until mapped.
			if !id.AllowsNamespace(auth.Admin, nil) {
				fail(c, denied(id, auth.Admin, nil))
				return
			}
			c.Next()
			return
		}
		if err := s.authorize(c, id, rule, body); err != nil {
			fail(c, err)
			return
		}
		c.Next()
	}
}

// headerCredential returns the credential of Authorization: Bearer or
// x-api-key ("" when neither is sent). Both may be sent if they agree.
// Errors are CodeUnauthenticated and never contain the credential.
func headerCredential(h http.Header) (string, error) {
	var creds []string
	if v := h.Values("Authorization"); len(v) > 0 {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(v[0]), " ")
		tok = strings.TrimSpace(tok)
		if len(v) > 1 || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return "", errs.Errorf(errs.CodeUnauthenticated, "malformed Authorization header: want one \"Bearer <token>\"")
		}
		creds = append(creds, tok)
	}
	if v := h.Values("X-Api-Key"); len(v) > 0 {
		if len(v) > 1 || strings.TrimSpace(v[0]) == "" {
			return "", errs.Errorf(errs.CodeUnauthenticated, "malformed x-api-key header: want one non-empty key")
		}
		creds = append(creds, strings.TrimSpace(v[0]))
	}
	if len(creds) == 2 && creds[0] != creds[1] {
		return "", errs.Errorf(errs.CodeUnauthenticated, "several different credentials in one request; send one")
	}
	if len(creds) == 0 {
		return "", nil
	}
	return creds[0], nil
}

// credential returns the body's identity.api_key or identity.auth_token
// ("" when it has neither); both may be sent if they agree.
func (b bodyFields) credential() (string, error) {
	if b.Identity == nil {
		return "", nil
	}
	k, t := b.Identity.APIKey, b.Identity.AuthToken
	if k != "" && t != "" && k != t {
		return "", errs.Errorf(errs.CodeUnauthenticated, "several different credentials in one request; send one")
	}
	if k != "" {
		return k, nil
	}
	return t, nil
}

// authn authenticates a credential; failures are CodeUnauthenticated.
func (s *Server) authn(c *gin.Context, cred string) (*auth.Identity, error) {
	id, err := s.cfg.Auth.Authenticate(c.Request.Context(), cred)
	if err != nil {
		var ae *auth.Error
		if errors.As(err, &ae) {
			return nil, errs.Errorf(errs.CodeUnauthenticated, "%s", ae.Reason)
		}
		return nil, err
	}
	return id, nil
}

// authorize checks the identity's grant for the route's action on its
// target: the path's identifier, or the view of the job the request names.
// Anything at the root needs admin. A view create also needs read on its
// source table.
func (s *Server) authorize(c *gin.Context, id *auth.Identity, rule routeRule, body bodyFields) error {
	var target []string
	isTable := true // target is a table or view; else a namespace
	switch rule.target {
	case targetTables:
		return nil // the handler checks every table it touches
	case targetPath, targetNSPath:
		isTable = rule.target == targetPath
		t, err := pathID(c)
		if err != nil {
			return err
		}
		target = t
	case targetJobParam, targetJobBody:
		jobID := c.Param("job_id")
		if rule.target == targetJobBody {
			if body.JobID == nil || *body.JobID == "" {
				return nil // the handler answers "job_id: required"
			}
			jobID = *body.JobID
		}
		if s.views == nil {
			return nil
		}
		view, err := s.views.JobView(c.Request.Context(), jobID)
		if err != nil {
			return err
		}
		target = view
	case targetJobList:
		if body.View == nil || *body.View == "" {
			return nil // listJobs keeps the jobs of readable views (visibleJobs)
		}
		t, err := table.ParseID(*body.View, c.Query("delimiter"))
		if err != nil {
			return badInput("view: %v", err)
		}
		target = t
	case targetCatalogTable:
		t, err := s.catalogTarget(c)
		if err != nil {
			return err
		}
		target = t
	case targetNamespace:
		isTable = false
		if body.Namespace != nil && *body.Namespace != "" {
			t, err := table.ParseID(*body.Namespace, c.Query("delimiter"))
			if err != nil {
				return badInput("namespace: %v", err)
			}
			target = t
		}
	}
	action := rule.action
	if len(target) == 0 {
		action, isTable = auth.Admin, false
	}
	allowed := isTable && id.AllowsTable(action, target) || !isTable && id.AllowsNamespace(action, target)
	if !allowed && action == auth.Read && jobTarget(rule.target) && readsJobs(id, target) {
		allowed = true // refresh on the view reads its jobs (jobaccess.go)
	}
	if !allowed {
		return denied(id, action, target)
	}
	if rule.source && body.SourceQuery != nil {
		src, err := refresh.SourceTable(*body.SourceQuery)
		if err != nil {
			return err
		}
		if !id.AllowsTable(auth.Read, src) {
			return errs.Errorf(errs.CodePermissionDenied, "principal %s may not read %s, the source of this view", id.Principal, table.JoinID(src))
		}
	}
	return nil
}

// jobTarget reports whether k names a job's view: reading such a job
// needs read or refresh on the view (readsJobs).
func jobTarget(k targetKind) bool {
	return k == targetJobParam || k == targetJobBody || k == targetJobList
}

func denied(id *auth.Identity, action auth.Action, target []string) error {
	what := "the root"
	if len(target) > 0 {
		what = table.JoinID(target)
	}
	return errs.Errorf(errs.CodePermissionDenied, "principal %s has no %s grant on %s", id.Principal, action, what)
}

// visibleJobs keeps the jobs whose view the request's identity may read
// jobs of (readsJobs), each as it may see it (shownJob); without
// authentication it keeps them all, whole.
func visibleJobs(c *gin.Context, list []*jobs.Job) []*jobs.Job {
	id := requestIdentity(c)
	if id == nil {
		return list
	}
	out := list[:0]
	for _, j := range list {
		if readsJobs(id, j.ViewID()) {
			out = append(out, shownJob(c, j))
		}
	}
	return out
}

// peekBody reads a JSON object body (bounded by the body limit, and by
// limit unless it is negative: past it, a 401 asking for a header
// credential), decodes the fields the middleware needs, and puts the body
// back with its top-level identity members removed. An empty body is an
// empty object; a body that does not decode is a 400, as the handler
// would answer. fields: decode the fields (only authentication needs
// them). The body put back is noted as checked (checkedBody), so the
// handler's bindJSON does not check it again.
func peekBody(c *gin.Context, limit int64, fields bool) (bodyFields, error) {
	var f bodyFields
	var r io.Reader = c.Request.Body
	if limit >= 0 {
		r = io.LimitReader(r, limit+1)
	}
	raw, err := io.ReadAll(r)
	c.Request.Body.Close()
	if err == nil && limit >= 0 && int64(len(raw)) > limit {
		return f, errs.Errorf(errs.CodeUnauthenticated, "missing credentials: a body over %d bytes must come with Authorization: Bearer <token> or x-api-key", limit)
	}
	if err != nil {
		return f, bodyReadErr(err) // over the limit: 413; too slow: 408
	}
	restore := func(b []byte) {
		c.Request.Body = newBufferedBody(b) // bindJSON takes it without a copy
		c.Request.ContentLength = int64(len(b))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		restore(raw)
		return f, nil
	}
	// The strict checks the handler's decode makes (duplicate keys, the
	// shape of identity and context) come first: identity is removed
	// below, so a malformed one must be refused here.
	if err := checkJSON(raw); err != nil {
		return f, err
	}
	if plainObject(raw) {
		// No member the middleware reads or removes: nothing to decode,
		// the body goes back as it came.
		c.Set(checkedBodyKey, &checkedBody{body: raw})
		restore(raw)
		return f, nil
	}
	obj := jsonObject(raw)
	if _, err := envelopeOf(raw, obj, &struct{}{}); err != nil {
		return f, err
	}
	if fields && (obj == nil || mayHoldBodyFields(obj)) {
		if err := json.Unmarshal(raw, &f); err != nil {
			return f, badInput("malformed JSON body: %v", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	stripped := raw
	if obj == nil || hasIdentityKey(obj) {
		var err error
		if stripped, err = removeMembers(raw, isIdentityKey); err != nil {
			return f, badInput("malformed JSON body: %v", err)
		}
	}
	if obj != nil {
		_, ctxMember := obj["context"]
		c.Set(checkedBodyKey, &checkedBody{body: stripped, envelope: ctxMember})
	}
	restore(stripped)
	return f, nil
}

// plainObject reports whether a valid JSON body is an object none of
// whose member names the middleware reads or removes, even for
// encoding/json's case-insensitive match: each is ASCII without escapes
// and none is one of bodyFieldNames or "context" but for case. Such a
// body decodes into bodyFields as nothing, has no envelope and is put
// back unchanged, so peekBody skips decoding its members (most bodies).
func plainObject(raw []byte) bool {
	plain := true
	obj := strictjson.ObjectKeys(raw, func(key []byte, ascii bool) bool {
		if !ascii {
			plain = false
			return false
		}
		for _, name := range bodyFieldNames {
			if strings.EqualFold(string(key), name) {
				plain = false
				return false
			}
		}
		if strings.EqualFold(string(key), "context") {
			plain = false
		}
		return plain
	})
	return obj && plain
}

// bodyFieldNames are the members bodyFields decodes.
var bodyFieldNames = []string{"identity", "job_id", "view", "namespace", "source_query"}

// mayHoldBodyFields reports whether decoding an object with these members
// into bodyFields could set a field: some member's name is one of
// bodyFieldNames but for ASCII case (encoding/json's match), or is not
// ASCII (left to the decode). Most bodies have none, and skip a decode.
func mayHoldBodyFields(obj map[string]json.RawMessage) bool {
	for k := range obj {
		for i := 0; i < len(k); i++ {
			if k[i] >= utf8.RuneSelf {
				return true
			}
		}
		for _, name := range bodyFieldNames {
			if strings.EqualFold(k, name) {
				return true
			}
		}
	}
	return false
}

// hasIdentityKey reports whether an object has a member isIdentityKey
// matches; ASCII names are told apart without a decode.
func hasIdentityKey(obj map[string]json.RawMessage) bool {
	for k := range obj {
		ascii := true
		for i := 0; i < len(k); i++ {
			if k[i] >= utf8.RuneSelf {
				ascii = false
				break
			}
		}
		if ascii && !strings.EqualFold(k, "identity") {
			continue
		}
		if isIdentityKey(k) {
			return true
		}
	}
	return false
}

// isIdentityKey reports whether encoding/json would decode a member named
// key into a field tagged "identity" (it matches names case-insensitively,
// with its own folding rules).
func isIdentityKey(key string) bool {
	k, _ := json.Marshal(key)
	var probe struct {
		Identity json.RawMessage `json:"identity"`
	}
	_ = json.Unmarshal(append(append([]byte("{"), k...), []byte(":0}")...), &probe)
	return probe.Identity != nil
}

// removeMembers returns the JSON object body without its top-level members
// whose key drop matches; the other members keep their exact bytes. A body
// without such a member comes back unchanged.
func removeMembers(body []byte, drop func(string) bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return body, nil // not an object: the handler reports it
	}
	open := dec.InputOffset()
	var kept [][]byte
	removed := false
	prev := open
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		end := dec.InputOffset()
		// The member starts after the previous one's comma.
		start := prev + int64(len(body[prev:end])-len(bytes.TrimLeft(body[prev:end], " \t\r\n,")))
		if drop(key) {
			removed = true
		} else {
			kept = append(kept, body[start:end])
		}
		prev = end
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if !removed {
		return body, nil
	}
	out := append([]byte(nil), body[:open]...)
	out = append(out, bytes.Join(kept, []byte(","))...)
	out = append(out, '}')
	return append(out, body[dec.InputOffset():]...), nil
}
