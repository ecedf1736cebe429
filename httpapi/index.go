package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/gin-gonic/gin"

	"github.com/mvq-dev/mvq/index"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/vector"
)

// Indexes: create_index, create_scalar_index, index/list,
// index/{index_name}/stats, index/{index_name}/drop (package index), and
// their use by query (nprobes, refine_factor, full_text_query). Each line
// of a table has its own indexes: the request's branch names the line
// (drop: the body's field or the query parameter), and a query on a
// branch uses that branch's.

type createIndexRequest struct {
	ID             []string `json:"id"`
	Branch         *string  `json:"branch"`
	Column         string   `json:"column"`
	IndexType      string   `json:"index_type"`
	Name           *string  `json:"name"`
	DistanceType   string   `json:"distance_type"`
	NumPartitions  *int64   `json:"num_partitions"`
	NumSubVectors  *int64   `json:"num_sub_vectors"`
	NumBits        *int64   `json:"num_bits"`
	SampleRate     *int64   `json:"sample_rate"`
	MaxIterations  *int64   `json:"max_iterations"`
	TargetPartSize *int64   `json:"target_partition_size"`
	M              *int64   `json:"m"`
	EfConstruction *int64   `json:"ef_construction"`
	WithPosition   *bool    `json:"with_position"`
	BaseTokenizer  *string  `json:"base_tokenizer"`
	Language       *string  `json:"language"`
	MaxTokenLength *int64   `json:"max_token_length"`
	LowerCase      *bool    `json:"lower_case"`
	Stem           *bool    `json:"stem"`
	RemoveStop     *bool    `json:"remove_stop_words"`
	ASCIIFolding   *bool    `json:"ascii_folding"`
}

// spec checks the request and answers what to build. Parameters of
// index types this server does not build, and tokenizer options other
// than its one tokenizer's, are refused by name.
func (r createIndexRequest) spec(scalarOnly bool) (index.Spec, error) {
	sp := index.Spec{Column: r.Column, Type: r.IndexType, Metric: r.DistanceType}
	if r.Name != nil {
		if *r.Name == "" {
			return sp, badInput("name: empty (omit it for <column>_idx)")
		}
		sp.Name = *r.Name
	}
	if strings.TrimSpace(r.IndexType) == "" {
		return sp, badInput("index_type: required (BTREE, BITMAP, INVERTED, FTS, IVF_FLAT)")
	}
	if scalarOnly && index.IsVector(r.IndexType) {
		return sp, badInput("index_type: %s is a vector index; use create_index", r.IndexType)
	}
	for name, v := range map[string]*int64{"num_partitions": r.NumPartitions, "sample_rate": r.SampleRate, "max_iterations": r.MaxIterations} {
		if v != nil && *v < 1 {
			return sp, badInput("%s: must be at least 1 (got %d)", name, *v)
		}
	}
	if r.NumPartitions != nil {
		sp.Partitions = int(min(*r.NumPartitions, 1<<20))
	}
	if r.SampleRate != nil {
		sp.SampleRate = int(min(*r.SampleRate, 1<<30))
	}
	if r.MaxIterations != nil {
		sp.MaxIterations = int(min(*r.MaxIterations, 1<<20))
	}
	for name, v := range map[string]*int64{"num_sub_vectors": r.NumSubVectors, "num_bits": r.NumBits} {
		if v != nil && !strings.EqualFold(strings.TrimSpace(r.IndexType), index.IVFPQ) {
			return sp, badInput("%s: only for IVF_PQ", name)
		}
		if v != nil && (*v < 1 || *v > 1<<16) {
			return sp, badInput("%s: 1 to %d (got %d)", name, 1<<16, *v)
		}
	}
	if r.NumSubVectors != nil {
		sp.SubVectors = int(*r.NumSubVectors)
	}
	if r.NumBits != nil {
		sp.Bits = int(*r.NumBits)
	}
	for name, set := range map[string]bool{"target_partition_size": r.TargetPartSize != nil, "m": r.M != nil, "ef_construction": r.EfConstruction != nil} {
		if set {
			return sp, badInput("%s: only for index types this server does not build (HNSW); IVF_FLAT and IVF_PQ take num_partitions, sample_rate, max_iterations, distance_type (IVF_PQ also num_sub_vectors, num_bits)", name)
		}
	}
	isFTS := strings.EqualFold(r.IndexType, index.Inverted) || strings.EqualFold(r.IndexType, "FTS")
	tok := map[string]bool{
		"base_tokenizer":    r.BaseTokenizer != nil && *r.BaseTokenizer != "simple",
		"language":          r.Language != nil && !strings.EqualFold(*r.Language, "English"),
		"max_token_length":  r.MaxTokenLength != nil && *r.MaxTokenLength != index.MaxTokenLength,
		"lower_case":        r.LowerCase != nil && !*r.LowerCase,
		"stem":              r.Stem != nil && *r.Stem,
		"remove_stop_words": r.RemoveStop != nil && *r.RemoveStop,
		"ascii_folding":     r.ASCIIFolding != nil && *r.ASCIIFolding,
	}
	for name, bad := range tok {
		if bad {
			return sp, badInput("%s: the INVERTED index has one tokenizer (simple: split at non-letters and non-digits, lower case, tokens up to %d bytes, no stemming, stop words or folding)", name, index.MaxTokenLength)
		}
	}
	if isFTS && r.WithPosition != nil {
		sp.NoPositions = !*r.WithPosition
	}
	if !isFTS {
		for name, set := range map[string]bool{"with_position": r.WithPosition != nil, "base_tokenizer": r.BaseTokenizer != nil,
			"language": r.Language != nil, "max_token_length": r.MaxTokenLength != nil, "lower_case": r.LowerCase != nil,
			"stem": r.Stem != nil, "remove_stop_words": r.RemoveStop != nil, "ascii_folding": r.ASCIIFolding != nil} {
			if set {
				return sp, badInput("%s: only for INVERTED (FTS) indexes", name)
			}
		}
	}
	return sp, nil
}

// createIndex builds the index before answering (the spec allows an
// asynchronous build; this server's is synchronous, so list and stats
// show it complete at once). An existing index of the name is replaced.
func (s *Server) createIndex(scalarOnly bool) func(*gin.Context) error {
	return func(c *gin.Context) error {
		var req createIndexRequest
		t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
		if err != nil {
			return err
		}
		sp, err := req.spec(scalarOnly)
		if err != nil {
			return err
		}
		if _, err := index.Create(c.Request.Context(), t, sp); err != nil {
			return err
		}
		c.JSON(http.StatusOK, gin.H{})
		return nil
	}
}

type indexBody struct {
	ID        []string `json:"id"`
	Version   *int64   `json:"version"`
	Branch    *string  `json:"branch"`
	IndexName *string  `json:"index_name"`
	PageToken *string  `json:"page_token"`
	Limit     *int64   `json:"limit"`
}

// indexTable opens the table and the manifest of the body's version.
func (s *Server) indexTable(c *gin.Context, req *indexBody) (*table.Table, *table.Manifest, error) {
	t, err := s.tableAndBody(c, req, func() []string { return req.ID })
	if err == nil {
		t, err = onBranch(c, t, req.Branch)
	}
	if err != nil {
		return nil, nil, err
	}
	v, err := versionBody{Version: req.Version}.version()
	if err != nil {
		return nil, nil, err
	}
	m, err := t.Load(c.Request.Context(), v)
	if err != nil {
		return nil, nil, err
	}
	return t, m, nil
}

func indexContent(im *index.Meta, m *table.Manifest) gin.H {
	indexed, unindexed := im.Coverage(m)
	details := map[string]any{"column": im.Column}
	if im.Type == index.IVFFlat || im.Type == index.IVFPQ {
		if im.Type == index.IVFPQ {
			details["num_sub_vectors"] = im.Params.SubVectors
			details["num_bits"] = im.Params.Bits
		}
		details["distance_type"] = im.Metric
		details["num_partitions"] = im.Params.Partitions
		details["sample_rate"] = im.Params.SampleRate
		details["max_iterations"] = im.Params.MaxIterations
	}
	if im.Type == index.Inverted {
		details["tokenizer"] = "simple"
		details["with_position"] = !im.Params.NoPositions
		details["max_token_length"] = index.MaxTokenLength
		details["scoring"] = "bm25"
	}
	dj, _ := json.Marshal(details)
	return gin.H{
		"index_name": im.Name, "index_uuid": im.UUID, "columns": []string{im.Column}, "status": "done",
		"index_type": im.Type, "num_indexed_rows": indexed, "num_unindexed_rows": unindexed,
		"size_bytes": im.SizeBytes(), "num_segments": len(im.Fragments), "created_at": im.CreatedAt.Format(time.RFC3339Nano),
		"index_version": im.Format, "index_details": string(dj),
	}
}

func (s *Server) listIndexes(c *gin.Context) error {
	var req indexBody
	t, m, err := s.indexTable(c, &req)
	if err != nil {
		return err
	}
	if req.IndexName != nil {
		return badInput("index_name: not a field of index/list")
	}
	token, limit, err := page(c, req.PageToken, req.Limit)
	if err != nil {
		return err
	}
	metas, err := index.List(c.Request.Context(), t)
	if err != nil {
		return err
	}
	names := make([]string, len(metas))
	byName := map[string]*index.Meta{}
	for i, im := range metas {
		names[i] = im.Name
		byName[im.Name] = im
	}
	pageNames, next := table.Page(names, token, limit)
	out := make([]gin.H, 0, len(pageNames))
	for _, n := range pageNames {
		out = append(out, indexContent(byName[n], m))
	}
	resp := gin.H{"indexes": out}
	if next != "" {
		resp["page_token"] = next
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) indexStats(c *gin.Context) error {
	var req indexBody
	t, m, err := s.indexTable(c, &req)
	if err != nil {
		return err
	}
	name := c.Param("index_name")
	if req.IndexName != nil && *req.IndexName != name {
		return badInput("index_name: %q in the body, %q in the path", *req.IndexName, name)
	}
	if req.PageToken != nil || req.Limit != nil {
		return badInput("page_token, limit: not fields of index stats")
	}
	im, err := index.Load(c.Request.Context(), t, name)
	if err != nil {
		return err
	}
	indexed, unindexed := im.Coverage(m)
	resp := gin.H{"index_type": im.Type, "num_indexed_rows": indexed, "num_unindexed_rows": unindexed, "num_indices": 1}
	if im.Metric != "" {
		resp["distance_type"] = im.Metric
	}
	c.JSON(http.StatusOK, resp)
	return nil
}

func (s *Server) dropIndex(c *gin.Context) error {
	var req struct {
		ID     []string `json:"id"`
		Branch *string  `json:"branch"`
	}
	t, err := s.tableOnBranch(c, &req, func() ([]string, *string) { return req.ID, req.Branch })
	if err != nil {
		return err
	}
	if err := index.Drop(c.Request.Context(), t, c.Param("index_name")); err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{})
	return nil
}

// vectorIndex picks the IVF index for a vector search unless
// bypass_vector_index is set: the index on the searched column built for
// the query's distance type. nprobes and refine_factor apply to it; with
// no index the search is exact, which is what any nprobes would approach.
func (s *Server) vectorIndex(ctx context.Context, t *table.Table, vq *vector.Query, req queryRequest) error {
	if req.Nprobes != nil && *req.Nprobes < 0 {
		return badInput("nprobes: must be at least 0 (got %d)", *req.Nprobes)
	}
	if req.RefineFactor != nil && (*req.RefineFactor < 0 || *req.RefineFactor > 1<<20) {
		return badInput("refine_factor: 0 to %d (got %d)", 1<<20, *req.RefineFactor)
	}
	if req.BypassVectorIndex != nil && *req.BypassVectorIndex {
		return nil
	}
	if vq.Version == 0 {
		// The index is chosen for the version searched (its column may be
		// another field in another version): the latest, named once.
		vf, err := t.LatestVersion(ctx)
		if err != nil {
			return err
		}
		vq.Version = vf.Version
	}
	im, err := index.ForVector(ctx, t, vq.Version, vq.Column, vq.Metric)
	if err != nil || im == nil {
		return err
	}
	nprobes := 0
	if req.Nprobes != nil {
		nprobes = int(min(*req.Nprobes, 1<<20))
	}
	p, err := index.NewProbe(ctx, t, im, vq.Vector, nprobes)
	if err != nil || p == nil {
		return err
	}
	vq.Index = p
	if req.RefineFactor != nil {
		vq.Refine = int(*req.RefineFactor)
	}
	if im.Type == index.IVFPQ && (vq.Filter == "" || vq.Postfilter) {
		k := vq.K
		if k <= 0 {
			k = vector.DefaultK
		}
		p.Shortlist(min(k*max(vq.Refine, 1), vector.MaxK))
	}
	return nil
}

// textQuery reads full_text_query: {"string_query": {"query",
// "columns"}} (several columns: a multi_match over them) or
// {"structured_query": {"query": FtsQuery}} (ftsQuery); ok is false
// without one.
func (req queryRequest) textQuery(q table.QueryOptions) (index.FTSQuery, bool, error) {
	var fq index.FTSQuery
	if req.FullText == nil {
		return fq, false, nil
	}
	raw, err := json.Marshal(req.FullText)
	if err != nil {
		return fq, false, badInput("full_text_query: %v", err)
	}
	var body struct {
		StringQuery *struct {
			Query   *string  `json:"query"`
			Columns []string `json:"columns"`
		} `json:"string_query"`
		StructuredQuery *struct {
			Query json.RawMessage `json:"query"`
		} `json:"structured_query"`
	}
	if err := decodeStrict(raw, &body); err != nil {
		return fq, false, badInput("full_text_query: %v", err)
	}
	switch {
	case body.StringQuery != nil && body.StructuredQuery != nil:
		return fq, false, badInput("full_text_query: give string_query or structured_query, not both")
	case body.StringQuery != nil:
		if body.StringQuery.Query == nil {
			return fq, false, badInput("full_text_query.string_query.query: required")
		}
		fq.Text = *body.StringQuery.Query
		if len(body.StringQuery.Columns) > 1 {
			fq.Query = &index.TextQuery{Multi: []index.MatchQuery{}}
			for _, col := range body.StringQuery.Columns {
				fq.Query.Multi = append(fq.Query.Multi, index.MatchQuery{Column: col, Terms: fq.Text})
			}
		} else if len(body.StringQuery.Columns) == 1 {
			fq.Column = body.StringQuery.Columns[0]
		}
	case body.StructuredQuery != nil:
		if body.StructuredQuery.Query == nil {
			return fq, false, badInput("full_text_query.structured_query.query: required")
		}
		if fq.Query, err = ftsQuery(body.StructuredQuery.Query, "full_text_query.structured_query.query", 0); err != nil {
			return fq, false, err
		}
	default:
		return fq, false, nil // {}: no full-text search
	}
	if req.Vector != nil {
		if vq, isVec, _ := req.vectorQuery(q); isVec && len(vq.Vector) > 0 {
			return fq, false, badInput("full_text_query, vector: hybrid search is not supported; send one or the other")
		}
	}
	if req.Prefilter != nil && !*req.Prefilter && q.Filter != "" {
		return fq, false, badInput("prefilter: false is not supported for full-text search; the filter applies before scoring")
	}
	fq.K = 10
	if q.Limit > 0 {
		fq.K = int(min(q.Limit+q.Offset, vector.MaxK))
	} else if q.Offset > 0 {
		fq.K = int(min(10+q.Offset, vector.MaxK))
	}
	fq.Filter, fq.Columns, fq.Version, fq.RowAddr = q.Filter, q.Columns, q.Version, q.RowAddr
	return fq, true, nil
}

// textSearch runs a full-text query and answers its rows after q's
// offset, with q's aliases.
func textSearch(ctx context.Context, t *table.Table, fq index.FTSQuery, q table.QueryOptions) (array.RecordReader, error) {
	rec, err := index.SearchText(ctx, t, fq)
	if err != nil {
		return nil, err
	}
	return searchRows(rec, q)
}
