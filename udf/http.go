package udf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/mvq-dev/mvq/arrowjson"
)

// outputLimit is the most bytes one answer of s may hold.
func outputLimit(s Settings) int64 {
	if s.MaxOutputBytes > 0 {
		return s.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

// maxRetryAfter caps how long a Retry-After may make a call wait.
const maxRetryAfter = time.Minute

// sem is the in-flight limit of runtime name in this process: its
// declared max_in_flight, one semaphore for every call whatever a
// manifest lowered (a lowered max_in_flight bounds its call's batches in
// Run). Settings built without Resolve use their MaxInFlight.
func (m *Manager) sem(s Settings) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := s.declaredInFlight
	if n <= 0 {
		n = s.MaxInFlight
	}
	key := s.Name + "\x00" + strconv.Itoa(n)
	ch := m.sems[key]
	if ch == nil {
		ch = make(chan struct{}, max(n, 1))
		m.sems[key] = ch
	}
	return ch
}

func (m *Manager) httpBatch(ctx context.Context, c Call, in arrow.RecordBatch, base int64, out *arrow.Schema) (arrow.RecordBatch, error) {
	s := c.Settings
	var (
		body  []byte
		ctype string
		err   error
	)
	switch s.Protocol {
	case ProtocolOpenAIEmbeddings:
		return m.embed(ctx, s, in, out)
	case ProtocolJSONBatch:
		rows, err := inputRows(in, base)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		buf.WriteString(`{"rows":[`)
		for i, r := range rows {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(r)
		}
		buf.WriteString(`]}`)
		body, ctype = buf.Bytes(), "application/json"
	case ProtocolArrow:
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(in.Schema()), ipc.WithAllocator(m.Mem))
		if err := w.Write(in); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		body, ctype = buf.Bytes(), "application/vnd.apache.arrow.stream"
	default:
		return nil, failf(s.Name, true, "unknown protocol %q", s.Protocol)
	}
	resp, err := m.post(ctx, s, body, ctype)
	if err != nil {
		return nil, err
	}
	if s.Protocol == ProtocolArrow {
		rd, err := arrowjson.ReadIPC(resp, m.Mem, outputLimit(s))
		if err != nil {
			return nil, failf(s.Name, true, "answer is not an Arrow IPC stream: %v", err)
		}
		defer rd.Release()
		var recs []arrow.RecordBatch
		for rd.Next() {
			r := rd.RecordBatch()
			r.Retain()
			recs = append(recs, r)
		}
		defer releaseAll(recs)
		if err := rd.Err(); err != nil {
			return nil, failf(s.Name, true, "answer is not an Arrow IPC stream: %v", err)
		}
		return concat(m.Mem, rd.Schema(), recs)
	}
	var doc struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(resp, &doc); err != nil {
		return nil, failf(s.Name, true, "answer is not {\"rows\": [...]}: %v: first bytes %s", err, clip(resp))
	}
	lines := make([][]byte, len(doc.Rows))
	for i, r := range doc.Rows {
		lines[i] = r
	}
	return decodeRows(s.Name, c.Mode, lines, int(in.NumRows()), base, out, m.Mem)
}

// embed calls an OpenAI-compatible embeddings endpoint with the text
// column of in (null texts are not sent and get null embeddings) and
// answers one fixed_size_list<float32>[dimensions] column named as out's
// only field.
func (m *Manager) embed(ctx context.Context, s Settings, in arrow.RecordBatch, out *arrow.Schema) (arrow.RecordBatch, error) {
	if in.NumCols() != 1 || out.NumFields() != 1 {
		return nil, failf(s.Name, true, "openai-embeddings takes one text input column and gives one output (got %d inputs, %d outputs)", in.NumCols(), out.NumFields())
	}
	col, ok := in.Column(0).(interface {
		IsNull(int) bool
		Value(int) string
		Len() int
	})
	if !ok {
		return nil, failf(s.Name, true, "openai-embeddings input column %q is %s, not text", in.Schema().Field(0).Name, in.Column(0).DataType())
	}
	var texts []string
	var at []int
	for i := 0; i < col.Len(); i++ {
		if !col.IsNull(i) {
			texts = append(texts, col.Value(i))
			at = append(at, i)
		}
	}
	dim := s.Dimensions
	vecs := make([][]float32, len(texts))
	if len(texts) > 0 {
		req := map[string]any{"model": s.Model, "input": texts, "encoding_format": "float"}
		if dim > 0 {
			req["dimensions"] = dim
		}
		body, _ := json.Marshal(req)
		resp, err := m.post(ctx, s, body, "application/json")
		if err != nil {
			return nil, err
		}
		var doc struct {
			Data []struct {
				Index     *int      `json:"index"`
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(resp, &doc); err != nil {
			return nil, failf(s.Name, true, "answer is not an embeddings response: %v: first bytes %s", err, clip(resp))
		}
		if len(doc.Data) != len(texts) {
			return nil, failf(s.Name, true, "answered %d embeddings for %d inputs", len(doc.Data), len(texts))
		}
		for i, d := range doc.Data {
			k := i
			if d.Index != nil {
				k = *d.Index
			}
			if k < 0 || k >= len(texts) || vecs[k] != nil {
				return nil, failf(s.Name, true, "embedding index %d is out of range or repeated", k)
			}
			if len(d.Embedding) != dim {
				return nil, failf(s.Name, true, "embedding %d has %d dimensions, want %d", k, len(d.Embedding), dim)
			}
			vecs[k] = d.Embedding
		}
	}
	typ := arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32)
	b := array.NewFixedSizeListBuilder(m.Mem, int32(dim), arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Float32Builder)
	k := 0
	for i := 0; i < col.Len(); i++ {
		if k < len(at) && at[k] == i {
			b.Append(true)
			vb.AppendValues(vecs[k], nil)
			k++
		} else {
			b.AppendNull()
		}
	}
	arr := b.NewArray()
	defer arr.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: out.Field(0).Name, Type: typ, Nullable: true}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{arr}, int64(col.Len())), nil
}

// post sends body to the runtime's URL within its timeout, at most
// MaxInFlight at once per runtime, retrying 429, 5xx and connection
// errors with exponential backoff (or the answer's Retry-After).
func (m *Manager) post(ctx context.Context, s Settings, body []byte, ctype string) ([]byte, error) {
	sem := m.sem(s)
	var last error
	for attempt := 0; ; attempt++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		data, wait, err := m.postOnce(ctx, s, body, ctype)
		<-sem
		if err == nil {
			return data, nil
		}
		var ue *Error
		if errors.As(err, &ue) && ue.Permanent || ctx.Err() != nil {
			return nil, err
		}
		last = err
		if attempt >= s.MaxRetries {
			var timeout time.Duration
			if ue != nil {
				timeout = ue.Timeout
			}
			return nil, &Error{Runtime: s.Name, Msg: fmt.Sprintf("gave up after %d attempts (max_retries %d)", attempt+1, s.MaxRetries), Timeout: timeout, Err: last}
		}
		if wait <= 0 {
			wait = min(m.backoffBase<<attempt, 10*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// postOnce is one request; a retryable failure comes with the wait the
// server asked for (0: none).
func (m *Manager) postOnce(ctx context.Context, s Settings, body []byte, ctype string) ([]byte, time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Duration(s.Timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, failf(s.Name, true, "bad url: %v", err)
	}
	req.Header.Set("Content-Type", ctype)
	if s.APIKeyEnv != "" {
		if key := os.Getenv(s.APIKeyEnv); key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	timedOut := func(err error) error {
		if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			d := time.Duration(s.Timeout)
			return &Error{Runtime: s.Name, Msg: fmt.Sprintf("no answer within the timeout of %s", d), Timeout: d}
		}
		return nil
	}
	resp, err := m.client.Do(req)
	if err != nil {
		if te := timedOut(err); te != nil {
			return nil, 0, te
		}
		return nil, 0, &Error{Runtime: s.Name, Msg: "request failed", Err: err}
	}
	defer resp.Body.Close()
	limit := outputLimit(s)
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if te := timedOut(err); te != nil {
			return nil, 0, te
		}
		return nil, 0, &Error{Runtime: s.Name, Msg: "reading the answer failed", Err: err}
	}
	if int64(len(data)) > limit {
		return nil, 0, failf(s.Name, true, "answer larger than max_output_bytes (%d bytes)", limit)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, retryAfter(resp.Header.Get("Retry-After")), failf(s.Name, false, "status %d: %s", resp.StatusCode, clip(data))
	case resp.StatusCode >= 300:
		return nil, 0, failf(s.Name, true, "status %d: %s", resp.StatusCode, clip(data))
	}
	return data, 0, nil
}

// retryAfter parses a Retry-After header (seconds or an HTTP date),
// capped at maxRetryAfter; 0 when absent or unreadable.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(h, 64); err == nil && n >= 0 {
		return min(time.Duration(n*float64(time.Second)), maxRetryAfter)
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(time.Until(t), 0), maxRetryAfter)
	}
	return 0
}
