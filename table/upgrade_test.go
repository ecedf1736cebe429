package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/mvq-dev/mvq/duck"
	oracle "github.com/mvq-dev/mvq/internal/lanceoracle"
	"github.com/mvq-dev/mvq/internal/testenv"
)

// legacyWarehouse builds, with the Parquet + JSON code path, a warehouse
// of several tables: versions with an insert, a delete, an update and a
// drop_columns, a tag, a branch with a commit of its own, a view's
// properties, a table in a nested namespace and one of a fixed-size list
// of strings.
func legacyWarehouse(t *testing.T, root string) { t.Helper(); legacyWarehouseAt(t, "file://"+root) }

// legacyWarehouseAt is legacyWarehouse on the warehouse at uri.
func legacyWarehouseAt(t *testing.T, uri string) {
	t.Helper()
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, testDB(t), Options{Format: FormatParquet, MaxRowsPerFragment: 100})
	for _, ns := range [][]string{{"docs"}, {"docs", "sub"}} {
		if err := c.CreateNamespace(ctx, ns, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	a, m, err := c.CreateTable(ctx, []string{"docs", "a"}, lanceTestSchema, lanceRows(t, 0, 250), "", nil) // v1
	if err != nil {
		t.Fatal(err)
	}
	if m.IsLance() || !strings.HasSuffix(m.Fragments[0].Path, ".parquet") {
		t.Fatalf("the legacy path wrote a lance=%v manifest naming %s", m.IsLance(), m.Fragments[0].Path)
	}
	if _, _, err := a.Insert(ctx, lanceRows(t, 250, 300), ""); err != nil { // v2
		t.Fatal(err)
	}
	if _, n, err := a.Delete(ctx, "id % 10 = 0"); err != nil || n != 30 { // v3
		t.Fatalf("delete: %d, %v", n, err)
	}
	if _, _, err := a.Update(ctx, "id = 7", [][2]string{{"text", "'seven'"}}); err != nil { // v4
		t.Fatal(err)
	}
	if _, err := a.DropColumns(ctx, []string{"meta"}); err != nil { // v5
		t.Fatal(err)
	}
	if err := a.CreateTag(ctx, "before-drop", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateBranch(ctx, "dev", "", 3); err != nil {
		t.Fatal(err)
	}
	dev, err := a.OnBranch(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dev.Insert(ctx, lanceRows(t, 1000, 1010), ""); err != nil { // dev v4
		t.Fatal(err)
	}
	if err := dev.CreateTag(ctx, "dev-head", 4); err != nil {
		t.Fatal(err)
	}
	view := map[string]json.RawMessage{ViewProperty: json.RawMessage(`{"kind":"test","source":"docs$a"}`)}
	b, _, err := c.CreateTable(ctx, []string{"docs", "sub", "b"}, lanceTestSchema, lanceRows(t, 0, 40), "", view)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Insert(ctx, lanceRows(t, 40, 60), ""); err != nil {
		t.Fatal(err)
	}
	// A fixed-size list of strings.
	odd := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "words", Type: arrow.FixedSizeListOf(2, arrow.BinaryTypes.String), Nullable: true}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, odd)
	defer bld.Release()
	for i := 0; i < 5; i++ {
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		lb := bld.Field(1).(*array.FixedSizeListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"x", fmt.Sprint(i)}, nil)
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	rdr, _ := array.NewRecordReader(odd, []arrow.RecordBatch{rec})
	if _, _, err := c.CreateTable(ctx, []string{"docs", "odd"}, odd, rdr, "", nil); err != nil {
		t.Fatal(err)
	}
}

// snapshot renders every version of every line of every table (rows in
// table order, all columns), the tags and branches, the properties and
// identities: what an upgrade must keep.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	return snapshotAt(t, "file://"+root)
}

// snapshotAt is snapshot of the warehouse at uri.
func snapshotAt(t *testing.T, uri string) map[string]string {
	t.Helper()
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, testDB(t), Options{Format: FormatLance})
	ids, err := c.allTables(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, id := range ids {
		tb, err := c.OpenTable(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		name := JoinID(id)
		tags, err := tb.Tags(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for n, tg := range tags {
			out[name+" tag "+n] = fmt.Sprintf("%s@%d", tg.Branch, tg.Version)
		}
		branches, err := tb.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lines := []*Table{tb}
		for _, n := range BranchNames(branches) {
			bi := branches[n]
			out[name+" branch "+n] = fmt.Sprintf("%s@%d %s", bi.ParentBranch, bi.ParentVersion, bi.ID)
			l, err := tb.OnBranch(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		for _, l := range lines {
			vs, err := l.Versions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, vf := range vs {
				m, err := l.LoadFile(ctx, vf)
				if err != nil {
					t.Fatal(err)
				}
				identity, err := l.Identity(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("%s %s v%d", name, l.Branch(), vf.Version)
				props, _ := json.Marshal(m.Properties)
				out[key+" facts"] = fmt.Sprintf("%s parent=%d op=%s ts=%d next=%d id=%s props=%s", vf.Name, m.ParentVersion, m.Operation, m.TimestampMillis, m.NextFragmentID, identity, props)
				out[key+" rows"] = versionRows(t, l, vf.Version)
			}
		}
	}
	return out
}

func versionRows(t *testing.T, tb *Table, v uint64) string {
	t.Helper()
	rdr, err := tb.Query(context.Background(), QueryOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := duck.Collect(rdr)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, r := range recs {
		sb.WriteString(r.Schema().String())
		for i := 0; i < int(r.NumRows()); i++ {
			for j := 0; j < int(r.NumCols()); j++ {
				sb.WriteString(r.Column(j).ValueStr(i))
				sb.WriteByte('|')
			}
			sb.WriteByte('\n')
		}
		r.Release()
	}
	return sb.String()
}

func diffSnapshots(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		if want[k] != got[k] {
			bad++
			if bad <= 5 {
				w, g := want[k], got[k]
				if len(w) > 300 {
					w = w[:300] + "…"
				}
				if len(g) > 300 {
					g = g[:300] + "…"
				}
				t.Errorf("%s: %s:\n before: %s\n after:  %s", what, k, w, g)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d entries differ", what, bad, len(keys))
	}
}

func upgradeAt(t *testing.T, root string, o UpgradeOptions) (UpgradeReport, error) {
	t.Helper()
	return upgradeURI(t, "file://"+root, o)
}

// upgradeURI is upgradeAt on the warehouse at uri.
func upgradeURI(t *testing.T, uri string, o UpgradeOptions) (UpgradeReport, error) {
	t.Helper()
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	return Upgrade(ctx, NewCatalog(wh, testDB(t), Options{Format: FormatLance}), o)
}

// dataFiles lists the data files of a table folder by extension.
func dataFiles(t *testing.T, dir string) map[string]int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		out[filepath.Ext(e.Name())]++
	}
	return out
}

func TestUpgradeKeepsEveryVersion(t *testing.T) {
	root := t.TempDir()
	legacyWarehouse(t, root)
	before := snapshot(t, root)
	if len(before) < 20 {
		t.Fatalf("snapshot of %d entries: the legacy warehouse is too small", len(before))
	}

	// A dry run changes nothing and says what would change.
	dry, err := upgradeAt(t, root, UpgradeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Converted != 3 || dry.Files == 0 || dry.Versions == 0 || dry.Refs != 3 || len(dry.KeptParquet) != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if _, err := os.Stat(filepath.Join(root, WarehouseMarker)); !os.IsNotExist(err) {
		t.Fatalf("a dry run wrote the marker: %v", err)
	}
	if got := dataFiles(t, filepath.Join(root, "docs", "a.lance")); got[".lance"] != 0 {
		t.Fatalf("a dry run wrote data files: %v", got)
	}

	var events []UpgradeEvent
	rep, err := upgradeAt(t, root, UpgradeOptions{Progress: func(e UpgradeEvent) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upgrade: %+v (%d events)", rep, len(events))
	// The odd table (a fixed-size list of strings) converts or, where
	// the Lance writer refuses its data, stays Parquet and is reported.
	kept := len(rep.KeptParquet) == 1 && strings.HasPrefix(rep.KeptParquet[0], "docs$odd: ")
	if rep.Tables != 3 || rep.Converted+len(rep.KeptParquet) != 3 || (len(rep.KeptParquet) > 0 && !kept) || rep.Removed != rep.Files || !rep.Marker {
		t.Fatalf("report %+v, dry run %+v", rep, dry)
	}
	if !kept && (rep.Files != dry.Files || rep.Versions != dry.Versions) {
		t.Fatalf("report %+v, dry run %+v", rep, dry)
	}
	if rep.Refs != 3 { // two tags, one branch record
		t.Fatalf("%d refs updated, want the two tags and the branch record", rep.Refs)
	}
	diffSnapshots(t, "after upgrade", before, snapshot(t, root))

	// Every manifest is Lance and names Lance files only; no Parquet file
	// is left in the converted tables.
	for _, dir := range []string{filepath.Join(root, "docs", "a.lance"), filepath.Join(root, "docs", "sub", "b.lance")} {
		if got := dataFiles(t, dir); got[".parquet"] != 0 || got[".lance"] == 0 {
			t.Fatalf("%s: data files %v", dir, got)
		}
	}
	for _, vdir := range []string{"docs/a.lance/_versions", "docs/a.lance/tree/dev/_versions", "docs/sub/b.lance/_versions"} {
		entries, err := os.ReadDir(filepath.Join(root, vdir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			raw, err := os.ReadFile(filepath.Join(root, vdir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if !isLanceManifest(raw) || strings.Contains(string(raw), ".parquet") {
				t.Fatalf("%s/%s is not a Lance manifest naming Lance files", vdir, e.Name())
			}
		}
	}
	if got := dataFiles(t, filepath.Join(root, "docs", "odd.lance")); kept != (got[".parquet"] == 1) {
		t.Fatalf("the odd table's files: %v (kept Parquet: %v)", got, kept)
	}
	if b, err := os.ReadFile(filepath.Join(root, WarehouseMarker)); err != nil || !strings.Contains(string(b), `"table_format":"lance"`) {
		t.Fatalf("marker %q, %v", b, err)
	}

	// A second run changes nothing.
	files := treeState(t, root)
	again, err := upgradeAt(t, root, UpgradeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Converted != 0 || again.Files != 0 || again.Versions != 0 || again.Refs != 0 || again.Removed != 0 || again.AlreadyLance != rep.Converted {
		t.Fatalf("second run: %+v", again)
	}
	if now := treeState(t, root); fmt.Sprint(now) != fmt.Sprint(files) {
		t.Fatalf("a second run changed the warehouse:\n%v\n%v", files, now)
	}

	// LanceDB reads the upgraded table: the latest version, an older one
	// (before the drop_columns), the tagged one and the branch's.
	o := oracle.Need(t)
	dir := filepath.Join(root, "docs", "a.lance")
	if n := o.Count(t, dir, ""); n != 270 {
		t.Fatalf("LanceDB counts %d rows, want 270", n)
	}
	if n := o.CountAt(t, dir, "", 1); n != 250 {
		t.Fatalf("LanceDB counts %d rows at version 1, want 250", n)
	}
	if _, texts := lanceIDs(t, o, dir, "text", "id = 7"); texts[7] != "seven" {
		t.Fatalf("LanceDB read text %q for id 7", texts[7])
	}
	tbl := o.Read(t, dir, oracle.ReadOpts{Where: "id = 11"})
	if s := tbl.Schema().String(); strings.Contains(s, "meta") {
		t.Fatalf("LanceDB schema of the latest version: %s", s)
	}
	tbl.Release()
	old := o.Read(t, dir, oracle.ReadOpts{Where: "id = 11", At: 4})
	if s := old.Schema().String(); !strings.Contains(s, "meta") || old.NumRows() != 1 {
		t.Fatalf("LanceDB read of version 4: %d rows, schema %s", old.NumRows(), s)
	}
	old.Release()
	if n := o.Count(t, filepath.Join(root, "docs", "sub", "b.lance"), ""); n != 60 {
		t.Fatalf("LanceDB counts %d rows of the view, want 60", n)
	}
}

// treeState is every file under root with its size and time.
func treeState(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			out = append(out, fmt.Sprintf("%s %d %d", strings.TrimPrefix(p, root), fi.Size(), fi.ModTime().UnixNano()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var errKilled = errors.New("killed")

// TestUpgradeResumes stops an upgrade before each of its changes in turn
// (as a kill there would: every change is one atomic object write or
// delete), checks that every version still reads as before, then lets a
// second run finish and compares again.
func TestUpgradeResumes(t *testing.T) {
	base := t.TempDir()
	legacyWarehouse(t, base)
	before := snapshot(t, base)
	steps := 0
	probe := copyTree(t, base)
	if _, err := upgradeAt(t, probe, UpgradeOptions{step: func() error { steps++; return nil }}); err != nil {
		t.Fatal(err)
	}
	if steps < 20 {
		t.Fatalf("only %d steps", steps)
	}
	t.Logf("%d steps", steps)
	for n := 1; n <= steps; n++ {
		root := copyTree(t, base)
		k := 0
		_, err := upgradeAt(t, root, UpgradeOptions{step: func() error {
			if k++; k == n {
				return errKilled
			}
			return nil
		}})
		if !errors.Is(err, errKilled) {
			t.Fatalf("stop at step %d: %v", n, err)
		}
		diffSnapshots(t, fmt.Sprintf("stopped before step %d", n), before, snapshot(t, root))
		rep, err := upgradeAt(t, root, UpgradeOptions{})
		if err != nil {
			t.Fatalf("rerun after step %d: %v", n, err)
		}
		if !rep.Marker {
			t.Fatalf("rerun after step %d: %+v", n, rep)
		}
		diffSnapshots(t, fmt.Sprintf("rerun after a stop at step %d", n), before, snapshot(t, root))
		if got := dataFiles(t, filepath.Join(root, "docs", "a.lance")); got[".parquet"] != 0 {
			t.Fatalf("rerun after step %d left Parquet files: %v", n, got)
		}
	}
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "wh")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// TestUpgradeRefusesPendingTransactions: a marker of a batch transaction
// under _versions/ stops the upgrade before any change.
func TestUpgradeRefusesPendingTransactions(t *testing.T) {
	root := t.TempDir()
	legacyWarehouse(t, root)
	marker := filepath.Join(root, "docs", "a.lance", "_versions", markerName(ManifestName(6, NamingV2), "0190f1e2-3a4b-7c5d-8e6f-0123456789ab"))
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := parseTxnMarker(filepath.Base(marker)); !ok {
		t.Fatal("the marker name used here is not one the table layer parses")
	}
	state := treeState(t, root)
	_, err := upgradeAt(t, root, UpgradeOptions{})
	if err == nil || !strings.Contains(err.Error(), "pending batch transactions") || !strings.Contains(err.Error(), UpgradeCommand) {
		t.Fatalf("err = %v", err)
	}
	if now := treeState(t, root); fmt.Sprint(now) != fmt.Sprint(state) {
		t.Fatal("a refused upgrade changed the warehouse")
	}
}

// TestCheckWarehouseFormat: in the Lance format a warehouse with legacy
// tables and no marker is refused naming the command; an empty one gets
// the marker; the Parquet format checks nothing.
func TestCheckWarehouseFormat(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	legacyWarehouse(t, root)
	wh, err := OpenWarehouse(ctx, "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	err = CheckWarehouseFormat(ctx, NewCatalog(wh, testDB(t), Options{Format: FormatLance}))
	if !errors.Is(err, ErrNotUpgraded) || !strings.Contains(err.Error(), "`"+UpgradeCommand+"`") {
		t.Fatalf("err = %v", err)
	}
	if err := CheckWarehouseFormat(ctx, NewCatalog(wh, testDB(t), Options{Format: FormatParquet})); err != nil {
		t.Fatalf("parquet format: %v", err)
	}
	if _, err := Upgrade(ctx, NewCatalog(wh, testDB(t), Options{Format: FormatLance}), UpgradeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := CheckWarehouseFormat(ctx, NewCatalog(wh, testDB(t), Options{Format: FormatLance})); err != nil {
		t.Fatalf("after upgrade: %v", err)
	}

	empty := t.TempDir()
	wh2, err := OpenWarehouse(ctx, "file://"+empty)
	if err != nil {
		t.Fatal(err)
	}
	defer wh2.Close()
	c2 := NewCatalog(wh2, testDB(t), Options{Format: FormatLance})
	if err := CheckWarehouseFormat(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if ok, err := WarehouseUpgraded(ctx, c2); !ok || err != nil {
		t.Fatalf("empty warehouse: marker %v, %v", ok, err)
	}
}

// TestUpgradeOnS3: the upgrade on an S3 warehouse (make test-s3): every
// version of every line reads the same rows before and after, a second
// run changes nothing, and the services' start check passes.
func TestUpgradeOnS3(t *testing.T) {
	if !testenv.S3Mode() {
		t.Skip("S3 only (make test-s3)")
	}
	uri := testenv.WarehouseFor(t.TempDir())
	legacyWarehouseAt(t, uri)
	before := snapshotAt(t, uri)
	rep, err := upgradeURI(t, uri, UpgradeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tables != 3 || rep.Converted+len(rep.KeptParquet) != 3 || rep.Files == 0 || rep.Removed != rep.Files || !rep.Marker {
		t.Fatalf("report %+v", rep)
	}
	diffSnapshots(t, "after the upgrade on S3", before, snapshotAt(t, uri))
	again, err := upgradeURI(t, uri, UpgradeOptions{})
	if err != nil || again.Converted != 0 || again.Files != 0 || again.Versions != 0 {
		t.Fatalf("a second run: %+v, %v", again, err)
	}
	ctx := context.Background()
	wh, err := OpenWarehouse(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	c := NewCatalog(wh, testDB(t), Options{Format: FormatLance})
	if err := CheckWarehouseFormat(ctx, c); err != nil {
		t.Fatalf("start check after the upgrade: %v", err)
	}
	a, err := c.OpenTable(ctx, []string{"docs", "a"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.Load(ctx, 0)
	if err != nil || !m.IsLance() {
		t.Fatalf("docs$a after the upgrade: lance=%v, %v", m != nil && m.IsLance(), err)
	}
}
