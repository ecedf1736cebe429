package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/auth"
	"github.com/mvq-dev/mvq/duck"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

const (
	mimeArrowStream = "application/vnd.apache.arrow.stream"
	mimeArrowFile   = "application/vnd.apache.arrow.file"
	mimeJSON        = "application/json"
)

func (s *Server) openTable(c *gin.Context) (*table.Table, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	t, err := s.cat.OpenTable(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// bodyRecords reads a create/insert body: an Arrow IPC stream (the
// default) or file, or a JSON array of row objects converted to schema
// (inferred when schema is nil). JSON rows are decoded as they arrive (no
// copy of the body is kept); an IPC body is read whole, once, so every
// length in it is checked against the bytes actually sent
// (arrowjson.ReadIPC). A body over the limit is a 413 whatever its
// content type.
func (s *Server) bodyRecords(c *gin.Context, schema *arrow.Schema) (array.RecordReader, error) {
	ct, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	var body []byte
	var err error
	switch ct {
	case mimeJSON:
		src := &readErr{r: c.Request.Body}
		if src.r == nil {
			src.r = bytes.NewReader(nil)
		}
		var rec arrow.RecordBatch
		if schema == nil {
			rec, err = arrowjson.InferRows(src, s.cat.Options().Mem)
		} else {
			rec, err = arrowjson.DecodeRows(src, schema, s.cat.Options().Mem)
		}
		if err != nil && src.err != nil {
			// The body did not arrive (over the limit, too slow), whatever
			// the decoder made of its end.
			return nil, bodyReadErr(src.err)
		}
		if err != nil {
			return nil, badInput("body: %v", err)
		}
		defer rec.Release()
		return array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	case "", mimeArrowStream, mimeArrowFile, "application/octet-stream":
		if body, err = readBody(c); err != nil {
			return nil, err
		}
		// Decoded buffers (decompressed ones) may use as much memory as an
		// uncompressed body could.
		r, err := arrowjson.ReadIPC(body, s.cat.Options().Mem, s.cfg.MaxBodyBytes)
		if err != nil {
			return nil, badInput("body: not a valid Arrow IPC stream or file: %v", err)
		}
		return &ipcInput{RecordReader: r}, nil
	default:
		// Read first all the same, so one over the limit is a 413.
		if _, err := readBody(c); err != nil {
			return nil, err
		}
		return nil, badInput("Content-Type %q: send %s, %s or %s", ct, mimeArrowStream, mimeArrowFile, mimeJSON)
	}
}

// readErr keeps the first error of the reader under it other than EOF.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// ipcInput turns IPC decoding errors into 400s.
type ipcInput struct{ array.RecordReader }

func (r *ipcInput) Err() error {
	if err := r.RecordReader.Err(); err != nil {
		return badInput("body: bad Arrow IPC data: %v", err)
	}
	return nil
}

func (s *Server) createTable(c *gin.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	rdr, err := s.bodyRecords(c, nil)
	if err != nil {
		return err
	}
	defer rdr.Release()
	props, err := createParams(c)
	if err != nil {
		return err
	}
	t, m, err := s.cat.CreateTable(c.Request.Context(), id, rdr.Schema(), rdr, c.Query("mode"), props.raw())
	if err != nil {
		return err
	}
	resp := gin.H{"version": m.Version, "location": t.Location(), "properties": userProperties(m), "managed_versioning": m.ManagedVersioning()}
	if opts, _ := s.storageOptions(c, id, nil, ""); opts != nil {
		resp["storage_options"] = opts
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) insertIntoTable(c *gin.Context) error {
	ctx := c.Request.Context()
	if b := c.Query("branch"); b == "" || b == table.MainBranch {
		if done, err := s.insertDeclared(c); done || err != nil {
			return err
		}
	}
	t, err := s.openTable(c)
	if err == nil {
		t, err = onBranch(c, t, nil)
	}
	if err != nil {
		return err
	}
	rdr, err := s.latestBodyRecords(ctx, c, t)
	if err != nil {
		return err
	}
	defer rdr.Release()
	nm, n, err := t.Insert(ctx, rdr, c.Query("mode"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": nm.Version, "num_inserted_rows": n})
	return nil
}

// latestBodyRecords decodes the request body as rows of the schema of
// t's latest version (insert, merge_insert).
func (s *Server) latestBodyRecords(ctx context.Context, c *gin.Context, t *table.Table) (array.RecordReader, error) {
	_, schema, err := t.LoadSchema(ctx, 0)
	if err != nil {
		return nil, err
	}
	return s.bodyRecords(c, schema)
}

type versionBody struct {
	ID      []string `json:"id"`
	Version *int64   `json:"version"`
	Branch  *string  `json:"branch"`
}

func (b versionBody) version() (uint64, error) {
	if err := nonNegative("version", b.Version); err != nil {
		return 0, err
	}
	if b.Version == nil {
		return 0, nil
	}
	return uint64(*b.Version), nil
}

// pathAndBody parses the path id and decodes the JSON body into req; a
// body id (bodyID returns it) must agree with the path.
func pathAndBody(c *gin.Context, req any, bodyID func() []string) ([]string, error) {
	id, err := pathID(c)
	if err == nil {
		err = bindJSON(c, req)
	}
	if err == nil {
		err = checkBodyID(id, bodyID())
	}
	if err != nil {
		return nil, err
	}
	return id, nil
}

// tableAndBody is pathAndBody plus opening the path's table.
func (s *Server) tableAndBody(c *gin.Context, req any, bodyID func() []string) (*table.Table, error) {
	id, err := pathAndBody(c, req, bodyID)
	if err != nil {
		return nil, err
	}
	t, err := s.cat.OpenTable(c.Request.Context(), id)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Server) describeTable(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		versionBody
		VendCredentials *bool `json:"vend_credentials"`
	}
	id, err := pathAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	opts, err := s.storageOptions(c, id, req.VendCredentials, "vend_credentials")
	if err != nil {
		return err
	}
	t, err := s.cat.OpenTable(ctx, id)
	if errs.CodeOf(err) == errs.CodeTableNotFound && req.Version == nil && req.Branch == nil {
		if done, err := s.describeDeclared(c, id, opts); done || err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if t, err = onBranch(c, t, req.Branch); err != nil {
		return err
	}
	v, err := req.version()
	if err != nil {
		return err
	}
	m, err := t.Load(ctx, v)
	if err != nil {
		return err
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return err
	}
	js, err := arrowjson.FromArrow(schema)
	if err != nil {
		return err
	}
	ident, err := t.Identity(ctx, m)
	if err != nil {
		return err
	}
	id = t.ID()
	resp := gin.H{
		"table":     id[len(id)-1],
		"namespace": id[:len(id)-1],
		"version":   m.Version,
		"location":  t.Location(),
		"table_uri": t.Location(),
		// A Lance client commits to a Lance-format table through the
		// version routes, so every commit passes through the catalog.
		"managed_versioning": m.ManagedVersioning(),
		"schema":             js,
		"stats":              gin.H{"num_deleted_rows": m.NumDeletedRows(), "num_fragments": len(m.Fragments), "num_rows": m.NumRows()},
		"metadata": func() map[string]string {
			if m.Metadata == nil {
				return map[string]string{} // the spec's metadata is an object
			}
			return m.Metadata
		}(),
		"properties": func() map[string]string {
			out := map[string]string{}
			for k, v := range m.Properties {
				out[k] = propertyText(v)
			}
			out[table.IdentityProperty] = ident
			return out
		}(),
	}
	if s.views != nil && m.IsView() {
		st, err := s.views.DescribeView(ctx, t, m)
		if err != nil {
			return err
		}
		resp["materialized_view"] = st
	}
	if opts != nil {
		resp["storage_options"] = opts
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) tableExists(c *gin.Context) error {
	var req versionBody
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if req.Version != nil {
		v, err := req.version()
		if err != nil {
			return err
		}
		if _, err := t.Version(c.Request.Context(), v); err != nil {
			return err
		}
	}
	c.Status(http.StatusOK)
	return nil
}

func (s *Server) countRows(c *gin.Context) error {
	var req struct {
		ID        []string `json:"id"`
		Version   *int64   `json:"version"`
		Predicate string   `json:"predicate"`
		Branch    *string  `json:"branch"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	v, err := versionBody{Version: req.Version}.version()
	if err != nil {
		return err
	}
	n, err := t.CountRows(c.Request.Context(), v, req.Predicate)
	if err != nil {
		return err
	}
	c.Data(http.StatusOK, mimeJSON, []byte(strconv.FormatInt(n, 10)))
	return nil
}

// MaxQueryLimit bounds k/limit of one query.
const MaxQueryLimit = 1 << 40

type queryRequest struct {
	ID      []string `json:"id"`
	Columns *struct {
		ColumnNames   []string          `json:"column_names"`
		ColumnAliases map[string]string `json:"column_aliases"`
	} `json:"columns"`
	Filter    string `json:"filter"`
	K         *int64 `json:"k"`
	Limit     *int64 `json:"limit"`
	Offset    *int64 `json:"offset"`
	Version   *int64 `json:"version"`
	WithRowID bool   `json:"with_row_id"`
	Vector    any    `json:"vector"`
	FullText  any    `json:"full_text_query"`
	Prefilter *bool  `json:"prefilter"`
	// Vector search (vector.go).
	DistanceType      *string  `json:"distance_type"`
	VectorColumn      *string  `json:"vector_column"`
	LowerBound        *float32 `json:"lower_bound"`
	UpperBound        *float32 `json:"upper_bound"`
	BypassVectorIndex *bool    `json:"bypass_vector_index"`
	Nprobes           *int64   `json:"nprobes"`       // index.go
	RefineFactor      *int64   `json:"refine_factor"` // index.go
	Extra             []string `json:"-"`
	Branch            *string  `json:"branch"`
}

func (s *Server) queryTable(c *gin.Context) error {
	ctx := c.Request.Context()
	var req queryRequest
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	q, err := req.options()
	if err != nil {
		return err
	}
	vq, isVector, err := req.vectorQuery(q)
	if err != nil {
		return err
	}
	fq, isText, err := req.textQuery(q)
	if err != nil {
		return err
	}
	var rdr array.RecordReader
	if isText {
		rdr, err = textSearch(ctx, t, fq, q)
	} else if isVector {
		if err = s.vectorIndex(ctx, t, &vq, req); err == nil {
			rdr, err = vectorSearch(ctx, t, vq, q)
		}
	} else {
		rdr, err = t.Query(ctx, q)
	}
	if err != nil {
		return err
	}
	if q.Filter != "" && !isVector && !isText {
		// A filtered query runs in a DuckDB session: read the whole result
		// first (memory, then a temporary file) so the session is free
		// again before a slow client reads the first byte.
		if rdr, err = spool(rdr, DefaultSpoolMemoryBytes, s.spoolBudget, auth.PrincipalFrom(c.Request.Context())); err != nil {
			return queryErr(err)
		}
	}
	defer rdr.Release()
	// Pull the first batch before the status line so errors found while
	// evaluating are still a problem body.
	first := rdr.Next()
	if err := rdr.Err(); err != nil {
		return err
	}
	if strings.Contains(c.GetHeader("Accept"), mimeJSON) {
		c.Header("Content-Type", mimeJSON)
		c.Status(http.StatusOK)
		_ = arrowjson.WriteRows(c.Writer, &peeked{RecordReader: rdr, first: first})
		return nil
	}
	stream := strings.Contains(c.GetHeader("Accept"), mimeArrowStream)
	if stream {
		c.Header("Content-Type", mimeArrowStream)
	} else {
		c.Header("Content-Type", mimeArrowFile)
	}
	c.Status(http.StatusOK)
	bw := bufio.NewWriterSize(c.Writer, 1<<16)
	if err := writeIPC(bw, &peeked{RecordReader: rdr, first: first}, stream); err == nil {
		_ = bw.Flush()
	}
	return nil
}

// queryErr names what failed while a query's result was read: the
// engine's admission errors are 503, SQL errors a 400 naming the filter.
func queryErr(err error) error {
	if e := table.EngineErr(err); e != nil {
		return e
	}
	var se *duck.SQLError
	if errors.As(err, &se) {
		msg, _, _ := strings.Cut(se.Err.Error(), "\n")
		return badInput("filter: %s", strings.TrimSpace(msg))
	}
	return err
}

func (req queryRequest) options() (table.QueryOptions, error) {
	var q table.QueryOptions
	for name, v := range map[string]*int64{"k": req.K, "limit": req.Limit, "offset": req.Offset, "version": req.Version} {
		if err := nonNegative(name, v); err != nil {
			return q, err
		}
		if v != nil && *v > MaxQueryLimit {
			return q, badInput("%s: at most %d (got %d)", name, int64(MaxQueryLimit), *v)
		}
	}
	if req.K != nil {
		q.Limit = *req.K
	}
	if req.Limit != nil {
		q.Limit = *req.Limit
	}
	if req.Offset != nil {
		q.Offset = *req.Offset
	}
	if req.Version != nil {
		q.Version = uint64(*req.Version)
	}
	q.Filter = req.Filter
	q.RowAddr, q.LanceRowAddr = req.WithRowID, req.WithRowID
	if req.Columns != nil {
		if len(req.Columns.ColumnNames) > 0 && len(req.Columns.ColumnAliases) > 0 {
			return q, badInput("columns: give column_names or column_aliases, not both")
		}
		if req.Columns.ColumnNames != nil {
			q.Columns = req.Columns.ColumnNames
		} else if req.Columns.ColumnAliases != nil {
			aliases := make([]string, 0, len(req.Columns.ColumnAliases))
			for a := range req.Columns.ColumnAliases {
				aliases = append(aliases, a)
			}
			sort.Strings(aliases)
			for _, a := range aliases {
				q.Columns = append(q.Columns, req.Columns.ColumnAliases[a])
				q.Aliases = append(q.Aliases, a)
			}
		}
		for i, col := range q.Columns {
			if col == "" {
				return q, badInput("columns: entry %d is empty", i)
			}
		}
	}
	return q, nil
}

// peeked replays a batch already pulled with Next.
type peeked struct {
	array.RecordReader
	first   bool
	started bool
}

func (p *peeked) Next() bool {
	if !p.started {
		p.started = true
		return p.first
	}
	return p.RecordReader.Next()
}

func writeIPC(w io.Writer, rdr array.RecordReader, stream bool) error {
	type recWriter interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var iw recWriter
	var err error
	if stream {
		iw = ipc.NewWriter(w, ipc.WithSchema(rdr.Schema()))
	} else {
		iw, err = ipc.NewFileWriter(w, ipc.WithSchema(rdr.Schema()))
		if err != nil {
			return err
		}
	}
	for rdr.Next() {
		if err := iw.Write(rdr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return iw.Close()
}

func (s *Server) deleteFromTable(c *gin.Context) error {
	var req struct {
		ID        []string `json:"id"`
		Predicate *string  `json:"predicate"`
		Branch    *string  `json:"branch"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if req.Predicate == nil {
		return badInput("predicate: required")
	}
	m, n, err := t.Delete(c.Request.Context(), *req.Predicate)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version, "num_deleted_rows": n})
	return nil
}

func (s *Server) updateTable(c *gin.Context) error {
	var req struct {
		ID        []string   `json:"id"`
		Predicate *string    `json:"predicate"`
		Updates   [][]string `json:"updates"`
		Branch    *string    `json:"branch"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if len(req.Updates) == 0 {
		return badInput("updates: required, a list of [column, sql_expression] pairs")
	}
	ups := make([][2]string, len(req.Updates))
	for i, u := range req.Updates {
		if len(u) != 2 {
			return badInput("updates[%d]: want [column, sql_expression], got %d elements", i, len(u))
		}
		ups[i] = [2]string{u[0], u[1]}
	}
	pred := ""
	if req.Predicate != nil {
		pred = *req.Predicate
	}
	m, n, err := t.Update(c.Request.Context(), pred, ups)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"updated_rows": n, "version": m.Version})
	return nil
}

func (s *Server) dropTable(c *gin.Context) error {
	var req dropRequest
	t, err := s.tableAndBody(c, &req, func() []string { return req.ID })
	if err != nil {
		return err
	}
	id := t.ID()
	cascade, err := req.cascade()
	if err != nil {
		return err
	}
	if err := s.dropViewsFirst(c, id, cascade); err != nil {
		return err
	}
	loc := t.Location()
	if err := s.cat.DropTable(c.Request.Context(), id); err != nil {
		return err
	}
	s.dropped(c, id, false)
	c.JSON(http.StatusOK, gin.H{"id": id, "location": loc, "properties": gin.H{}})
	return nil
}

func (s *Server) restoreTable(c *gin.Context) error {
	var req versionBody
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if req.Version == nil {
		return badInput("version: required")
	}
	v, err := req.version()
	if err != nil {
		return err
	}
	m, err := t.Restore(c.Request.Context(), v)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": m.Version})
	return nil
}

func (s *Server) tableStats(c *gin.Context) error {
	var req versionBody
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	st, err := t.Stats(c.Request.Context())
	if err != nil {
		return err
	}
	l := st.Lengths
	c.JSON(http.StatusOK, gin.H{
		"total_bytes": st.TotalBytes, "num_rows": st.NumRows, "num_indices": 0,
		"fragment_stats": gin.H{
			"num_fragments": st.NumFragments, "num_small_fragments": st.NumSmallFragments,
			"lengths": gin.H{"min": l.Min, "max": l.Max, "mean": l.Mean, "p25": l.P25, "p50": l.P50, "p75": l.P75, "p99": l.P99},
		},
	})
	return nil
}

type tableVersion struct {
	Version         uint64            `json:"version"`
	ManifestPath    string            `json:"manifest_path"`
	ManifestSize    int64             `json:"manifest_size"`
	ETag            string            `json:"e_tag,omitempty"`
	TimestampMillis int64             `json:"timestamp_millis"`
	Metadata        map[string]string `json:"metadata"`
}

func versionOf(t *table.Table, vf table.VersionFile, m *table.Manifest, etag string) tableVersion {
	md := m.Metadata
	if md == nil {
		md = map[string]string{}
	}
	// A Lance-format table names its manifests from the store's root, as
	// the Lance clients that commit to it through these routes do.
	mp := t.ManifestPath(vf)
	if m.ManagedVersioning() {
		mp = t.RootManifestPath(vf)
	}
	return tableVersion{
		Version: vf.Version, ManifestPath: mp, ManifestSize: vf.Size,
		ETag: etag, TimestampMillis: m.TimestampMillis, Metadata: md,
	}
}

func (s *Server) listVersions(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		ID         []string `json:"id"`
		PageToken  *string  `json:"page_token"`
		Limit      *int64   `json:"limit"`
		Descending *bool    `json:"descending"`
		Branch     *string  `json:"branch"`
	}
	var t *table.Table
	var err error
	if c.Request.Method == http.MethodGet {
		t, err = s.openTable(c)
	} else {
		t, err = s.tableAndBody(c, &req, func() []string { return req.ID })
	}
	if err == nil {
		t, err = onBranch(c, t, req.Branch)
	}
	if errs.CodeOf(err) == errs.CodeTableNotFound && req.Branch == nil {
		// A declared table has no versions yet.
		if id, perr := pathID(c); perr == nil {
			if ok, derr := s.cat.Declared(ctx, id); derr != nil {
				return derr
			} else if ok {
				c.JSON(http.StatusOK, gin.H{"versions": []tableVersion{}})
				return nil
			}
		}
	}
	if err != nil {
		return err
	}
	token, limit, err := page(c, req.PageToken, req.Limit)
	if err != nil {
		return err
	}
	desc := c.Query("descending") == "true" || (req.Descending != nil && *req.Descending)
	vs, err := t.Versions(ctx)
	if err != nil {
		return err
	}
	if desc {
		for i, j := 0, len(vs)-1; i < j; i, j = i+1, j-1 {
			vs[i], vs[j] = vs[j], vs[i]
		}
	}
	start := 0
	if token != "" {
		after, err := strconv.ParseUint(token, 10, 64)
		if err != nil {
			return badInput("page_token: %q is not a token this server issued", token)
		}
		for start < len(vs) && vs[start].Version != after {
			start++
		}
		start++
	}
	if start > len(vs) {
		start = len(vs)
	}
	vs = vs[start:]
	next := ""
	if limit > 0 && len(vs) > limit {
		vs = vs[:limit]
		next = strconv.FormatUint(vs[limit-1].Version, 10)
	}
	out := make([]tableVersion, 0, len(vs))
	for _, vf := range vs {
		m, err := t.Load(ctx, vf.Version)
		if err != nil {
			return err
		}
		out = append(out, versionOf(t, vf, m, ""))
	}
	resp := gin.H{"versions": out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) describeVersion(c *gin.Context) error {
	ctx := c.Request.Context()
	var req versionBody
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	v, err := req.version()
	if err != nil {
		return err
	}
	var vf table.VersionFile
	if v == 0 {
		vf, err = t.LatestVersion(ctx)
	} else {
		vf, err = t.Version(ctx, v)
	}
	if err != nil {
		return err
	}
	m, err := t.Load(ctx, vf.Version)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"version": versionOf(t, vf, m, "")})
	return nil
}

func (s *Server) createVersion(c *gin.Context) error {
	ctx := c.Request.Context()
	var req struct {
		ID           []string          `json:"id"`
		Version      *int64            `json:"version"`
		ManifestPath *string           `json:"manifest_path"`
		ManifestSize *int64            `json:"manifest_size"`
		ETag         string            `json:"e_tag"`
		Metadata     map[string]string `json:"metadata"`
		NamingScheme string            `json:"naming_scheme"`
		Branch       *string           `json:"branch"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if errs.CodeOf(err) == errs.CodeTableNotFound && req.Branch == nil && req.Version != nil && req.ManifestPath != nil {
		// The first commit of a declared table (managed versioning).
		id, _ := pathID(c)
		if ok, derr := s.cat.Declared(ctx, id); derr != nil {
			return derr
		} else if ok {
			return s.createDeclaredVersion(c, id, *req.Version, *req.ManifestPath, req.NamingScheme, req.Metadata, req.ManifestSize, req.ETag)
		}
	}
	if err != nil {
		return err
	}
	if req.Version == nil {
		return badInput("version: required")
	}
	if err := nonNegative("version", req.Version); err != nil {
		return err
	}
	// An existing version is a 409 whatever else is wrong (put-if-not-exists).
	if _, err := t.Version(ctx, uint64(*req.Version)); err == nil {
		return errs.Errorf(errs.CodeConcurrentModification, "version %d already exists", *req.Version)
	}
	if req.ManifestPath == nil || *req.ManifestPath == "" {
		return badInput("manifest_path: required")
	}
	if err := nonNegative("manifest_size", req.ManifestSize); err != nil {
		return err
	}
	scheme := table.NamingScheme(strings.ToUpper(req.NamingScheme))
	if scheme == "" {
		scheme = table.NamingV2
	}
	vf, m, data, err := t.CreateVersionIf(ctx, uint64(*req.Version), *req.ManifestPath, scheme, req.Metadata, req.ManifestSize, req.ETag)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	c.JSON(http.StatusOK, gin.H{"version": versionOf(t, vf, m, `"`+hex.EncodeToString(sum[:16])+`"`)})
	return nil
}

// createDeclaredVersion answers version/create of a declared table's
// first version.
func (s *Server) createDeclaredVersion(c *gin.Context, id []string, v int64, manifestPath, naming string, md map[string]string, size *int64, etag string) error {
	if v < 0 {
		return badInput("version: must not be negative")
	}
	if err := nonNegative("manifest_size", size); err != nil {
		return err
	}
	scheme := table.NamingScheme(strings.ToUpper(naming))
	if scheme == "" {
		scheme = table.NamingV2
	}
	t, vf, m, data, err := s.cat.CreateDeclaredVersion(c.Request.Context(), id, uint64(v), manifestPath, scheme, md, size, etag)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	c.JSON(http.StatusOK, gin.H{"version": versionOf(t, vf, m, `"`+hex.EncodeToString(sum[:16])+`"`)})
	return nil
}
