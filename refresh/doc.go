// Package refresh is the engine that creates materialized views and
// refreshes them. It speaks of views, versions and work items, never of
// queues or HTTP: package jobs drives it, one step per task, in any number
// of processes.
//
// # Views
//
// A view is a table (package table) whose manifest properties hold its
// Definition under "mvq.view" and, once refreshed, its Watermark under
// "mvq.watermark". CreateView checks the request, binds the query over an
// empty input of the source schema to learn the output schema (or checks
// the one given), and creates the table at version 1 with no rows.
//
//   - query: SELECT <expressions> FROM <source> [WHERE ...]. Each view row
//     is one source row, so the query may not aggregate, join, sort, limit,
//     window or unnest. Output: __source_row_id (the source row address,
//     fragment << 32 | offset; of an external table's rows read again
//     after deletes, the id they had before: rowids.go), then the
//     selected columns.
//   - chunker: the same query, then every row's input_column is cut by a
//     built-in chunker (package chunker) into 0..N rows: __source_row_id,
//     __chunk_index, the other selected columns, and the chunk.
//   - udtf: any SQL over the source (aggregates too), recomputed whole;
//     or user code (a runtime), with partition_by one work item per
//     partition_by value (kind_udtf_runtime.go).
//
// Each kind is a ViewKind registered in its own file (kind.go): the
// engine asks it whether it is row-wise and incremental, lets it validate
// the udtf_spec and derive the columns, and hands the source query's
// output to the Applier it makes for each work item.
//
// The source query names its table by identifier, FROM "ns$table"; the
// engine hands the rows to DuckDB under that name and nothing else, so
// the query can reach no other data.
//
// # A refresh
//
// A refresh is one of the engine's job types (Job, job.go; a column
// backfill is the other). Prepare fills and checks the options, once: the
// job stores them and the later steps trust them. Plan diffs the source
// against the watermark and cuts the rows to expand into work items of at
// most source_task_size rows, in row address order. Expand computes one
// item and stages its output as data files in the view folder, under
// names of the job, the item and the run, so a redelivered item writes
// beside an earlier run and never replaces its files. Commit assembles the new version and commits it
// with put-if-not-exists; it records the job id in the version's
// metadata, so a retried Commit finds its version and answers the same
// result. Discard removes a failed job's staged files, but those of the
// items the orchestrator keeps as checkpoints: CheckpointKey hashes what
// an item's output depends on, and a later job whose item has the same
// key takes that output over (Reuse: checked, then copied to its own
// staging names) instead of expanding it (checkpoint.go).
//
// # Incremental refresh
//
// Fragment ids only grow and data files never change: an append adds
// fragments, and a delete or update rewrites every fragment it touches
// into new ones (an update is a delete plus an insert). So the watermark
// only needs the set of source fragments the view was built from, and a
// refresh is a diff of two fragment sets:
//
//   - fragments added since are expanded (all their rows);
//   - the view rows derived from fragments gone since are removed. The
//     watermark's lineage says which source fragments each view fragment
//     draws from, so only view fragments that mix kept and removed rows
//     are rewritten; those holding only removed rows are dropped, the
//     others kept as they are;
//   - no fragment added or gone: no_op, and nothing is committed.
//
// An external table's data file read again after deletes is a new
// fragment diffed as the one it replaces (its origin, rowids.go): neither
// added nor gone, its view rows stay but those of the positions deleted
// since (Plan.RemovedSourceRows), which Commit filters out as above.
//
// Because new fragments have higher ids than every kept one, the rows they
// add sort after every kept view row, and appending their files keeps the
// view in (__source_row_id, __chunk_index) order. That order is what
// output_limit cuts: the view keeps its first N rows, so Commit rewrites
// the fragment that straddles row N and drops the rest, and an item whose
// ExistingRowsBefore already reaches N is skipped unread. The watermark
// remembers the limit and the first source fragment the cut reached
// (LimitCut). A refresh with another limit, or one that removes rows at or
// before the cut (rows cut away earlier would move up), recomputes the
// view from scratch: a full refresh. So does a first refresh, a udtf view,
// a source created again under the same name, or a restore that brings
// back fragments older than the kept ones.
//
// # Identity
//
// Every table and view has a UUID identity in its manifest, set at
// creation and kept by every later version (table.Table.Identity; tables
// from before identities were stored get one derived from their version
// 1). The plan records the view's and the source's; the watermark the
// source's. A different source identity makes the next refresh full. A
// view or source dropped and created again under the same name while a
// refresh runs is another table: its items and its commit fail with
// CodeTableNotFound, which the orchestrator does not retry, and nothing
// of the old job reaches the new table.
//
// State the engine cannot read (versions, manifests, the definition and
// watermark, view fragments) fails the step, retryably
// (CodeServiceUnavailable for what did not decode, uncoded I/O errors
// as they are); it never changes what a refresh computes.
//
// # Bounds
//
// One work item's output is bounded (EngineOptions, MVQ_MAX_ITEM_OUTPUT_ROWS
// and MVQ_MAX_ITEM_OUTPUT_BYTES): chunks are counted as they are cut,
// and a row is checked against a lower bound of its chunks before it is
// cut, so one huge row fails at once instead of filling the worker's
// memory. The SQL output of an item is held to the same bounds. Past
// them the item fails with CodeInvalidInput (a retry would do the same),
// saying which option to change.
//
// # Concurrency
//
// One refresh per view runs at a time (jobs holds a per-view lock); Commit
// still refuses, with CodeConcurrentModification, to commit over any
// version but the one its plan started from, except compactions
// (table.Compact), which it rebases on: a merged run of fragments the
// refresh keeps becomes the merged fragment, one it drops goes, and one
// it partly changes is undone, so the commit holds exactly what the
// refresh computed. Compaction rewrites the watermark's lineage with its
// merges (a merged fragment spans its parts' source fragments). Items of
// one job run in parallel anywhere; Expand splits its rows over
// intra_applier_concurrency goroutines and joins their output in order.
package refresh
