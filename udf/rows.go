package udf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/arrowjson"
)

// inputRows renders the rows of in as JSON objects, each with "__row"
// (base + its index) first.
func inputRows(in arrow.RecordBatch, base int64) ([][]byte, error) {
	var buf bytes.Buffer
	if err := arrowjson.WriteRecords(&buf, []arrow.RecordBatch{in}); err != nil {
		return nil, err
	}
	var objs []json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &objs); err != nil {
		return nil, err
	}
	out := make([][]byte, len(objs))
	for i, o := range objs {
		head := `{"__row":` + strconv.FormatInt(base+int64(i), 10)
		body := bytes.TrimSpace(o)
		if len(body) > 2 {
			out[i] = append([]byte(head+","), body[1:]...)
		} else {
			out[i] = []byte(head + "}")
		}
	}
	return out, nil
}

// clip shortens a line for an error message.
func clip(b []byte) string {
	if len(b) > 200 {
		return strconv.Quote(string(b[:200])) + "…"
	}
	return strconv.Quote(string(b))
}

// decodeRows turns output objects into a batch of schema out. For
// RowWise, every object must carry "__row" in [base, base+n) and each
// input row must be answered once; the rows are put in input order. Keys
// that are not output columns are ignored; a missing one is null.
func decodeRows(rt string, mode Mode, lines [][]byte, n int, base int64, out *arrow.Schema, mem memory.Allocator) (arrow.RecordBatch, error) {
	order := make([]int, 0, len(lines))
	objs := make([]map[string]json.RawMessage, len(lines))
	if mode == RowWise {
		seen := make([]int, n)
		for i := range seen {
			seen[i] = -1
		}
		for i, l := range lines {
			if err := json.Unmarshal(l, &objs[i]); err != nil || objs[i] == nil {
				return nil, failf(rt, true, "output line is not a JSON object: first bad line %s", clip(l))
			}
			var r int64
			if err := json.Unmarshal(objs[i]["__row"], &r); err != nil {
				return nil, failf(rt, true, "output line has no integer __row: first bad line %s", clip(l))
			}
			if r < base || r >= base+int64(n) || seen[r-base] >= 0 {
				return nil, failf(rt, true, "output line answers __row %d, not an unanswered input row of this batch: first bad line %s", r, clip(l))
			}
			seen[r-base] = i
		}
		for r, i := range seen {
			if i < 0 {
				return nil, failf(rt, true, "no output line for __row %d", base+int64(r))
			}
			order = append(order, i)
		}
	} else {
		for i, l := range lines {
			if err := json.Unmarshal(l, &objs[i]); err != nil || objs[i] == nil {
				return nil, failf(rt, true, "output line is not a JSON object: first bad line %s", clip(l))
			}
			order = append(order, i)
		}
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for k, i := range order {
		if k > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('{')
		for j, f := range out.Fields() {
			if j > 0 {
				buf.WriteByte(',')
			}
			key, _ := json.Marshal(f.Name)
			buf.Write(key)
			buf.WriteByte(':')
			if v, ok := objs[i][f.Name]; ok {
				buf.Write(v)
			} else {
				buf.WriteString("null")
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	rec, err := arrowjson.DecodeRows(&buf, nullable(out), mem)
	if err != nil {
		var re *arrowjson.RowError
		line := []byte(nil)
		if errors.As(err, &re) && re.Row >= 0 && re.Row < len(order) {
			line = lines[order[re.Row]]
		}
		return nil, &Error{Runtime: rt, Msg: fmt.Sprintf("output does not match the declared outputs: first bad line %s", clip(line)), Permanent: true, Err: err}
	}
	return rec, nil
}

func nullable(s *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		f.Nullable = true
		fields[i] = f
	}
	return arrow.NewSchema(fields, nil)
}
