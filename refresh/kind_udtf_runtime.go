package refresh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

// A udtf view whose udtf is base64 of {"runtime": "<name>"} runs user code:
// the source query's output (its input_columns, all by default) goes to
// the runtime whole, or one partition per distinct partition_by value; the
// rows it answers are the view, recomputed at every refresh and committed
// at once. The view's output_schema must be given. error_handling, an
// object {"mode": "fail" | "retry" | "skip", "retries": N}, says what a
// failed partition does: fail the refresh (default), be tried again up to
// N times, or be left out and counted (ItemResult.SkippedPartitions).
//
// With partition_by, Plan runs the source query at the planned version
// and counts the distinct partition_by values D (NULL is one value); the
// plan has N = min(D, maxPartitionItems) work items, which the
// orchestrator runs in parallel under the job's concurrency. Every item
// runs the query over the whole source, orders the distinct values of its
// output (by their text, NULL first) and keeps the values whose rank g
// has g*N/D == its index: one value per item when D <= maxPartitionItems,
// else runs of consecutive values. Only N is stored in the plan, never
// the values, so the plan stays small however many there are; a query
// whose output changes between runs (random()) still gives every value to
// exactly one item, as each item counts the values it sees. An item runs
// its partitions intra_applier_concurrency at a time, each under
// error_handling on its own. The view's rows are in value order (the
// items' order), each partition's in the order the runtime answers.
// Each item reads the whole source: that is the price of not storing
// the values, and why maxPartitionItems is well under MaxConcurrency.

// maxPartitionItems caps the work items of a partitioned view (a
// variable for tests).
var maxPartitionItems = 256

// runtimeUser is implemented by bindings that run declared runtimes.
type runtimeUser interface{ Runtimes() []string }

// takesOutputSchema is implemented by bindings that cannot derive their
// columns: the create request's output_schema is the view's schema.
type takesOutputSchema interface {
	CheckOutputSchema(selected []arrow.Field, given *arrow.Schema) error
}

// udfDoc is the decoded udtf (or udf) of user code: the runtime to run.
type udfDoc struct {
	Runtime string `json:"runtime"`
}

// parseUDFDoc decodes doc as a runtime reference; ok is false when doc is
// not one (a udtf view's SQL-only spec).
func parseUDFDoc(doc []byte, field string) (d udfDoc, ok bool, err error) {
	trimmed := bytes.TrimSpace(doc)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"runtime"`)) {
		return d, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, true, invalid("%s: %v", field, strings.TrimPrefix(err.Error(), "json: "))
	}
	if d.Runtime == "" {
		return d, true, invalid("%s: runtime: required", field)
	}
	return d, true, nil
}

// ErrorHandling is a udtf's error_handling.
type ErrorHandling struct {
	Mode    string `json:"mode"` // fail (default), retry, skip
	Retries int    `json:"retries,omitempty"`
}

func parseErrorHandling(raw json.RawMessage) (ErrorHandling, error) {
	eh := ErrorHandling{Mode: "fail"}
	if len(raw) == 0 || string(raw) == "null" {
		return eh, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eh); err != nil {
		return eh, invalid("udtf_spec.error_handling: %v (want {\"mode\": \"fail\" | \"retry\" | \"skip\", \"retries\": N})", strings.TrimPrefix(err.Error(), "json: "))
	}
	switch eh.Mode {
	case "", "fail":
		eh.Mode = "fail"
	case "retry":
		if eh.Retries <= 0 || eh.Retries > 100 {
			return eh, invalid("udtf_spec.error_handling.retries: must be 1 to 100 with mode retry")
		}
	case "skip":
	default:
		return eh, invalid("udtf_spec.error_handling.mode: %q (want fail, retry or skip)", eh.Mode)
	}
	return eh, nil
}

type runtimeUDTFBinding struct {
	doc         udfDoc
	input       []string // input_columns; nil: all
	partitionBy string
	onError     ErrorHandling
}

func bindRuntimeUDTF(u *UDTFEntry, d udfDoc) (Binding, error) {
	b := &runtimeUDTFBinding{doc: d, input: u.InputColumns}
	if u.PartitionBy != nil {
		b.partitionBy = *u.PartitionBy
	}
	var err error
	if b.onError, err = parseErrorHandling(u.ErrorHandling); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *runtimeUDTFBinding) Runtimes() []string { return []string{b.doc.Runtime} }

func (b *runtimeUDTFBinding) Columns([]arrow.Field) ([]arrow.Field, error) {
	return nil, invalid("output_schema: required for a udtf view that runs a runtime")
}

func (b *runtimeUDTFBinding) CheckOutputSchema(selected []arrow.Field, given *arrow.Schema) error {
	has := map[string]bool{}
	for _, f := range selected {
		has[f.Name] = true
	}
	for _, c := range b.input {
		if !has[c] {
			return invalid("udtf_spec.input_columns: %q is not a column of source_query", c)
		}
	}
	if b.partitionBy != "" && !has[b.partitionBy] {
		return invalid("udtf_spec.partition_by: %q is not a column of source_query", b.partitionBy)
	}
	seen := map[string]bool{}
	for _, f := range given.Fields() {
		if f.Name == "" || strings.HasPrefix(f.Name, reservedPrefix) || seen[f.Name] {
			return invalid("output_schema: column %q is empty, reserved or repeated", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

func (b *runtimeUDTFBinding) NewApplier(env *ApplyEnv) (Applier, error) {
	s, err := env.Engine.runtimeSettings(env.View, env.Plan.Options, b.doc.Runtime)
	if err != nil {
		return nil, err
	}
	return &wholeApplier{b: b, env: env, settings: s}, nil
}

// wholeApplier gathers the whole input, then runs the partitions.
type wholeApplier struct {
	b        *runtimeUDTFBinding
	env      *ApplyEnv
	settings udf.Settings
	in       []arrow.RecordBatch
}

func (a *wholeApplier) Apply(_ context.Context, in arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	in.Retain()
	a.in = append(a.in, in)
	return nil, nil
}

func (a *wholeApplier) Close() error {
	releaseAll(a.in)
	a.in = nil
	return nil
}

func (a *wholeApplier) Finish(ctx context.Context) ([]arrow.RecordBatch, error) {
	e := a.env.Engine
	if len(a.in) == 0 {
		return nil, nil
	}
	all, err := e.concatAll(a.in[0].Schema(), a.in)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	input, err := selectColumns(all, a.b.input)
	if err != nil {
		return nil, err
	}
	defer input.Release()
	parts, err := a.partitions(ctx, all, input)
	if err != nil {
		return nil, err
	}
	defer releasePartitions(parts)
	out := make([]arrow.RecordBatch, len(parts))
	errList := make([]error, len(parts))
	var skipped atomic.Int64
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(min(a.env.Workers, len(parts)), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// A panic on a partition fails the item, not the process.
				errList[i] = table.Recover("udtf partition", func() (err error) {
					out[i], err = a.runPartition(ctx, parts[i].rec)
					return err
				})
				if errList[i] != nil && a.b.onError.Mode == "skip" && (udf.IsPermanent(errList[i]) || isUDFError(errList[i])) {
					what := "the input"
					if parts[i].name != "" {
						what = "partition " + parts[i].name
					}
					a.env.Events(fmt.Sprintf("%s skipped: %v", what, errList[i]))
					errList[i] = nil
					skipped.Add(1)
				}
			}
		}()
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()
	a.env.skipped(skipped.Load())
	for _, err := range errList {
		if err != nil {
			releaseAll(out)
			return nil, err
		}
	}
	var res []arrow.RecordBatch
	for _, r := range out {
		if r != nil {
			res = append(res, r)
		}
	}
	return res, nil
}

func isUDFError(err error) bool {
	var ue *udf.Error
	return errors.As(err, &ue)
}

// runPartition runs one partition, tried again per error_handling.
func (a *wholeApplier) runPartition(ctx context.Context, in arrow.RecordBatch) (arrow.RecordBatch, error) {
	tries := 1
	if a.b.onError.Mode == "retry" {
		tries += a.b.onError.Retries
	}
	var err error
	for t := 0; t < tries; t++ {
		var rec arrow.RecordBatch
		rec, err = a.env.Engine.udfs.Run(ctx, udf.Call{Settings: a.settings, Mode: udf.Table, Events: a.env.Events}, in, a.env.View.Schema)
		if err == nil {
			defer rec.Release()
			if err := a.env.Output.add(rec.NumRows(), recordBytes(rec)); err != nil {
				return nil, err
			}
			return table.Conform(ctx, rec, a.env.View.Schema, a.env.Mem)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if t+1 < tries {
			a.env.Events(fmt.Sprintf("runtime %s failed (try %d of %d): %v", a.settings.Name, t+1, tries, err))
		}
	}
	return nil, udfErr(err)
}

// partitions cuts input into the partition_by groups of this work item
// (see the file comment), in value order, or answers it whole.
func (a *wholeApplier) partitions(ctx context.Context, all, input arrow.RecordBatch) ([]partition, error) {
	if a.b.partitionBy == "" {
		input.Retain()
		return []partition{{rec: input}}, nil
	}
	idx := all.Schema().FieldIndices(a.b.partitionBy)
	if len(idx) == 0 {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "source_query no longer selects partition_by column %q", a.b.partitionBy)
	}
	col := all.Column(idx[0])
	groups := map[string][]int64{}
	for i := 0; i < col.Len(); i++ {
		k := partitionKey(col, i)
		groups[k] = append(groups[k], int64(i))
	}
	keys := slices.Sorted(maps.Keys(groups))
	items := max(len(a.env.Plan.Items), 1)
	ctx = compute.WithAllocator(ctx, a.env.Mem)
	var out []partition
	for g, k := range keys {
		if g*items/len(keys) != a.env.Index {
			continue
		}
		ib := array.NewInt64Builder(a.env.Mem)
		ib.AppendValues(groups[k], nil)
		take := ib.NewArray()
		ib.Release()
		rec, err := table.TakeRecord(ctx, input, take)
		take.Release()
		if err != nil {
			releasePartitions(out)
			return nil, err
		}
		out = append(out, partition{rec: rec, name: partitionName(a.b.partitionBy, k)})
	}
	return out, nil
}

// partition is one partition's input; name says which, for events.
type partition struct {
	rec  arrow.RecordBatch
	name string
}

func releasePartitions(ps []partition) {
	for _, p := range ps {
		p.rec.Release()
	}
}

// partitionKey is the group of row i of col: "n" for NULL, else "v" and
// the value's text.
func partitionKey(col arrow.Array, i int) string {
	if col.IsNull(i) {
		return "n"
	}
	return "v" + col.ValueStr(i)
}

func partitionName(column, key string) string {
	if key == "n" {
		return column + " NULL"
	}
	v := key[1:]
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return fmt.Sprintf("%s=%q", column, v)
}

// partitionItems answers the work items of a whole-source refresh: whole
// alone, or, for a view that runs user code per partition_by value, N
// copies of it (see the file comment), counting the values by running
// the source query over frags of source version sm. reason says so.
func (e *Engine) partitionItems(ctx context.Context, v *View, src *table.Table, sm *table.Manifest, frags []table.Fragment, whole WorkItem) ([]WorkItem, string, error) {
	b, ok := v.Binding.(*runtimeUDTFBinding)
	if !ok || b.partitionBy == "" || whole.Rows == 0 {
		return []WorkItem{whole}, "", nil
	}
	var read []table.Fragment
	for _, f := range frags {
		if f.Rows > 0 {
			read = append(read, f)
		}
	}
	scan, err := src.Scan(ctx, sm, table.ScanOptions{Fragments: read})
	if err != nil {
		return nil, "", err
	}
	defer scan.Release()
	out, err := e.db.Query(ctx, map[string]array.RecordReader{v.query.Name: scan}, v.query.SQL)
	if err != nil {
		return nil, "", sqlError(err)
	}
	defer out.Release()
	seen := map[string]struct{}{}
	for len(seen) <= maxPartitionItems && out.Next() {
		rec := out.RecordBatch()
		idx := rec.Schema().FieldIndices(b.partitionBy)
		if len(idx) == 0 {
			return nil, "", errs.Errorf(errs.CodeSchemaValidation, "source_query no longer selects partition_by column %q", b.partitionBy)
		}
		col := rec.Column(idx[0])
		for i := 0; i < col.Len() && len(seen) <= maxPartitionItems; i++ {
			seen[partitionKey(col, i)] = struct{}{}
		}
	}
	if err := out.Err(); err != nil {
		return nil, "", sqlError(err)
	}
	n := max(min(len(seen), maxPartitionItems), 1)
	items := make([]WorkItem, n)
	for i := range items {
		items[i] = whole
		items[i].Index = i
		items[i].Ranges = slices.Clone(whole.Ranges)
	}
	reason := fmt.Sprintf("%d values of partition_by %q", len(seen), b.partitionBy)
	if len(seen) > maxPartitionItems {
		reason = fmt.Sprintf("more than %d values of partition_by %q", maxPartitionItems, b.partitionBy)
	}
	return items, fmt.Sprintf("; %s, in %d work items", reason, n), nil
}

// selectColumns is rec restricted to names (all when nil).
func selectColumns(rec arrow.RecordBatch, names []string) (arrow.RecordBatch, error) {
	if len(names) == 0 {
		rec.Retain()
		return rec, nil
	}
	cols := make([]arrow.Array, len(names))
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		idx := rec.Schema().FieldIndices(n)
		if len(idx) == 0 {
			return nil, errs.Errorf(errs.CodeSchemaValidation, "input column %q is no longer produced", n)
		}
		cols[i], fields[i] = rec.Column(idx[0]), rec.Schema().Field(idx[0])
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

// udfErr classifies a user-code failure so that the job's failure shows
// its message (naming the runtime) instead of "internal error":
//   - permanent ones (bad output, a crash, a 4xx) and timeouts are
//     CodeInvalidInput: the orchestrator does not retry them. A timeout is
//     the runtime's verdict after its own retries (http: max_retries; an
//     exec process that did not answer in time was killed, and the same
//     input mostly hangs again): running the whole work item again, up to
//     the task's retries, would only hold a worker slot for that many
//     timeouts more. error_handling's retry mode of a udtf view still
//     tries a partition again when the user asks;
//   - other failures of the runtime (an endpoint that kept answering 5xx
//     or refusing connections) are CodeServiceUnavailable: retried by the
//     orchestrator with backoff, and shown if the retries run out.
func udfErr(err error) error {
	var ue *udf.Error
	if !errors.As(err, &ue) {
		return err
	}
	switch {
	case ue.Permanent || ue.Timeout > 0:
		return &errs.Error{Code: errs.CodeInvalidInput, Err: err}
	default:
		return &errs.Error{Code: errs.CodeServiceUnavailable, Err: err}
	}
}

// runtimeSettings resolves the runtime a view's user code runs with for
// one job under the job's inline manifest, else the view's
// (settingsInForce); its env_vars, the names the runtime allows, are the
// subprocesses' environment.
func (e *Engine) runtimeSettings(v *View, opts Options, name string) (udf.Settings, error) {
	return e.settingsInForce(opts.Manifest, v.Def.Manifest, "udtf_spec.manifest", name)
}

// checkRuntimes refuses a refresh whose view would run an undeclared
// runtime.
func (e *Engine) checkRuntimes(v *View, opts Options) error {
	ru, ok := v.Binding.(runtimeUser)
	if !ok {
		return nil
	}
	for _, name := range ru.Runtimes() {
		if _, err := e.runtimeSettings(v, opts, name); err != nil {
			return err
		}
	}
	return nil
}
