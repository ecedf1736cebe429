package refresh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// Checkpoints. A work item's staged output is a function of what its
// checkpoint key hashes (CheckpointKey): the view's identity, definition,
// column bindings and schema, the manifest in force, the source's
// identity, branch and version, the options that shape the files, and the
// item itself within its plan. The orchestrator records each finished
// item under its key (with the job that staged it); a later job of the
// same view whose item has the same key copies that output into its own
// staging names (Reuse) instead of expanding the item. Reused files are
// checked first: each must be there with the size and row count recorded,
// else Reuse fails and the caller expands the item as usual.

// checkpointVersion changes whenever what an item's output depends on
// changes in a way the key below does not see (so old records never match).
const checkpointVersion = "mvq.checkpoint.1"

// checkpointInput is what a checkpoint key hashes (as JSON).
type checkpointInput struct {
	Version    string          `json:"v"`
	View       []string        `json:"view"`
	ViewUUID   string          `json:"view_uuid"`
	Definition json.RawMessage `json:"definition"`
	Columns    json.RawMessage `json:"columns,omitempty"`
	Schema     string          `json:"schema"`
	Kind       Kind            `json:"kind"`
	// The manifest in force: an inline one (its text) or the view's
	// (inside Definition); the checksum names either.
	Manifest         string `json:"manifest,omitempty"`
	ManifestChecksum string `json:"manifest_checksum,omitempty"`
	SourceUUID       string `json:"source_uuid"`
	SourceVersion    uint64 `json:"source_version"`
	SrcBranch        string `json:"src_branch,omitempty"`
	SourceBranchID   string `json:"source_branch_id,omitempty"`
	// The options that change the files an item writes (source_task_size
	// is in the item's ranges; concurrency and the cluster change nothing).
	MaxRowsPerFragment int    `json:"max_rows_per_fragment"`
	OutputLimit        *int64 `json:"output_limit,omitempty"`
	// The item and, for kinds that are not row-wise, the number of items
	// (a udtf partition item's rows depend on both).
	Items int      `json:"items,omitempty"`
	Item  WorkItem `json:"item"`
}

// CheckpointKey is the key under which work item index of plan records
// its output for later jobs: equal keys mean the item writes the same
// rows into the same files. It is "" when the job does not checkpoint
// (a backfill, a no-op plan). The view is read at the plan's base
// version (cached per job).
func (e *Engine) CheckpointKey(ctx context.Context, plan *Plan, index int) (string, error) {
	if plan.Options.Backfill != nil || plan.Mode == ModeNoOp {
		return "", nil
	}
	if index < 0 || index >= len(plan.Items) {
		return "", invalid("work item %d: the plan has %d items", index, len(plan.Items))
	}
	if err := checkJobID(plan.JobID); err != nil {
		return "", err
	}
	v, err := e.planView(ctx, plan)
	if err != nil {
		return "", err
	}
	in := checkpointInput{
		Version:            checkpointVersion,
		View:               plan.View,
		ViewUUID:           plan.ViewUUID,
		Definition:         v.Manifest.Properties[propView],
		Columns:            v.Manifest.Properties[propColumns],
		Schema:             v.Manifest.Schema,
		Kind:               plan.Kind,
		Manifest:           plan.Options.Manifest,
		ManifestChecksum:   plan.Options.ManifestChecksum,
		SourceUUID:         plan.sourceIdentity(),
		SourceVersion:      plan.SourceVersion,
		SrcBranch:          plan.Options.SrcBranch,
		SourceBranchID:     plan.SourceBranchID,
		MaxRowsPerFragment: plan.Options.MaxRowsPerFragment,
		OutputLimit:        plan.Options.OutputLimit,
		Item:               plan.Items[index],
	}
	if !traitsOf(plan.Kind).RowWise {
		in.Items = len(plan.Items)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Reuse makes prior, the result job from recorded for the item whose
// checkpoint key equals that of item index of plan, the result of item
// index: each staged file of prior is checked (present, with the size
// recorded), copied to the plan's own staging name for the item and
// checked again (size, and the row count in the file's footer). The
// result answers the copies (under a run token of their own). Any file
// missing, short or different is an error (CodeInvalidTableState), and
// so is a result that names files outside from's staging of the item:
// the caller then expands the item instead. Copies made before an error
// are removed.
func (e *Engine) Reuse(ctx context.Context, plan *Plan, index int, from string, prior ItemResult) (ItemResult, error) {
	if index < 0 || index >= len(plan.Items) {
		return ItemResult{}, invalid("work item %d: the plan has %d items", index, len(plan.Items))
	}
	if err := checkJobID(plan.JobID); err != nil {
		return ItemResult{}, err
	}
	bad := func(format string, args ...any) error {
		return &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("checkpoint of job %s item %d: ", from, prior.Index) + fmt.Sprintf(format, args...)}
	}
	if err := checkJobID(from); err != nil || from == plan.JobID {
		return ItemResult{}, bad("not a job this item can reuse")
	}
	if prior.Index != index || prior.Skipped {
		return ItemResult{}, bad("recorded for item %d (skipped %v), wanted item %d", prior.Index, prior.Skipped, index)
	}
	if len(prior.Spans) != 0 && len(prior.Spans) != len(prior.Fragments) {
		return ItemResult{}, bad("%d spans for %d files", len(prior.Spans), len(prior.Fragments))
	}
	t, err := e.cat.OpenTable(ctx, plan.View)
	if err != nil {
		return ItemResult{}, stateErr(err)
	}
	wh := e.cat.Warehouse()
	src, dst := itemPrefix(from, index), itemPrefix(plan.JobID, index)
	res := prior
	res.Index, res.Fragments = index, make([]table.Fragment, 0, len(prior.Fragments))
	done := false
	defer func() {
		if !done {
			for _, f := range res.Fragments {
				_ = wh.Delete(context.WithoutCancel(ctx), t.Key(f.Path))
			}
		}
	}()
	var written int64
	for k, f := range prior.Fragments {
		// Staged files take the catalog's data file extension (fragio.go).
		// A run's token may follow the file's number (fragio.go).
		ext := path.Ext(f.Path)
		rest, staged := strings.CutPrefix(f.Path, src)
		num, _, _ := strings.Cut(strings.TrimSuffix(rest, ext), "-")
		if !staged || !itemFileName.MatchString(rest) || num != strconv.Itoa(k) || f.Rows <= 0 || f.Bytes <= 0 {
			return ItemResult{}, bad("file %d is %q (%d rows, %d bytes), not %s%d[-RUN]%s", k, f.Path, f.Rows, f.Bytes, src, k, ext)
		}
		if size, err := wh.Size(ctx, t.Key(f.Path)); err != nil {
			return ItemResult{}, bad("%s: %v", f.Path, wh.Rel(err))
		} else if size != f.Bytes {
			return ItemResult{}, bad("%s has %d bytes, %d recorded", f.Path, size, f.Bytes)
		}
		// The copy takes a run token of its own: a run again of this
		// reuse (a duplicate) writes, and on failure removes, only its
		// own copies, never the files another run recorded.
		nf := f
		nf.Path = dst + strconv.Itoa(k) + "-" + runToken() + ext
		if err := wh.CopyObject(ctx, t.Key(f.Path), t.Key(nf.Path)); err != nil {
			return ItemResult{}, fmt.Errorf("copy checkpoint %s to %s: %w", f.Path, nf.Path, wh.Rel(err))
		}
		res.Fragments = append(res.Fragments, nf)
		if err := e.checkStaged(ctx, t, nf); err != nil {
			return ItemResult{}, bad("%v", err)
		}
		written += f.Rows
	}
	if written != prior.RowsWritten {
		return ItemResult{}, bad("files hold %d rows, %d recorded", written, prior.RowsWritten)
	}
	done = true
	return res, nil
}

// checkStaged checks that the staged file f of t has f's size and, by its
// footer, f's rows.
func (e *Engine) checkStaged(ctx context.Context, t *table.Table, f table.Fragment) error {
	size, err := e.cat.Warehouse().Size(ctx, t.Key(f.Path))
	if err != nil {
		return err
	}
	if size != f.Bytes {
		return fmt.Errorf("%s has %d bytes, %d recorded", f.Path, size, f.Bytes)
	}
	// Ranged reads: only the footer is fetched.
	r, err := t.OpenFragment(ctx, f, table.FragmentReadOptions{WholeFileBytes: 1, Mem: e.mem})
	if err != nil {
		return err
	}
	defer r.Close()
	if n := r.NumRows(); n != f.Rows {
		return fmt.Errorf("%s holds %d rows, %d recorded", f.Path, n, f.Rows)
	}
	return nil
}
