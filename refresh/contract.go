package refresh

// This file is the contract between the refresh engine (this package) and
// the job orchestrator (package jobs). The engine knows views, versions and
// work items; it never speaks of Redis, asynq or HTTP.

import (
	"encoding/json"

	"github.com/mvq-dev/mvq/table"
)

// Kind of a materialized view.
type Kind string

const (
	KindQuery   Kind = "query"   // 1:1 SQL projection/filter, incremental
	KindChunker Kind = "chunker" // 1:N text chunker, incremental
	KindUDTF    Kind = "udtf"    // N:M SQL over the whole source, full refresh
)

// Refresh modes reported in results.
const (
	ModeIncremental = "incremental"
	ModeFull        = "full"
	ModeNoOp        = "no_op"
)

// Options is a refresh request with defaults filled (the effective
// request a job shows).
type Options struct {
	SrcVersion              uint64 `json:"src_version,omitempty"` // 0: latest at plan time
	SourceTaskSize          int    `json:"source_task_size"`      // default 1024
	Concurrency             int    `json:"concurrency"`           // default 8
	IntraApplierConcurrency int    `json:"intra_applier_concurrency"`
	MaxRowsPerFragment      int    `json:"max_rows_per_fragment"` // default 131072
	OutputLimit             *int64 `json:"output_limit,omitempty"`
	Cluster                 string `json:"cluster"` // default "default"
	Manifest                string `json:"manifest,omitempty"`
	ManifestChecksum        string `json:"manifest_checksum,omitempty"` // ManifestChecksum of the manifest in force
	// ManifestNotHonoured lists the fields of the manifest in force this
	// deployment records but cannot act on (pip, images, ...).
	ManifestNotHonoured []string `json:"manifest_not_honoured,omitempty"`
	// UDTFSpecNotHonoured lists the fields of the view's udtf_spec this
	// deployment records but does not act on (UDTFEntry.NotHonoured).
	UDTFSpecNotHonoured []string `json:"udtf_spec_not_honoured,omitempty"`
	// Backfill makes the job a backfill of a virtual or computed column
	// (backfill.go) instead of a refresh.
	Backfill *BackfillOptions `json:"backfill,omitempty"`
	// SrcBranch is the branch of the source to refresh from ("": main);
	// SrcVersion is then a version of that branch (branch.go).
	SrcBranch string `json:"src_branch,omitempty"`
}

// Range is a run of source rows [Start, End) of one source fragment.
type Range struct {
	Fragment uint32 `json:"fragment"`
	Start    uint32 `json:"start"`
	End      uint32 `json:"end"`
}

// WorkItem is at most SourceTaskSize source rows, in source row address
// order; items are numbered from 0 in that order.
type WorkItem struct {
	Index  int     `json:"index"`
	Ranges []Range `json:"ranges"`
	Rows   int64   `json:"rows"`
	// ExistingRowsBefore counts the view rows kept from earlier refreshes
	// whose source row address is below this item's first row. With
	// output_limit, an item may be skipped when ExistingRowsBefore plus the
	// rows written by all earlier items already reach the limit.
	ExistingRowsBefore int64 `json:"existing_rows_before"`
}

// Plan is what a refresh job does; it is serialisable and handed between
// processes.
type Plan struct {
	JobID           string     `json:"job_id"`
	View            []string   `json:"view"`
	Kind            Kind       `json:"kind"`
	Mode            string     `json:"mode"`
	SourceVersion   uint64     `json:"source_version"`
	BaseViewVersion uint64     `json:"base_view_version"`
	Items           []WorkItem `json:"items"`
	// RemovedSourceFragments are source fragments gone since the last
	// refresh; the view rows derived from them are removed at commit.
	RemovedSourceFragments []uint32 `json:"removed_source_fragments,omitempty"`
	// RemovedSourceRows are rows of source fragments that stay (rowids.go:
	// a data file of an external table that deletes touched); the view
	// rows derived from them are removed at commit.
	RemovedSourceRows []RemovedRows `json:"removed_source_rows,omitempty"`
	Options           Options       `json:"options"`
	// Reason says why the mode is full (empty otherwise).
	Reason string `json:"reason,omitempty"`
	// ViewUUID and SourceUUID are the identities (table.Table.Identity)
	// of the view and of its source the plan was made against. A view or
	// source dropped and created again before the commit is another table:
	// items and the commit then fail instead of writing into it.
	ViewUUID   string `json:"view_uuid,omitempty"`
	SourceUUID string `json:"source_uuid,omitempty"`
	// SourceCreated is what plans made before identities were stored
	// record instead of SourceUUID (the source's version 1 timestamp).
	// Read only, through sourceIdentity.
	SourceCreated int64 `json:"source_created_millis,omitempty"`
	// SourceBranchID is the identity (table.BranchInfo.ID) of the source
	// branch Options.SrcBranch names, as planned ("" for main); for a
	// backfill, of the branch it fills (BackfillOptions.Branch).
	SourceBranchID string `json:"source_branch_id,omitempty"`
}

// ItemResult is what expanding one work item produced: staged fragments
// of the view table (IDs unassigned), written under names of the run that
// wrote them, which no other run replaces (fragio.go).
type ItemResult struct {
	Index       int              `json:"index"`
	Fragments   []table.Fragment `json:"fragments"`
	RowsRead    int64            `json:"rows_read"`
	RowsWritten int64            `json:"rows_written"`
	Skipped     bool             `json:"skipped,omitempty"` // output_limit made it useless
	// Spans gives, for each of Fragments, the source fragments its rows
	// come from (row-wise kinds); Commit keeps it as the view's lineage.
	Spans []Span `json:"spans,omitempty"`
	// LimitCut is the source row address of the first output row the item
	// left out because output_limit could not keep it (nil: none left out).
	LimitCut *uint64 `json:"limit_cut,omitempty"`
	// SkippedPartitions counts partitions of user code left out under
	// error_handling skip.
	SkippedPartitions int64 `json:"skipped_partitions,omitempty"`
}

// Result is the outcome of a committed (or no-op) refresh.
type Result struct {
	Mode          string `json:"mode"`
	SourceVersion uint64 `json:"source_version"`
	ViewVersion   uint64 `json:"view_version"`
	RowsAdded     int64  `json:"rows_added"`
	RowsRemoved   int64  `json:"rows_removed"`
	// RowsUpdated counts the rows a backfill filled.
	RowsUpdated int64 `json:"rows_updated,omitempty"`
	// SkippedPartitions counts the input partitions user code failed on
	// and error_handling skip left out.
	SkippedPartitions int64 `json:"skipped_partitions,omitempty"`
	// SourceFilesRecomputed counts the data files of an external source
	// (an Iceberg table) read again since the last refresh because delete
	// files came to touch them; their rows were removed and expanded again.
	SourceFilesRecomputed int64 `json:"source_files_recomputed,omitempty"`
	// ManifestChecksum is the checksum of the manifest the refresh ran
	// with ("" when none); also in the version's metadata.
	ManifestChecksum string `json:"manifest_checksum,omitempty"`
}

// Definition is a view's definition, kept in its manifest properties.
type Definition struct {
	Kind        Kind     `json:"kind"`
	SourceQuery string   `json:"source_query"`
	Source      []string `json:"source"` // source table identifier
	// SourceUUID is the source's identity when the view was created: the
	// view follows that table when it is renamed (table.Catalog.Resolve).
	SourceUUID   string          `json:"source_uuid,omitempty"`
	OutputSchema string          `json:"output_schema"` // base64 Arrow IPC
	UDTFSpec     json.RawMessage `json:"udtf_spec,omitempty"`
	Manifest     string          `json:"manifest,omitempty"`
	AutoRefresh  bool            `json:"auto_refresh,omitempty"`
}
