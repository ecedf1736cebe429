package table

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
	lschema "github.com/mvq-dev/mvq/lance/schema"
	"github.com/mvq-dev/mvq/table/internal/datafile"
)

// Fragments of several data files. A Lance fragment may keep its columns
// in more than one data file: LanceDB's add_columns writes the new
// columns of every fragment as a new file beside the old ones (a Merge),
// alter_columns with a new type writes the cast column as a new file and
// leaves the old column unread, and a column the schema gained without
// data (add_columns of a field) is in no file and reads as nulls. Such a
// fragment keeps Path (its first file) and says the rest in two strings,
// so Fragment stays comparable:
//
//   - Extra lists the other data files (JSON: path, bytes, file version);
//   - Parts says, for each of the fragment's virtual columns, the file
//     (0: Path, k: Extra[k-1]) and the file column its first leaf is at,
//     as "file:column", or "-" for a column no file holds.
//
// Columns then maps the version's fields to those virtual columns and
// leaves gives their leaf counts, exactly as for a fragment whose one
// file holds columns a dropped field left behind (schema_evolve.go), so
// drop_columns, renames and type widening work on them unchanged. The
// layout is derived from the manifest's data files every time a version
// is read; mvq's own facts never record it.

// extraFile is one data file of a fragment beside its first.
type extraFile struct {
	Path        string `json:"path"` // relative to the table folder: data/….lance
	Bytes       int64  `json:"bytes"`
	FileVersion string `json:"file_version,omitempty"`
}

// part is where one virtual column of a fragment is: file (0: the first,
// -1: none) and the file column of its first leaf.
type part struct {
	file  int
	start int32
}

// extraFiles decodes f.Extra.
func (f Fragment) extraFiles() ([]extraFile, error) {
	if f.Extra == "" {
		return nil, nil
	}
	var out []extraFile
	if err := json.Unmarshal([]byte(f.Extra), &out); err != nil {
		return nil, fmt.Errorf("fragment %d: extra files: %w", f.ID, err)
	}
	for _, e := range out {
		if !dataPathOK(e.Path) || !strings.HasSuffix(e.Path, datafile.LanceExt) {
			return nil, fmt.Errorf("fragment %d: extra file %q is not a Lance data file", f.ID, e.Path)
		}
	}
	return out, nil
}

// DataPaths answers every data file of the fragment, relative to the
// table folder: Path, then any others (a LanceDB Merge's).
func (f Fragment) DataPaths() []string {
	out := []string{f.Path}
	ex, _ := f.extraFiles()
	for _, e := range ex {
		out = append(out, e.Path)
	}
	return out
}

// DataBytes is the size of every data file of the fragment: Bytes, and
// those of its other files.
func (f Fragment) DataBytes() int64 {
	n := f.Bytes
	ex, _ := f.extraFiles()
	for _, e := range ex {
		n += e.Bytes
	}
	return n
}

// parts decodes f.Parts (nil: the fragment's columns are its first file's).
func (f Fragment) parts() ([]part, error) {
	if f.Parts == "" {
		return nil, nil
	}
	files := 1
	if f.Extra != "" {
		ex, err := f.extraFiles()
		if err != nil {
			return nil, err
		}
		files += len(ex)
	}
	var out []part
	for _, s := range strings.Split(f.Parts, ",") {
		if s == "-" {
			out = append(out, part{file: -1})
			continue
		}
		a, b, ok := strings.Cut(s, ":")
		k, err1 := strconv.Atoi(a)
		c, err2 := strconv.ParseInt(b, 10, 32)
		if !ok || err1 != nil || err2 != nil || k < 0 || k >= files || c < 0 {
			return nil, fmt.Errorf("fragment %d: bad part %q", f.ID, s)
		}
		out = append(out, part{file: k, start: int32(c)})
	}
	return out, nil
}

// lanceLayout reads the layout of a fragment another Lance writer made
// whose data files are not the one-file layout (identityColumns): which
// file holds each top-level field of the schema, and where. Every leaf of
// a field must be in one file, at consecutive columns; field ids a file
// holds that the schema lacks (a dropped or retyped column) are left
// unread.
func lanceLayout(f *Fragment, fr *tablepb.DataFragment, fields []*filepb.Field) error {
	if len(fr.GetFiles()) == 0 || !strings.HasSuffix(fr.GetFiles()[0].GetPath(), datafile.LanceExt) {
		return fmt.Errorf("its columns are not its data file's in order, which only a Lance data file may have")
	}
	type at struct {
		file int
		col  int32
	}
	where := map[int32]at{}
	for k, df := range fr.GetFiles() {
		ci := df.GetColumnIndices()
		if len(ci) > 0 && len(ci) != len(df.GetFields()) {
			return fmt.Errorf("data file %s has %d fields and %d column indices", df.GetPath(), len(df.GetFields()), len(ci))
		}
		for p, id := range df.GetFields() {
			col := int32(p)
			if len(ci) > 0 {
				col = ci[p]
			}
			if id < 0 || col < 0 {
				continue // a tombstone, or a field without a column of its own
			}
			if _, dup := where[id]; dup {
				return fmt.Errorf("field id %d is in two data files", id)
			}
			where[id] = at{k, col}
		}
	}
	var parts []string
	var counts []int
	for _, sub := range subtrees(fields) {
		leaves := lschema.Leaves(sub)
		counts = append(counts, len(leaves))
		var first at
		found := 0
		for j, l := range leaves {
			w, ok := where[l.GetId()]
			if !ok {
				continue
			}
			if found == 0 {
				first = at{w.file, w.col - int32(j)}
			}
			found++
			if w.file != first.file || w.col != first.col+int32(j) {
				return fmt.Errorf("the leaves of field %q are not at consecutive columns of one data file; that layout is not supported", sub[0].GetName())
			}
		}
		switch {
		case len(leaves) > 0 && found == 0:
			parts = append(parts, "-")
		case found != len(leaves) || first.col < 0:
			return fmt.Errorf("only %d of the %d leaves of field %q are in a data file; that layout is not supported", found, len(leaves), sub[0].GetName())
		default:
			parts = append(parts, strconv.Itoa(first.file)+":"+strconv.Itoa(int(first.col)))
		}
	}
	var extra []extraFile
	for _, df := range fr.GetFiles()[1:] {
		if df.GetBaseId() != 0 {
			return fmt.Errorf("data file %s lives under another base path, which is not supported", df.GetPath())
		}
		if !strings.HasSuffix(df.GetPath(), datafile.LanceExt) || !dataPathOK("data/"+df.GetPath()) {
			return fmt.Errorf("data file %q is not a Lance data file of the table", df.GetPath())
		}
		extra = append(extra, extraFile{Path: "data/" + df.GetPath(), Bytes: int64(df.GetFileSizeBytes()), FileVersion: fileVersion(df)})
	}
	if len(extra) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			return err
		}
		f.Extra = string(b)
	}
	ids := make([]int, len(counts))
	for i := range ids {
		ids[i] = i
	}
	f.Parts = strings.Join(parts, ",")
	f.Columns, f.leaves = NewColumnMap(ids), formatCounts(counts)
	return nil
}

// lanceFiles renders the data files of a fragment with a layout (Parts):
// each field's leaves, leafIDs[i] for field i, at the columns of the file
// its part names.
func lanceFiles(f Fragment, first *tablepb.DataFile, leafIDs [][]int32) ([]*tablepb.DataFile, error) {
	ps, err := f.parts()
	if err != nil {
		return nil, err
	}
	ex, err := f.extraFiles()
	if err != nil {
		return nil, err
	}
	cols, err := f.Columns.Indices()
	if err != nil {
		return nil, err
	}
	fl, err := parseCounts(f.leaves)
	if err != nil {
		return nil, err
	}
	if len(fl) != len(ps) || len(cols) != len(leafIDs) {
		return nil, fmt.Errorf("fragment %d: %d parts, %d leaf counts, a column map of %d for %d fields", f.ID, len(ps), len(fl), len(cols), len(leafIDs))
	}
	files := []*tablepb.DataFile{first}
	for _, e := range ex {
		files = append(files, dataFile(e.Path, e.Bytes, e.FileVersion))
	}
	for i, ids := range leafIDs {
		c := cols[i]
		if c < 0 || c >= len(ps) || fl[c] != len(ids) {
			return nil, fmt.Errorf("fragment %d: field %d maps to column %d of a different shape", f.ID, i, c)
		}
		p := ps[c]
		if p.file < 0 {
			continue // in no file: reads as nulls
		}
		df := files[p.file]
		for j, id := range ids {
			df.Fields = append(df.Fields, id)
			df.ColumnIndices = append(df.ColumnIndices, p.start+int32(j))
		}
	}
	return files, nil
}

// FieldFile answers where field i of the version's schema is in fragment
// f: the data file (relative to the table folder) and the file column of
// its first leaf (a top-level column index for a fragment of one file in
// the schema's order). ok is false for a field no file holds.
func (f Fragment) FieldFile(i int) (path string, col int32, ok bool, err error) {
	cols, err := f.Columns.Indices()
	if err != nil {
		return "", 0, false, err
	}
	c := i
	if cols != nil {
		if i < 0 || i >= len(cols) {
			return "", 0, false, fmt.Errorf("fragment %d: field %d not in its column map", f.ID, i)
		}
		c = cols[i]
	}
	ps, err := f.parts()
	if err != nil {
		return "", 0, false, err
	}
	if ps == nil {
		return f.Path, int32(c), true, nil
	}
	if c < 0 || c >= len(ps) {
		return "", 0, false, fmt.Errorf("fragment %d: column %d of %d parts", f.ID, c, len(ps))
	}
	switch p := ps[c]; {
	case p.file < 0:
		return "", 0, false, nil
	case p.file == 0:
		return f.Path, p.start, true, nil
	default:
		ex, err := f.extraFiles()
		if err != nil {
			return "", 0, false, err
		}
		return ex[p.file-1].Path, p.start, true, nil
	}
}
