package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table/internal/datafile"
)

// Upgrading a warehouse of the Parquet + JSON layout to the Lance format
// (mvq warehouse upgrade), table by table, every line (main and each
// branch) of each:
//
//  1. every Parquet data file any version references is written again as
//     a Lance file of the same name with .lance (a rerun finds it and
//     skips it); the Parquet file stays;
//  2. every version's manifest is replaced, in place and atomically, by
//     its Lance form naming the Lance files (a version reads the same rows
//     before and after: both formats are read);
//  3. tags and branch records get the new manifest sizes;
//  4. the Parquet files converted are removed, once no manifest of any
//     line names them (checked on a fresh read of every manifest).
//
// At every instant every version reads correctly, and a run stopped at
// any point is finished by the next one; a converted table costs one
// listing of each line and of data/ and a read of each manifest. Version
// numbers, manifest names, timestamps, operations, properties (view
// definitions), identities, tags and branches are kept.
//
// Not converted: external tables (their files are outside the table; see
// external.go) and tables a schema of which the Lance writer cannot hold
// (they stay Parquet + JSON, which is read as before); both are reported.
// While a batch transaction or a table move is pending (markers under a
// _versions/ folder, txn.go and seal.go) nothing is done: the services
// settle them on start.

// WarehouseMarker is the object at the warehouse root that says its
// tables are in the Lance format: written by Upgrade and by the services'
// start on an empty warehouse (CheckWarehouseFormat).
const WarehouseMarker = "_mvq_warehouse.json"

// UpgradeCommand is the command that converts a warehouse.
const UpgradeCommand = "mvq warehouse upgrade"

// UpgradeOptions tune Upgrade.
type UpgradeOptions struct {
	// DryRun reports what would change and changes nothing.
	DryRun bool
	// Progress, when set, is told of each step.
	Progress func(UpgradeEvent)
	// step, when set (tests), runs before each change; an error stops the
	// upgrade there, as a kill would.
	step func() error
}

// UpgradeEvent is one step of Upgrade: Kind is "table" (a table begins),
// "file" (a data file converted), "version" (a manifest rewritten), "ref"
// (a tag or branch record updated), "removed" (a Parquet file removed) or
// "skipped" (a table left as it is: Detail says why).
type UpgradeEvent struct {
	Kind    string
	Table   string
	Branch  string
	Path    string
	Version uint64
	Detail  string
}

// UpgradeReport sums up an Upgrade (in a dry run: what it would do).
type UpgradeReport struct {
	Tables       int      // tables seen
	Converted    int      // tables changed by this run
	AlreadyLance int      // tables found converted
	Files        int      // data files converted
	Versions     int      // manifests rewritten
	Refs         int      // tag and branch records updated
	IndexFiles   int      // mvq index files moved out of Lance's _indices/
	Removed      int      // Parquet files removed
	External     []string // external tables, left as they are
	KeptParquet  []string // "table: reason" for tables left Parquet + JSON
	Marker       bool     // the warehouse marker was written (or is due, in a dry run)
}

// Upgrade converts every table of the catalog's warehouse to the Lance
// format (see above) and then writes the warehouse marker. It refuses,
// changing nothing, while a batch transaction or table move is pending.
func Upgrade(ctx context.Context, c *Catalog, o UpgradeOptions) (UpgradeReport, error) {
	var rep UpgradeReport
	ids, err := c.allTables(ctx, nil, 0)
	if err != nil {
		return rep, err
	}
	u := &upgrader{c: c, o: o, rep: &rep}
	var pending []string
	for _, id := range ids {
		p, err := u.pendingMarkers(ctx, id)
		if err != nil {
			return rep, err
		}
		pending = append(pending, p...)
	}
	if len(pending) > 0 {
		if len(pending) > 5 {
			pending = append(pending[:5], fmt.Sprintf("and %d more", len(pending)-5))
		}
		return rep, errs.Errorf(errs.CodeInvalidTableState, "the warehouse has pending batch transactions or table moves (%s): start the services once so they settle them (or abort the transactions), stop them, then run %s again", strings.Join(pending, ", "), UpgradeCommand)
	}
	for _, id := range ids {
		rep.Tables++
		if err := u.table(ctx, id); err != nil {
			return rep, fmt.Errorf("upgrade %s: %w", JoinID(id), err)
		}
	}
	rep.Marker = true
	if o.DryRun {
		return rep, nil
	}
	if ok, err := WarehouseUpgraded(ctx, c); err != nil || ok {
		return rep, err
	}
	if err := u.step(); err != nil {
		return rep, err
	}
	return rep, writeMarker(ctx, c)
}

// allTables lists every table under namespace ns (nil: the root), depth
// first; limit > 0 stops after that many.
func (c *Catalog) allTables(ctx context.Context, ns []string, limit int) ([][]string, error) {
	namespaces, tables, err := c.children(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, name := range tables {
		out = append(out, append(append([]string{}, ns...), name))
		if limit > 0 && len(out) >= limit {
			return out, nil
		}
	}
	for _, name := range namespaces {
		sub, err := c.allTables(ctx, append(append([]string{}, ns...), name), limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
		if limit > 0 && len(out) >= limit {
			return out, nil
		}
	}
	return out, nil
}

type upgrader struct {
	c   *Catalog
	o   UpgradeOptions
	rep *UpgradeReport
}

func (u *upgrader) step() error {
	if u.o.step != nil {
		return u.o.step()
	}
	return nil
}

func (u *upgrader) event(e UpgradeEvent) {
	if u.o.Progress != nil {
		u.o.Progress(e)
	}
}

// lines answers handles on every line of the table: main, then every
// folder under tree/ (with or without a record, as cleanup counts them).
func (u *upgrader) lines(ctx context.Context, t *Table) ([]*Table, error) {
	lines := []*Table{t.Main()}
	entries, err := u.c.wh.List(ctx, t.key+branchTreeDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir {
			b := *t
			b.branch = e.Name
			lines = append(lines, &b)
		}
	}
	return lines, nil
}

// pendingMarkers names the transaction and move markers of the table.
func (u *upgrader) pendingMarkers(ctx context.Context, id []string) ([]string, error) {
	lines, err := u.lines(ctx, u.c.handle(id))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range lines {
		entries, err := u.c.wh.List(ctx, l.versionsKey())
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if _, ok := parseTxnMarker(e.Name); ok {
				out = append(out, JoinID(id)+": "+l.ManifestPath(VersionFile{Name: e.Name}))
			} else if _, ok := parseSealMarker(e.Name); ok {
				out = append(out, JoinID(id)+": "+l.ManifestPath(VersionFile{Name: e.Name}))
			}
		}
	}
	return out, nil
}

// manifestFile is one manifest file of a line as it is stored.
type manifestFile struct {
	line *Table
	name string
	raw  []byte
	m    *Manifest
}

func (mf *manifestFile) key() string { return mf.line.versionsKey() + mf.name }

// needsUpgrade reports whether the file is JSON or names a Parquet file.
func (mf *manifestFile) needsUpgrade() bool {
	if !isLanceManifest(mf.raw) {
		return true
	}
	for _, f := range mf.m.Fragments {
		if isParquet(f.Path) {
			return true
		}
	}
	return false
}

func isParquet(p string) bool { return strings.HasSuffix(p, ".parquet") }

// lanceName is the name of the Lance file converted from Parquet file p.
func lanceName(p string) string { return strings.TrimSuffix(p, ".parquet") + datafile.LanceExt }

// manifests reads every manifest file (every name ParseManifestName
// takes, shadowed V1 names too) of every line.
func (u *upgrader) manifests(ctx context.Context, lines []*Table) ([]*manifestFile, error) {
	var out []*manifestFile
	for _, l := range lines {
		entries, err := u.c.wh.List(ctx, l.versionsKey())
		if err != nil {
			return nil, err
		}
		// Oldest first (V2 names list the newest first).
		sort.SliceStable(entries, func(i, j int) bool {
			vi, _, _ := ParseManifestName(entries[i].Name)
			vj, _, _ := ParseManifestName(entries[j].Name)
			return vi < vj
		})
		for _, e := range entries {
			v, _, ok := ParseManifestName(e.Name)
			if e.IsDir || !ok {
				continue
			}
			raw, err := u.c.wh.Read(ctx, l.versionsKey()+e.Name)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			m, err := DecodeManifest(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.ManifestPath(VersionFile{Name: e.Name}), err)
			}
			m.Version = v
			out = append(out, &manifestFile{line: l, name: e.Name, raw: raw, m: m})
		}
	}
	return out, nil
}

// converted is what a Parquet file became.
type converted struct {
	path   string // the Lance file, under the table folder
	bytes  int64
	leaves string // leaf counts of the file's top-level columns
	wrote  bool   // by this run
}

func (u *upgrader) table(ctx context.Context, id []string) error {
	if err := u.convert(ctx, id); err != nil {
		return err
	}
	lines, err := u.lines(ctx, u.c.handle(id))
	if err != nil {
		return err
	}
	for _, line := range lines {
		n, err := u.moveIndexes(ctx, line)
		if err != nil {
			return err
		}
		if n > 0 {
			u.rep.IndexFiles += n
			verb := "moved"
			if u.o.DryRun {
				verb = "to move"
			}
			u.event(UpgradeEvent{Kind: "indexes", Table: JoinID(id), Branch: line.branch, Detail: fmt.Sprintf("%d index files %s from %s to %s", n, verb, LegacyIndexDir, IndexDir)})
		}
	}
	return nil
}

// convert converts table id's versions and data files to the Lance format.
func (u *upgrader) convert(ctx context.Context, id []string) error {
	name := JoinID(id)
	t := u.c.handle(id)
	lines, err := u.lines(ctx, t)
	if err != nil {
		return err
	}
	mfs, err := u.manifests(ctx, lines)
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if mf.m.IsExternal() {
			u.rep.External = append(u.rep.External, name)
			u.event(UpgradeEvent{Kind: "skipped", Table: name, Detail: "external table: its data files are outside the table"})
			return nil
		}
	}
	// Parquet files left from a run stopped after its manifests were
	// rewritten: a Lance file of that name exists and no manifest names
	// them.
	leftover, err := u.leftovers(ctx, t, mfs)
	if err != nil {
		return err
	}
	var todo []*manifestFile
	paths := map[string]Fragment{}
	for _, mf := range mfs {
		if !mf.needsUpgrade() {
			continue
		}
		todo = append(todo, mf)
		for _, f := range mf.m.Fragments {
			if isParquet(f.Path) {
				paths[f.Path] = f
			}
		}
	}
	if len(todo) == 0 && len(leftover) == 0 {
		u.rep.AlreadyLance++
		return nil
	}
	u.event(UpgradeEvent{Kind: "table", Table: name, Detail: fmt.Sprintf("%d data files, %d versions", len(paths), len(todo))})
	// Every schema must fit the Lance writer and manifest, before
	// anything is written.
	for _, mf := range todo {
		s, err := decodeSchema(mf.m.Schema)
		if err == nil {
			err = datafile.LanceWritable(s)
		}
		if err == nil {
			_, _, err = leafCounts(s)
		}
		if err != nil {
			return u.keep(name, fmt.Sprintf("version %d: %v", mf.m.Version, err))
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	schemas := map[string]*arrow.Schema{}
	for _, p := range sorted {
		s, err := u.fileSchema(ctx, t, paths[p])
		if err != nil {
			return err
		}
		if err := datafile.LanceWritable(s); err != nil {
			return u.keep(name, fmt.Sprintf("data file %s: %v", p, err))
		}
		schemas[p] = s
	}
	done := map[string]converted{}
	for _, p := range sorted {
		cv, err := u.convertFile(ctx, t, paths[p], schemas[p])
		var werr *writeError
		if errors.As(err, &werr) && ctx.Err() == nil {
			// The Lance writer refused the data (or the store the
			// write): no manifest names a Lance file yet, so the table
			// stays as it is (the Lance files this run wrote for it go);
			// a rerun tries again.
			for q, cv := range done {
				if cv.wrote {
					if err := u.c.wh.Delete(ctx, t.key+cv.path); err != nil {
						return err
					}
					u.rep.Files--
					delete(done, q)
				}
			}
			return u.keep(name, fmt.Sprintf("data file %s: %v", p, werr.err))
		}
		if err != nil {
			return err
		}
		done[p] = cv
		u.rep.Files++
		u.event(UpgradeEvent{Kind: "file", Table: name, Path: p, Detail: cv.path})
	}
	rewritten := map[string]bool{}
	for _, mf := range todo {
		rewritten[fmt.Sprintf("%s@%d", mf.line.branch, mf.m.Version)] = true
		if err := u.rewrite(ctx, mf, done); err != nil {
			return err
		}
		u.rep.Versions++
		u.event(UpgradeEvent{Kind: "version", Table: name, Branch: mf.line.branch, Version: mf.m.Version})
	}
	if err := u.refs(ctx, t, name, rewritten); err != nil {
		return err
	}
	if u.o.DryRun {
		u.rep.Converted++
		for p := range leftover {
			u.rep.Removed++
			u.event(UpgradeEvent{Kind: "removed", Table: name, Path: p})
		}
		for p := range paths {
			u.rep.Removed++
			u.event(UpgradeEvent{Kind: "removed", Table: name, Path: p})
		}
		return nil
	}
	// Remove the Parquet files converted, on a fresh read of every line:
	// only what no manifest names.
	mfs, err = u.manifests(ctx, lines)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, mf := range mfs {
		for _, f := range mf.m.Fragments {
			used[f.Path] = true
		}
	}
	gone := map[string]bool{}
	for p := range leftover {
		gone[p] = true
	}
	for p := range done {
		gone[p] = true
	}
	rm := make([]string, 0, len(gone))
	for p := range gone {
		if !used[p] {
			rm = append(rm, p)
		}
	}
	sort.Strings(rm)
	for _, p := range rm {
		if err := u.step(); err != nil {
			return err
		}
		if err := u.c.wh.Delete(ctx, t.key+p); err != nil {
			return err
		}
		u.rep.Removed++
		u.event(UpgradeEvent{Kind: "removed", Table: name, Path: p})
	}
	u.rep.Converted++
	return nil
}

// keep reports a table left Parquet + JSON.
func (u *upgrader) keep(name, why string) error {
	u.rep.KeptParquet = append(u.rep.KeptParquet, name+": "+why)
	u.event(UpgradeEvent{Kind: "skipped", Table: name, Detail: "kept Parquet: " + why})
	return nil
}

// leftovers answers the Parquet files under data/ that have a Lance file
// of the converted name and that no manifest names.
func (u *upgrader) leftovers(ctx context.Context, t *Table, mfs []*manifestFile) (map[string]bool, error) {
	entries, err := u.c.wh.List(ctx, t.key+"data/")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir {
			have["data/"+e.Name] = true
		}
	}
	used := map[string]bool{}
	for _, mf := range mfs {
		for _, f := range mf.m.Fragments {
			used[f.Path] = true
		}
	}
	out := map[string]bool{}
	for p := range have {
		if isParquet(p) && have[lanceName(p)] && !used[p] {
			out[p] = true
		}
	}
	return out, nil
}

// fileSchema reads the schema of Parquet file f (its footer only).
func (u *upgrader) fileSchema(ctx context.Context, t *Table, f Fragment) (*arrow.Schema, error) {
	r, err := t.OpenFragment(ctx, Fragment{ID: f.ID, Path: f.Path, Rows: f.Rows, Bytes: f.Bytes}, FragmentReadOptions{Mem: memory.DefaultAllocator})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Schema()
}

// convertFile writes the Lance form of Parquet file f, unless a run
// before wrote it (the Lance file appears whole or not at all).
func (u *upgrader) convertFile(ctx context.Context, t *Table, f Fragment, schema *arrow.Schema) (converted, error) {
	counts, _, err := leafCounts(schema)
	if err != nil {
		return converted{}, err
	}
	cv := converted{path: lanceName(f.Path), leaves: formatCounts(counts)}
	if size, err := u.c.wh.Size(ctx, t.key+cv.path); err == nil {
		cv.bytes = size
		return cv, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return converted{}, err
	}
	if u.o.DryRun {
		return cv, nil
	}
	if err := u.step(); err != nil {
		return converted{}, err
	}
	whole := Fragment{ID: f.ID, Path: f.Path, Rows: f.Rows, Bytes: f.Bytes}
	recs, err := t.ReadFragment(ctx, whole, nil, memory.DefaultAllocator)
	if err != nil {
		return converted{}, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	if rows != f.Rows {
		return converted{}, &errs.Error{Code: errs.CodeInvalidTableState, Message: fmt.Sprintf("data file %s holds %d rows, its manifests say %d", f.Path, rows, f.Rows)}
	}
	if len(recs) > 0 {
		schema = recs[0].Schema()
	}
	if err := datafile.LanceWritable(schema); err != nil {
		// WriteFileAt would write Parquet, under the old name.
		return converted{}, &writeError{err}
	}
	nf, err := t.WriteFileAt(ctx, cv.path, schema, recs)
	if err != nil {
		return converted{}, &writeError{err}
	}
	if nf.Path != cv.path || nf.Rows != f.Rows {
		return converted{}, fmt.Errorf("data file %s: wrote %s with %d rows, want %s with %d", f.Path, nf.Path, nf.Rows, cv.path, f.Rows)
	}
	cv.bytes, cv.wrote = nf.Bytes, true
	return cv, nil
}

// writeError is a failed write of a Lance data file.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// rewrite replaces manifest file mf by its Lance form naming the Lance
// files, atomically (the store's replace: the old content or the new).
func (u *upgrader) rewrite(ctx context.Context, mf *manifestFile, done map[string]converted) error {
	m := *mf.m
	m.lance = true
	m.Fragments = append([]Fragment(nil), mf.m.Fragments...)
	for i, f := range m.Fragments {
		cv, ok := done[f.Path]
		if !ok {
			continue
		}
		m.Fragments[i].Path, m.Fragments[i].Bytes = cv.path, cv.bytes
		if f.Columns != "" {
			m.Fragments[i].leaves = cv.leaves
		}
	}
	data, err := m.Encode()
	if err != nil {
		return fmt.Errorf("%s: %w", mf.line.ManifestPath(VersionFile{Name: mf.name}), err)
	}
	// What the rewrite must keep, checked before it lands.
	back, err := DecodeManifest(data)
	if err != nil {
		return err
	}
	back.Version = m.Version
	if err := sameVersion(mf.m, back); err != nil {
		return fmt.Errorf("%s: %w", mf.line.ManifestPath(VersionFile{Name: mf.name}), err)
	}
	if u.o.DryRun {
		return nil
	}
	if err := u.step(); err != nil {
		return err
	}
	return u.c.wh.WriteFrom(ctx, mf.key(), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// sameVersion checks that b is version a in another form: the same facts,
// the same fragments (ids, rows, column maps) in the same order.
func sameVersion(a, b *Manifest) error {
	switch {
	case a.Version != b.Version || a.ParentVersion != b.ParentVersion || a.UUID != b.UUID:
		return fmt.Errorf("version, parent or identity changed")
	case a.TimestampMillis != b.TimestampMillis || a.Operation != b.Operation || a.Transaction != b.Transaction:
		return fmt.Errorf("timestamp, operation or transaction changed")
	case a.Schema != b.Schema || a.NextFragmentID != b.NextFragmentID:
		return fmt.Errorf("schema or next fragment id changed")
	case fmt.Sprint(a.Metadata) != fmt.Sprint(b.Metadata) || len(a.Properties) != len(b.Properties):
		return fmt.Errorf("metadata or properties changed")
	case len(a.Fragments) != len(b.Fragments):
		return fmt.Errorf("fragments changed")
	}
	for k, v := range a.Properties {
		if !jsonEqual(v, b.Properties[k]) {
			return fmt.Errorf("property %q changed", k)
		}
	}
	for i, f := range a.Fragments {
		g := b.Fragments[i]
		if f.ID != g.ID || f.Rows != g.Rows || f.Columns != g.Columns {
			return fmt.Errorf("fragment %d changed", f.ID)
		}
	}
	return nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// refs gives tags and branch records the sizes of the manifests they
// name now (LanceDB reads a tagged manifest by the size its tag says).
func (u *upgrader) refs(ctx context.Context, t *Table, name string, rewritten map[string]bool) error {
	size := func(l *Table, v uint64) (int64, bool, error) {
		if u.o.DryRun {
			// Not rewritten yet: a ref to a version to be rewritten
			// changes (-1 is no size).
			if rewritten[fmt.Sprintf("%s@%d", l.branch, v)] {
				return -1, true, nil
			}
			return 0, false, nil
		}
		vf, err := l.Version(ctx, v)
		if errs.CodeOf(err) == errs.CodeTableVersionNotFound {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		n, err := u.c.wh.Size(ctx, l.versionsKey()+vf.Name)
		if errors.Is(err, os.ErrNotExist) {
			return 0, false, nil
		}
		return n, err == nil, err
	}
	tags, err := t.Tags(ctx)
	if err != nil {
		return err
	}
	for _, tag := range TagNames(tags) {
		tg := tags[tag]
		l := t.Main()
		if tg.Branch != "" {
			b := *t
			b.branch = tg.Branch
			l = &b
		}
		n, ok, err := size(l, tg.Version)
		if err != nil {
			return err
		}
		if !ok || n == tg.ManifestSize {
			continue
		}
		tg.ManifestSize = n
		if err := u.putRef(ctx, t.tagKey(tag), tg); err != nil {
			return err
		}
		u.event(UpgradeEvent{Kind: "ref", Table: name, Path: tagsDir + tag + ".json", Version: tg.Version})
	}
	branches, err := t.Branches(ctx)
	if err != nil {
		return err
	}
	for _, br := range BranchNames(branches) {
		bi := branches[br]
		b := *t
		b.branch = br
		n, ok, err := size(&b, bi.ParentVersion)
		if err != nil {
			return err
		}
		if !ok || n == bi.ManifestSize {
			continue
		}
		bi.ManifestSize = n
		if err := u.putRef(ctx, t.branchRefKey(br), bi); err != nil {
			return err
		}
		u.event(UpgradeEvent{Kind: "ref", Table: name, Branch: br, Path: branchRefsDir + br + ".json", Version: bi.ParentVersion})
	}
	return nil
}

func (u *upgrader) putRef(ctx context.Context, key string, v any) error {
	u.rep.Refs++
	if u.o.DryRun {
		return nil
	}
	if err := u.step(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return u.c.wh.WriteFrom(ctx, key, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// warehouseMarker is the content of WarehouseMarker.
type warehouseMarker struct {
	TableFormat string `json:"table_format"`
	// IndexDir is where the warehouse's mvq indexes live (absent: the
	// LegacyIndexDir of the first Lance layout).
	IndexDir string `json:"index_dir,omitempty"`
}

func writeMarker(ctx context.Context, c *Catalog) error {
	b, _ := json.Marshal(warehouseMarker{TableFormat: FormatLance, IndexDir: IndexDir})
	return c.wh.WriteFrom(ctx, WarehouseMarker, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WarehouseUpgraded reports whether the warehouse marker says the
// warehouse is in the Lance format.
func WarehouseUpgraded(ctx context.Context, c *Catalog) (bool, error) {
	b, err := c.wh.Read(ctx, WarehouseMarker)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var mk warehouseMarker
	if err := json.Unmarshal(b, &mk); err != nil {
		return false, &errs.Error{Code: errs.CodeInvalidTableState, Message: WarehouseMarker + " is corrupt", Err: err}
	}
	return mk.TableFormat == FormatLance && mk.IndexDir == IndexDir, nil
}

// ErrNotUpgraded is what CheckWarehouseFormat answers for a warehouse of
// the Parquet + JSON layout opened in the Lance format.
var ErrNotUpgraded = errors.New("warehouse not upgraded")

// CheckWarehouseFormat is the services' start check: in the Lance format
// (Options.Format), a warehouse without the marker Upgrade writes is
// refused, with an error wrapping ErrNotUpgraded that names the command,
// when one of its tables is of the Parquet + JSON layout; one whose tables
// are all Lance (or that has none) gets the marker. In the Parquet format there is nothing to
// check.
func CheckWarehouseFormat(ctx context.Context, c *Catalog) error {
	if c.opts.Format != FormatLance {
		return nil
	}
	ok, err := WarehouseUpgraded(ctx, c)
	if err != nil || ok {
		return err
	}
	// No marker: a warehouse whose tables are all Lance already (or that
	// has none) is marked; one with a table of the old layout is refused.
	// Iceberg-mirrored tables stay as they are (Upgrade leaves them too).
	ids, err := c.allTables(ctx, nil, 0)
	if err != nil {
		return err
	}
	for _, id := range ids {
		t, err := c.OpenTable(ctx, id)
		if errs.CodeOf(err) == errs.CodeTableNotFound {
			continue // declared, or dropped since the listing
		}
		if err != nil {
			return err
		}
		m, err := t.Load(ctx, 0)
		if err != nil {
			return err
		}
		if !m.lance && !m.IsExternal() {
			return fmt.Errorf("%w: warehouse %s holds tables of the Parquet + JSON layout (table %s; no %s at its root), and the Lance table format is configured: stop the services and run `%s` (same MVQ_WAREHOUSE), or set MVQ_TABLE_FORMAT=parquet",
				ErrNotUpgraded, c.wh.URI(), JoinID(id), WarehouseMarker, UpgradeCommand)
		}
		lines, err := (&upgrader{c: c}).lines(ctx, t)
		if err != nil {
			return err
		}
		if f, err := c.hasLegacyIndexes(ctx, t, lines); err != nil {
			return err
		} else if f != "" {
			return fmt.Errorf("%w: warehouse %s keeps mvq indexes in Lance's %s folder (%s), where Lance's cleanup would delete them: stop the services and run `%s` (same MVQ_WAREHOUSE) to move them to %s",
				ErrNotUpgraded, c.wh.URI(), LegacyIndexDir, f, UpgradeCommand, IndexDir)
		}
	}
	return writeMarker(ctx, c)
}
