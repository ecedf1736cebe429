// Package dataset reads and writes the table level of the Lance format: the
// versioned manifests of a dataset folder, their transactions, deletion
// files and feature flags, as LanceDB 0.31 (Lance 8.0.0) writes them.
//
// A dataset folder (`name.lance/`) holds:
//
//	_versions/{v}.manifest or {u64max-v:020}.manifest   one manifest per version (V1 or V2 names)
//	_versions/latest_version_hint.json                  {"version":N}, a hint only
//	_transactions/{read_version}-{uuid}.txn             the transaction that made a version
//	_deletions/{fragment}-{read_version}-{id}.arrow|bin deleted row offsets of a fragment
//	data/*.lance                                        data files (package lance/file)
//
// A manifest file is `[u32 len][Transaction]` (optional, inline),
// `[u32 len][IndexSection]` (optional), `[u32 len][Manifest]`, then a
// 16-byte footer: u64 manifest position, u16 major, u16 minor, "LANC".
//
// Open and OpenVersion read a version (refusing reader feature flags this
// package does not know, with an error naming them); Commit writes the next
// one from a transaction (Append, Overwrite, Delete, Update, Merge,
// Project): transaction file first, then the manifest, created only if no
// other writer took that version (a temporary file hard-linked into place),
// then the hint. A LanceDB writer that read an older version rebases on the
// result through the transaction file, and Commit rebuilds its own change on
// a newer version when the transactions in between touched other fragments.
// Dataset.DeleteRows is the delete mvq performs: deletion files merged with
// the old ones, emptied fragments removed.
//
// Every decoder here takes bytes mvq did not write: corrupt or hostile
// input gives an error wrapping ErrCorrupt, never a panic, and allocation
// is bounded by the input's size.
package dataset
