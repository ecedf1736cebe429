package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	icetable "github.com/apache/iceberg-go/table"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
)

// State is what an external table's manifest keeps under
// table.ExternalProperty: which Iceberg table and snapshot it mirrors, the
// newest notification admitted (the per-table ordering of notifications:
// it is committed with the version, put-if-not-exists, so it is atomic
// and survives restarts), and which data file each fragment holds.
type State struct {
	Format           string `json:"format"` // "iceberg"
	TableUUID        string `json:"table_uuid"`
	MetadataLocation string `json:"metadata_location"`
	SnapshotID       *int64 `json:"snapshot_id,omitempty"`
	// Timestamp is the newest notification timestamp processed.
	Timestamp int64 `json:"notification_timestamp"`
	// Files are the data files of SnapshotID, in scan order.
	Files []FileRef `json:"files"`
}

// FileRef is one Iceberg data file and the fragment holding its rows with
// the snapshot's delete files applied, in the data file's row order. A
// file whose deletes change is read again into a new fragment, but its
// rows keep their ids: Origin is the fragment the file was first read
// into and Deleted the positions its delete files remove, so the row at
// position p has the id Origin << 32 | p however many deletes came since
// (table.RowIDsProperty, which views read for __source_row_id).
type FileRef struct {
	Path string `json:"path"`
	// Deletes are the delete files (position, equality, deletion vectors)
	// applied, sorted.
	Deletes []string `json:"deletes,omitempty"`
	// Fragment holds the rows; nil when every row is deleted.
	Fragment *uint32 `json:"fragment,omitempty"`
	Rows     int64   `json:"rows"`
	// Origin is the id the file's rows are numbered under; nil in states
	// written before row ids were kept (then a file read again is a new
	// origin).
	Origin *uint32 `json:"origin,omitempty"`
	// Deleted are the positions of the data file not in Fragment, as
	// sorted [lo, hi) pairs.
	Deleted []uint32 `json:"deleted,omitempty"`
}

func (f FileRef) key() string { return f.Path + "\x00" + strings.Join(f.Deletes, "\x00") }

// Version metadata keys of a version a notification committed.
const (
	MetaSnapshotID       = "iceberg.snapshot_id"
	MetaMetadataLocation = "iceberg.metadata_location"
	MetaTimestamp        = "iceberg.notification_timestamp"
	MetaAddedFiles       = "iceberg.added_data_files"
	MetaRemovedFiles     = "iceberg.removed_data_files"
	MetaRecomputedFiles  = table.MetaExternalRecomputed
)

// stateOf decodes the external state of m; ok is false for a table that
// is not external.
func stateOf(m *table.Manifest) (State, bool, error) {
	raw, ok := m.Properties[table.ExternalProperty]
	if !ok {
		return State{}, false, nil
	}
	var s State
	if err := json.Unmarshal(raw, &s); err != nil {
		return State{}, true, &errs.Error{Code: errs.CodeInvalidTableState, Message: "external table state is corrupt", Err: err}
	}
	return s, true, nil
}

// snapshot is an Iceberg table's current snapshot as read through the
// guarded file system: its schema (as mvq stores it) and its data files
// grouped with the scan tasks that read them.
type snapshot struct {
	tbl    *icetable.Table
	scan   *icetable.Scan
	schema *arrow.Schema
	id     *int64
	files  []plannedFile
}

type plannedFile struct {
	ref   FileRef
	tasks []icetable.FileScanTask
}

// load reads the Iceberg table whose metadata is at loc (or, when meta is
// given, the metadata in it) and plans its current snapshot.
func (r *Registrar) load(ctx context.Context, id []string, loc string, meta json.RawMessage) (*snapshot, error) {
	fsF := func(ctx context.Context) (iceioIO, error) { return r.fs(ctx, id[:len(id)-1], loc) }
	var (
		tbl *icetable.Table
		err error
	)
	if len(meta) > 0 && string(meta) != "null" {
		md, perr := icetable.ParseMetadataBytes(meta)
		if perr != nil {
			return nil, errs.Errorf(errs.CodeInvalidInput, "payload.metadata: %v", perr)
		}
		tbl = icetable.New(id, md, loc, fsF, nil)
	} else {
		tbl, err = icetable.NewFromLocation(ctx, id, loc, fsF, nil)
		if err != nil {
			return nil, readErr("payload.metadata-location", loc, err)
		}
	}
	sc := tbl.Schema()
	if sc == nil {
		return nil, errs.Errorf(errs.CodeInvalidInput, "metadata at %s has no current schema", loc)
	}
	as, err := icetable.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "schema of %s: %v", loc, err)
	}
	if err := table.CheckSchema(as); err != nil {
		return nil, errs.Errorf(errs.CodeSchemaValidation, "schema of the Iceberg table at %s: %v", loc, err)
	}
	s := &snapshot{tbl: tbl, schema: as}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return s, nil
	}
	sid := cur.SnapshotID
	s.id = &sid
	s.scan = tbl.Scan()
	tasks, err := s.scan.PlanFiles(ctx)
	if err != nil {
		return nil, readErr("snapshot "+strconv.FormatInt(sid, 10), loc, err)
	}
	byPath := map[string]int{}
	for _, t := range tasks {
		p := t.File.FilePath()
		i, ok := byPath[p]
		if !ok {
			i = len(s.files)
			byPath[p] = i
			s.files = append(s.files, plannedFile{ref: FileRef{Path: p}})
		}
		pf := &s.files[i]
		pf.tasks = append(pf.tasks, t)
		for _, group := range [][]ice.DataFile{t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles} {
			for _, d := range group {
				if !slices.Contains(pf.ref.Deletes, d.FilePath()) {
					pf.ref.Deletes = append(pf.ref.Deletes, d.FilePath())
				}
			}
		}
	}
	for i := range s.files {
		slices.Sort(s.files[i].ref.Deletes)
		slices.SortFunc(s.files[i].tasks, func(a, b icetable.FileScanTask) int { return int(a.Start - b.Start) })
	}
	return s, nil
}

// readErr turns a failure to read Iceberg metadata or files into a coded
// error: a location outside the allowed ones is CodePermissionDenied, a
// missing file or unparsable metadata CodeInvalidInput naming field. The
// reader's own error goes to the server log only: a parser's message may
// quote the bytes it read.
func readErr(field, loc string, err error) error {
	var te *errs.Error
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, fs.ErrNotExist) {
		return errs.Errorf(errs.CodeInvalidInput, "%s: %s does not exist", field, loc)
	}
	slog.Warn("iceberg: cannot read an external table", "field", field, "location", loc, "err", err)
	return errs.Errorf(errs.CodeInvalidInput, "%s: cannot read the Iceberg table at %s: not valid Iceberg metadata, manifests or data files (the server log has the reader's error)", field, loc)
}

// written is a data file materialized for a commit: its fragment (nil
// when no row is left) and, when known, the positions its deletes
// removed (positioned false: they could not be told, and the file's rows
// are numbered afresh).
type written struct {
	frag       *table.Fragment
	deleted    []uint32
	positioned bool
}

// materialize writes the rows of one data file, its deletes applied, as a
// data file of t, and finds the positions the deletes removed.
func (s *snapshot) materialize(ctx context.Context, t *table.Table, pf plannedFile) (*written, error) {
	recs, err := s.read(ctx, pf.ref.Path, pf.tasks)
	defer release(recs)
	if err != nil {
		return nil, err
	}
	w := &written{positioned: true}
	if len(pf.ref.Deletes) > 0 {
		all, err := s.read(ctx, pf.ref.Path, withoutDeletes(pf.tasks))
		defer release(all)
		if err != nil {
			return nil, err
		}
		w.deleted, w.positioned = deletedPositions(all, recs)
	}
	if len(recs) == 0 {
		return w, nil
	}
	f, err := t.WriteFile(ctx, s.schema, recs)
	if err != nil {
		return nil, err
	}
	w.frag = &f
	return w, nil
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// withoutDeletes are tasks reading the same rows with no delete applied.
func withoutDeletes(tasks []icetable.FileScanTask) []icetable.FileScanTask {
	out := slices.Clone(tasks)
	for i := range out {
		out[i].DeleteFiles, out[i].EqualityDeleteFiles, out[i].DeletionVectorFiles = nil, nil, nil
	}
	return out
}

// read reads tasks of the data file at path as records of the
// snapshot's schema, skipping empty ones.
func (s *snapshot) read(ctx context.Context, path string, tasks []icetable.FileScanTask) ([]arrow.RecordBatch, error) {
	_, seq, err := s.scan.ReadTasks(ctx, tasks)
	if err != nil {
		return nil, readErr("data file", path, err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range seq {
		if err != nil {
			return recs, readErr("data file", path, err)
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		if !rec.Schema().Equal(s.schema) {
			// Same columns and types; the scan's schema carries field ids
			// and other metadata the table's does not.
			if len(rec.Columns()) != s.schema.NumFields() {
				rec.Release()
				return recs, errs.Errorf(errs.CodeSchemaValidation, "data file %s: read %d columns, the schema has %d", path, len(rec.Columns()), s.schema.NumFields())
			}
			for i, f := range s.schema.Fields() {
				if !arrow.TypeEqual(f.Type, rec.Column(i).DataType()) {
					rec.Release()
					return recs, errs.Errorf(errs.CodeSchemaValidation, "data file %s: column %s reads as %s, the schema says %s", path, f.Name, rec.Column(i).DataType(), f.Type)
				}
			}
			nr := array.NewRecordBatch(s.schema, rec.Columns(), rec.NumRows())
			rec.Release()
			rec = nr
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// mirrorOp is the commit of one admitted CREATE/UPDATE: the fragments of
// the snapshot's files, kept where base holds the same file with the
// same deletes, else from written (files materialized for this commit,
// by key). It fails with errStale when base needs a file written holds
// not (a concurrent commit changed the table under the plan).
func mirrorOp(p Payload, uuid string, snap *snapshot, written map[string]*written, enc string) (table.Op, *opStats) {
	st := &opStats{}
	return func(base *table.Manifest) (*table.Manifest, error) {
		*st = opStats{}
		old, _, err := stateOf(base)
		if err != nil {
			return nil, err
		}
		if err := admit(base, old, p, uuid); err != nil {
			return nil, err
		}
		keep := map[string]FileRef{}
		if base.Schema == enc {
			for _, f := range old.Files {
				keep[f.key()] = f
			}
		}
		oldPaths := map[string]bool{}
		oldRefs := map[string]FileRef{}
		for _, f := range old.Files {
			oldPaths[f.Path] = true
			if base.Schema == enc {
				oldRefs[f.Path] = f
			}
		}
		byID := map[uint32]table.Fragment{}
		for _, f := range base.Fragments {
			byID[f.ID] = f
		}
		next := State{Format: "iceberg", TableUUID: uuid, MetadataLocation: p.MetadataLocation, SnapshotID: snap.id, Timestamp: *p.Timestamp}
		var frags []table.Fragment
		newPaths := map[string]bool{}
		for _, pf := range snap.files {
			ref := pf.ref
			newPaths[ref.Path] = true
			if k, ok := keep[ref.key()]; ok {
				if k.Fragment != nil {
					f, ok := byID[*k.Fragment]
					if !ok {
						return nil, errStale
					}
					frags = append(frags, f)
				}
				next.Files = append(next.Files, k)
				continue
			}
			w, ok := written[ref.key()]
			if !ok {
				return nil, errStale
			}
			if oldPaths[ref.Path] {
				st.recomputed++
			} else {
				st.added++
			}
			if w.frag != nil {
				f := *w.frag
				f.ID = base.NextFragmentID
				base.NextFragmentID++
				id := f.ID
				ref.Fragment = &id
				ref.Rows = f.Rows
				frags = append(frags, f)
				// The file's rows keep the ids they had when its
				// positions are known now and were before.
				origin := id
				if o, ok := oldRefs[ref.Path]; ok && o.Origin != nil && w.positioned {
					origin = *o.Origin
				}
				ref.Origin = &origin
				if w.positioned {
					ref.Deleted = w.deleted
				}
			}
			next.Files = append(next.Files, ref)
		}
		for p := range oldPaths {
			if !newPaths[p] {
				st.removed++
			}
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		base.Operation = table.OperationNotification
		base.Schema = enc
		base.Fragments = frags
		if base.Properties == nil {
			base.Properties = map[string]json.RawMessage{}
		}
		base.Properties[table.ExternalProperty] = raw
		if ids := rowIDs(next.Files); len(ids.Fragments) > 0 {
			raw, err := json.Marshal(ids)
			if err != nil {
				return nil, err
			}
			base.Properties[table.RowIDsProperty] = raw
		} else {
			delete(base.Properties, table.RowIDsProperty)
		}
		base.Metadata = st.metadata(p, snap)
		return base, nil
	}, st
}

// rowIDs lists the files whose fragment's rows are not numbered by their
// offset in it: read again after deletes, or read first with deletes.
func rowIDs(files []FileRef) table.RowIDs {
	out := table.RowIDs{Fragments: []table.FragmentRowIDs{}}
	for _, f := range files {
		if f.Fragment == nil || f.Origin == nil || (*f.Origin == *f.Fragment && len(f.Deleted) == 0) {
			continue
		}
		out.Fragments = append(out.Fragments, table.FragmentRowIDs{Fragment: *f.Fragment, Origin: *f.Origin, Deleted: f.Deleted})
	}
	return out
}

type opStats struct{ added, removed, recomputed int }

func (st *opStats) metadata(p Payload, snap *snapshot) map[string]string {
	m := map[string]string{
		MetaMetadataLocation: p.MetadataLocation,
		MetaTimestamp:        strconv.FormatInt(*p.Timestamp, 10),
		MetaAddedFiles:       strconv.Itoa(st.added),
		MetaRemovedFiles:     strconv.Itoa(st.removed),
		MetaRecomputedFiles:  strconv.Itoa(st.recomputed),
	}
	if snap.id != nil {
		m[MetaSnapshotID] = strconv.FormatInt(*snap.id, 10)
	}
	return m
}

var errStale = errors.New("external table changed while the notification was read; planning again")

// admit checks a notification against the state of the registered table:
// the same Iceberg table (uuid) and a timestamp newer than every one
// processed.
func admit(base *table.Manifest, old State, p Payload, uuid string) error {
	if old.TableUUID != "" && old.TableUUID != uuid {
		return errs.Errorf(errs.CodeConcurrentModification, "table-uuid %s differs from %s, the uuid of the registered table", uuid, old.TableUUID)
	}
	if *p.Timestamp <= old.Timestamp {
		return errs.Errorf(errs.CodeTableAlreadyExists, "a notification with a newer timestamp has been admitted for table %s: timestamp %d is not after %d", p.TableName, *p.Timestamp, old.Timestamp)
	}
	return nil
}
