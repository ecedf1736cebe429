package refresh

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mvq-dev/mvq/arrowjson"
	"github.com/mvq-dev/mvq/errs"
	"github.com/mvq-dev/mvq/table"
	"github.com/mvq-dev/mvq/udf"
)

const shoutRuntimes = `
runtimes:
  shout:
    kind: exec
    command: ["python3", "testdata/shout.py"]
    protocol: ndjson
    timeout: 30s
    max_batch_rows: 3
    allowed_env: [SUFFIX]
`

func shoutBundle(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, table.Options{})
	dir, _ := filepath.Abs(".")
	reg, err := udf.Parse([]byte(shoutRuntimes), dir)
	if err != nil {
		t.Fatal(err)
	}
	b.e = NewEngineWith(b.cat, EngineOptions{Runtimes: reg})
	t.Cleanup(func() { b.e.Close() })
	return b
}

func str(s string) *string { return &s }

func typ(name string) arrowjson.DataType { return arrowjson.DataType{Type: name} }

// shoutColumn is a virtual column of two outputs by the shout runtime.
func shoutColumn(version, manifest string) AddColumnEntry {
	vc := &VirtualColumnEntry{
		InputColumns: []string{"body"},
		Outputs: []VirtualOutput{
			{Column: "loud", StructField: "loud", DataType: typ("utf8")},
			{Column: "body_len", StructField: "n", DataType: typ("int32")},
		},
		UDF:        base64.StdEncoding.EncodeToString([]byte(`{"runtime": "shout"}`)),
		UDFName:    "shout",
		UDFVersion: version,
		UDFBackend: str(UDFBackend),
	}
	if manifest != "" {
		vc.Manifest = &manifest
	}
	return AddColumnEntry{Name: "shout", VirtualColumn: vc}
}

// backfill runs a backfill job the way the orchestrator does, with the
// events it reports.
func (b *bundle) backfill(t *testing.T, id []string, job string, opts Options) (Result, []string) {
	t.Helper()
	var mu sync.Mutex
	var events []string
	ctx := WithEvents(b.ctx, func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() })
	if err := b.e.Prepare(ctx, id, &opts); err != nil {
		t.Fatal(err)
	}
	p, err := b.e.Plan(ctx, id, job, opts)
	if err != nil {
		t.Fatal(err)
	}
	var rs []ItemResult
	for i := range p.Items {
		r, err := b.e.Expand(ctx, p, i)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	res, err := b.e.Commit(ctx, p, rs)
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

func TestAddColumnsAndBackfill(t *testing.T) {
	b := shoutBundle(t)
	src := b.source(t, frag0, frag1)
	m, added, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{
		shoutColumn("1", `{"env_vars": {"SUFFIX": "!"}}`),
		{Name: "title_len", Computed: str("length(title) * 10")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 3 || len(added) != 2 || added[0].Runtime != "shout" || added[1].Kind != "computed" {
		t.Fatalf("v%d %+v", m.Version, added)
	}
	eqRows(t, "all null", b.rows(t, srcID)[:2], []string{"1|Alpha|en|aaaabbbbcc|∅|∅|∅", "2|Beta|fr|dddd|∅|∅|∅"})

	// A backfill with where fills only the rows that match, one commit per fragment.
	res, events := b.backfill(t, srcID, "bf1", Options{Backfill: &BackfillOptions{Column: "loud", Where: "lang = 'en'"}})
	if res.Mode != ModeBackfill || res.RowsUpdated != 5 || res.ManifestChecksum != ManifestChecksum(`{"env_vars": {"SUFFIX": "!"}}`) {
		t.Fatalf("result %+v", res)
	}
	eqRows(t, "filled en", b.rows(t, srcID), []string{
		"1|Alpha|en|aaaabbbbcc|AAAABBBBCC!|10|∅", "2|Beta|fr|dddd|∅|∅|∅", "3|Gamma|en||!|0|∅", "4|Delta|en|∅|∅|∅|∅",
		"5|Eps|en|eeeeffff|EEEEFFFF!|8|∅", "6|Zeta|en|g|G!|1|∅"})
	if !strings.Contains(strings.Join(events, "\n"), "batch of") || !strings.Contains(strings.Join(events, "\n"), "committed fragments") {
		t.Fatalf("events %q", events)
	}
	if got := b.manifest(t, srcID); got.Version != 5 || got.Operation != "backfill" {
		t.Fatalf("v%d %s: want one commit per fragment", got.Version, got.Operation)
	}

	// Without where: only the rows not filled yet are computed (the
	// null ones), and an override of the manifest reaches them.
	res, _ = b.backfill(t, srcID, "bf2", Options{Manifest: `{"env_vars": {"SUFFIX": "?"}}`, Backfill: &BackfillOptions{Column: "shout"}})
	if res.RowsUpdated != 2 {
		t.Fatalf("second backfill %+v, want the 2 null rows", res)
	}
	eqRows(t, "filled", b.rows(t, srcID)[:4], []string{
		"1|Alpha|en|aaaabbbbcc|AAAABBBBCC!|10|∅", "2|Beta|fr|dddd|DDDD?|4|∅", "3|Gamma|en||!|0|∅", "4|Delta|en|∅|∅|∅|∅"})

	// The computed column, and new rows appended later.
	b.insert(t, src, article{7, "Eta", "en", "hi"})
	res, _ = b.backfill(t, srcID, "bf3", Options{Backfill: &BackfillOptions{Column: "title_len", CheckpointSize: 2, CommitGranularity: 5}})
	if res.RowsUpdated != 7 {
		t.Fatalf("computed %+v", res)
	}
	res, _ = b.backfill(t, srcID, "bf4", Options{Backfill: &BackfillOptions{Column: "loud"}})
	if res.RowsUpdated != 2 { // row 7 and the null body, whose value stays null
		t.Fatalf("appended %+v", res)
	}
	eqRows(t, "all", b.rows(t, srcID)[4:], []string{"5|Eps|en|eeeeffff|EEEEFFFF!|8|30", "6|Zeta|en|g|G!|1|40", "7|Eta|en|hi|HI!|2|30"})

	// The same version again: only the row whose value is still null
	// (a null body) is computed; every other row is filled.
	if res, _ = b.backfill(t, srcID, "bf5", Options{Backfill: &BackfillOptions{Column: "loud"}}); res.RowsUpdated != 1 {
		t.Fatalf("same version again %+v", res)
	}
}

func TestAddColumnsRefusals(t *testing.T) {
	b := shoutBundle(t)
	b.source(t, frag0)
	emb := shoutColumn("1", "")
	emb.VirtualColumn.UDFBackend = str("DockerUDFSpecV1")
	noRT := shoutColumn("1", "")
	noRT.VirtualColumn.UDF = base64.StdEncoding.EncodeToString([]byte(`{"runtime": "nope"}`))
	badIn := shoutColumn("1", "")
	badIn.VirtualColumn.InputColumns = []string{"missing"}
	badType := shoutColumn("1", "")
	badType.VirtualColumn.Outputs[0].DataType = typ("wat")
	clash := shoutColumn("1", "")
	clash.VirtualColumn.Outputs[0].Column = "title"
	badSum := shoutColumn("1", `{"name": "m"}`)
	badSum.VirtualColumn.ManifestChecksum = str("00")
	for _, c := range []struct {
		ent  AddColumnEntry
		want string
	}{
		{emb, "udf_backend"},
		{noRT, `runtime "nope"`},
		{badIn, `"missing" not found`},
		{badType, "data_type"},
		{clash, `"title" exists`},
		{badSum, "manifest_checksum"},
		{AddColumnEntry{Name: "x", Computed: str("nosuch + 1")}, "computed"},
		{AddColumnEntry{Name: "x", Computed: str("(SELECT 1 FROM read_csv('/etc/passwd'))")}, "computed"},
		{AddColumnEntry{Name: "x", Expression: str("1")}, "expression"},
		{AddColumnEntry{Name: "x"}, "exactly one"},
	} {
		_, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{c.ent})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.want, err)
		}
	}
	if _, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{{Name: "t2", Computed: str("upper(title)")}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Backfill: &BackfillOptions{Column: "title"}}, "not a virtual"},
		{Options{Backfill: &BackfillOptions{Column: "nope"}}, "not found"},
		{Options{Backfill: &BackfillOptions{Column: "t2", Where: "nope = 1"}}, "where"},
		{Options{Backfill: &BackfillOptions{Column: "t2", ReadVersion: 99}}, "read_version"},
		{Options{Backfill: &BackfillOptions{Column: "t2", CommitGranularity: -1}}, "commit_granularity"},
		{Options{Backfill: &BackfillOptions{Column: "t2"}, Manifest: `{"mvq": {"runtime": "nope"}}`}, "nope"},
	} {
		err := b.e.Prepare(b.ctx, srcID, &c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.want, err)
		}
	}
}

func TestViewRefreshComputesVirtualColumns(t *testing.T) {
	b := shoutBundle(t)
	src := b.source(t, frag0)
	id := b.chunkerView(t, "chunks")
	if _, _, err := b.e.AddColumns(b.ctx, id, []AddColumnEntry{
		{Name: "shout", VirtualColumn: &VirtualColumnEntry{InputColumns: []string{"chunk"},
			Outputs: []VirtualOutput{{Column: "loud", StructField: "loud", DataType: typ("utf8")}},
			UDF:     base64.StdEncoding.EncodeToString([]byte(`{"runtime": "shout"}`)), UDFName: "shout", UDFVersion: "1"}},
		{Name: "clen", Computed: str("length(chunk)")},
	}); err != nil {
		t.Fatal(err)
	}
	b.refresh(t, id, "r1", Options{})
	eqRows(t, "view", b.rows(t, id), []string{"0:0|0|1|aaaa|AAAA|4", "0:0|1|1|bbbb|BBBB|4", "0:0|2|1|cc|CC|2", "0:1|0|2|dddd|DDDD|4"})
	// An incremental refresh computes them for the rows it adds only, and
	// records its fragments as filled: a backfill then has nothing to do.
	b.insert(t, src, article{9, "Iota", "en", "xyz"})
	p, _ := b.refresh(t, id, "r2", Options{})
	if p.Mode != ModeIncremental {
		t.Fatalf("mode %s", p.Mode)
	}
	eqRows(t, "view", b.rows(t, id)[4:], []string{"1:0|0|9|xyz|XYZ|3"})
	if res, _ := b.backfill(t, id, "bf", Options{Backfill: &BackfillOptions{Column: "loud"}}); res.RowsUpdated != 0 {
		t.Fatalf("backfill after refresh %+v", res)
	}
}

// TestUserCodeRunsWithoutCPUToken: a chunker view's computed column calls
// its runtime (a subprocess) with the item's CPU token given up, so with
// one token another item can apply meanwhile; the rows come out as with
// the token held.
func TestUserCodeRunsWithoutCPUToken(t *testing.T) {
	b := shoutBundle(t)
	dir, _ := filepath.Abs(".")
	reg, err := udf.Parse([]byte(shoutRuntimes), dir)
	if err != nil {
		t.Fatal(err)
	}
	b.e = NewEngineWith(b.cat, EngineOptions{Runtimes: reg, CPUItems: 1})
	t.Cleanup(func() { b.e.Close() })
	b.source(t, frag0)
	id := b.chunkerView(t, "chunks")
	if _, _, err := b.e.AddColumns(b.ctx, id, []AddColumnEntry{
		{Name: "shout", VirtualColumn: &VirtualColumnEntry{InputColumns: []string{"chunk"},
			Outputs: []VirtualOutput{{Column: "loud", StructField: "loud", DataType: typ("utf8")}},
			UDF:     base64.StdEncoding.EncodeToString([]byte(`{"runtime": "shout"}`)), UDFName: "shout", UDFVersion: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	var calls, heldDuring atomic.Int32
	b.e.userCodeHook = func() {
		calls.Add(1)
		heldDuring.Add(int32(len(b.e.cpu)))
	}
	b.refresh(t, id, "r1", Options{})
	if calls.Load() == 0 {
		t.Fatal("the runtime was never called")
	}
	if n := heldDuring.Load(); n != 0 {
		t.Fatalf("user code ran with %d CPU tokens held", n)
	}
	eqRows(t, "view", b.rows(t, id), []string{"0:0|0|1|aaaa|AAAA", "0:0|1|1|bbbb|BBBB", "0:0|2|1|cc|CC", "0:1|0|2|dddd|DDDD"})
	if n := len(b.e.cpu); n != 0 {
		t.Fatalf("%d CPU tokens held after the refresh", n)
	}
}

// A backfill stopped after its first commit keeps what it committed, and
// the item tried again computes only the rest.
func TestBackfillResumesAfterKill(t *testing.T) {
	b := shoutBundle(t)
	b.source(t, frag0, frag1)
	if _, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{shoutColumn("1", "")}); err != nil {
		t.Fatal(err)
	}
	opts := Options{SourceTaskSize: 100, Backfill: &BackfillOptions{Column: "loud"}}
	if err := b.e.Prepare(b.ctx, srcID, &opts); err != nil {
		t.Fatal(err)
	}
	p, err := b.e.Plan(b.ctx, srcID, "kill", opts)
	if err != nil || len(p.Items) != 1 || len(p.Items[0].Ranges) != 2 {
		t.Fatalf("plan %+v %v", p, err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	ctx = WithEvents(ctx, func(s string) {
		if strings.Contains(s, "committed") {
			cancel() // the worker dies after the first commit
		}
	})
	if _, err := b.e.Expand(ctx, p, 0); err == nil {
		t.Fatal("expand survived its cancel")
	}
	eqRows(t, "first fragment kept", b.rows(t, srcID), []string{
		"1|Alpha|en|aaaabbbbcc|AAAABBBBCC|10", "2|Beta|fr|dddd|DDDD|4", "3|Gamma|en|||0", "4|Delta|en|∅|∅|∅",
		"5|Eps|en|eeeeffff|∅|∅", "6|Zeta|en|g|∅|∅"})
	if err := b.e.Discard(b.ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	r, err := b.e.Expand(b.ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.RowsWritten != 2 {
		t.Fatalf("the retry computed %d rows, want the 2 of the second fragment", r.RowsWritten)
	}
	eqRows(t, "resumed", b.rows(t, srcID)[4:], []string{"5|Eps|en|eeeeffff|EEEEFFFF|8", "6|Zeta|en|g|G|1"})
}

// TestBackfillRacingACompaction: a compaction that merges the fragments a
// planned backfill names fails the backfill's item (retryable conflict)
// instead of letting the job end DONE with rows it never filled; a new
// backfill then fills every row.
func TestBackfillRacingACompaction(t *testing.T) {
	b := shoutBundle(t)
	b.source(t, frag0, frag1)
	if _, _, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{shoutColumn("1", "")}); err != nil {
		t.Fatal(err)
	}
	opts := Options{SourceTaskSize: 100, Backfill: &BackfillOptions{Column: "loud"}}
	if err := b.e.Prepare(b.ctx, srcID, &opts); err != nil {
		t.Fatal(err)
	}
	p, err := b.e.Plan(b.ctx, srcID, "raced", opts)
	if err != nil || len(p.Items) != 1 || len(p.Items[0].Ranges) != 2 {
		t.Fatalf("plan %+v %v", p, err)
	}
	before := b.rows(t, srcID)
	if res, err := b.cat.Compact(b.ctx, srcID, table.CompactOptions{MinFragments: 2}); err != nil || res.Version == 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	_, err = b.e.Expand(b.ctx, p, 0)
	if errs.CodeOf(err) != errs.CodeConcurrentModification || !strings.Contains(fmt.Sprint(err), "backfill again") {
		t.Fatalf("expand after a compaction: %v", err)
	}
	eqRows(t, "nothing filled by the raced item", b.rows(t, srcID), before)
	b.backfill(t, srcID, "again", Options{SourceTaskSize: 100, Backfill: &BackfillOptions{Column: "loud"}})
	for _, r := range b.rows(t, srcID) {
		if parts := strings.Split(r, "|"); parts[3] != "∅" && parts[4] == "∅" {
			t.Fatalf("row left unfilled after the second backfill: %s", r)
		}
	}
}

// TestAddColumnsDefaults: udf_name, udf_version and outputs may be left
// out; the outputs only for a runtime that declares dimensions.
func TestAddColumnsDefaults(t *testing.T) {
	b := setup(t, table.Options{})
	dir, _ := filepath.Abs(".")
	reg, err := udf.Parse([]byte(shoutRuntimes), dir)
	if err != nil {
		t.Fatal(err)
	}
	if reg, err = reg.With(udf.LocalEmbedRuntime("emb", "/nonexistent/mvq", 4)); err != nil {
		t.Fatal(err)
	}
	b.e = NewEngineWith(b.cat, EngineOptions{Runtimes: reg})
	t.Cleanup(func() { b.e.Close() })
	b.source(t, frag0)
	ref := func(rt string) string { return base64.StdEncoding.EncodeToString([]byte(`{"runtime": "` + rt + `"}`)) }
	m, added, err := b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{{Name: "vec", VirtualColumn: &VirtualColumnEntry{
		InputColumns: []string{"body"}, UDF: ref("emb")}}})
	if err != nil {
		t.Fatal(err)
	}
	got := added[0]
	if got.UDFName != "emb" || got.UDFVersion != "1" || len(got.Outputs) != 1 || got.Outputs[0] != (BoundOutput{Column: "vec", StructField: "embedding"}) {
		t.Fatalf("binding %+v", got)
	}
	s, err := m.ArrowSchema()
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := s.FieldsByName("vec"); len(f) != 1 || f[0].Type.String() != "fixed_size_list<item: float32, nullable>[4]" {
		t.Fatalf("vec: %v", f)
	}
	_, _, err = b.e.AddColumns(b.ctx, srcID, []AddColumnEntry{{Name: "loud", VirtualColumn: &VirtualColumnEntry{
		InputColumns: []string{"body"}, UDF: ref("shout")}}})
	if err == nil || !strings.Contains(err.Error(), "outputs: at least one output is required") {
		t.Fatalf("shout without outputs: %v", err)
	}
}
