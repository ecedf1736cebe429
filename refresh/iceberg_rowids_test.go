package refresh

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvq-dev/mvq/chunker"
	"github.com/mvq-dev/mvq/iceberg"
	"github.com/mvq-dev/mvq/internal/icebergtest"
	"github.com/mvq-dev/mvq/table"
)

const iceChunks = `{"chunker":"fixed","input_column":"text","output_column":"chunk","chunk_size":5,"chunk_overlap":0}`

// iceViewRows reads a chunker view over the lake as "id/chunk index/chunk"
// (sorted) and the __source_row_id of each source id.
func (b *bundle) iceViewRows(t *testing.T, id []string) ([]string, map[string]string) {
	t.Helper()
	var out []string
	addr := map[string]string{}
	for _, r := range b.rows(t, id) {
		p := strings.Split(r, "|") // __source_row_id|__chunk_index|id|chunk
		out = append(out, p[2]+"/"+p[1]+"/"+p[3])
		if a, ok := addr[p[2]]; ok && a != p[0] {
			t.Fatalf("source id %s has rows of source rows %s and %s", p[2], a, p[0])
		}
		addr[p[2]] = p[0]
	}
	slices.Sort(out)
	return out, addr
}

// iceChunkOracle chunks rows (iceberg-go's own scan of the lake) as the
// view must hold them.
func iceChunkOracle(t *testing.T, rows []icebergtest.Row) []string {
	t.Helper()
	s, err := chunker.Parse([]byte(iceChunks))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chunker.New(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		for i, c := range ch.Chunk(r.Text, nil) {
			out = append(out, fmt.Sprintf("%d/%d/%s", r.ID, i, c))
		}
	}
	slices.Sort(out)
	return out
}

// TestExternalSourceRowIDsSurviveDeletes: position deletes (merge on
// read) on an Iceberg table's data files leave the view rows of the
// surviving source rows with the __source_row_id they had, remove the
// rows of the deleted ones without expanding anything again, and the
// view equals the chunks of iceberg-go's own scan after each commit; a
// view created afterwards (a full refresh) numbers the rows the same.
func TestExternalSourceRowIDsSurviveDeletes(t *testing.T) {
	t.Parallel()
	lakeDir := t.TempDir()
	externalRowIDs(t, lakeDir, "file://"+lakeDir)
}

// TestExternalSourceOnS3: the same with the Iceberg table on S3 (make
// test-s3: the SeaweedFS server the suite's warehouses are on).
func TestExternalSourceOnS3(t *testing.T) {
	base := os.Getenv("MVQ_TEST_S3_URL")
	if base == "" {
		t.Skip("needs make test-s3 (MVQ_TEST_S3=1 and a weed binary)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_S3_ENDPOINT", u.Query().Get("endpoint"))
	loc := "s3://" + u.Host + "/iceberg-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	externalRowIDs(t, loc, loc)
}

// externalRowIDs runs the row id scenario over an Iceberg table written
// at lakeLoc, read with allowedLoc the one allowed location.
func externalRowIDs(t *testing.T, lakeLoc, allowedLoc string) {
	b := setup(t, table.Options{})
	lake := icebergtest.NewLake(t, lakeLoc, "lake", true)
	allowed, err := iceberg.ParseAllowed(allowedLoc)
	if err != nil {
		t.Fatal(err)
	}
	reg := iceberg.NewRegistrar(b.cat, allowed)
	src := []string{"docs", "lake"}
	ts := int64(0)
	notify := func(typ string) {
		t.Helper()
		ts += 1000
		var req iceberg.Request
		if err := json.Unmarshal(lake.Notification(typ, ts), &req); err != nil {
			t.Fatal(err)
		}
		if err := reg.Notify(b.ctx, src, req); err != nil {
			t.Fatalf("%s notification: %v", typ, err)
		}
	}
	row := func(i int) icebergtest.Row {
		return icebergtest.Row{ID: int64(i), Text: fmt.Sprintf("row %d says %s", i, strings.Repeat("ab", i%5))}
	}
	rows := func(from, to int) []icebergtest.Row {
		var out []icebergtest.Row
		for i := from; i < to; i++ {
			out = append(out, row(i))
		}
		return out
	}
	lake.Append(rows(0, 10)...)
	lake.Append(rows(10, 20)...)
	notify("CREATE")

	view := b.create(t, "chunks", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, text FROM "docs$lake"`, UDTFSpec: chunkerEntry(iceChunks)})
	b.refresh(t, view, "j1", Options{})
	got, addr0 := b.iceViewRows(t, view)
	eqRows(t, "view after create", got, iceChunkOracle(t, lake.Rows()))

	stable := func(what string, addr map[string]string, gone ...int64) {
		t.Helper()
		for id, a := range addr0 {
			if slices.Contains(gone, mustInt(t, id)) {
				if _, ok := addr[id]; ok {
					t.Fatalf("%s: deleted source id %s still has view rows", what, id)
				}
				continue
			}
			if addr[id] != a {
				t.Fatalf("%s: source id %s moved from source row %s to %s", what, id, a, addr[id])
			}
		}
	}

	// A delete touching both data files: they are read again into new
	// fragments, their surviving rows keep their ids.
	before := b.manifest(t, src)
	lake.Delete(3, 12, 13)
	if lake.DeleteFiles() == 0 {
		t.Fatal("the merge-on-read delete wrote no delete file")
	}
	notify("UPDATE")
	after := b.manifest(t, src)
	if slices.Equal(fragIDs(before), fragIDs(after)) {
		t.Fatalf("the delete kept the fragments %v", fragIDs(after))
	}
	if _, ok := after.Properties[table.RowIDsProperty]; !ok || after.NumRows() != int64(len(lake.Rows())) {
		t.Fatalf("source after the delete: %d rows (want %d), properties %v", after.NumRows(), len(lake.Rows()), after.Properties)
	}
	p, res := b.refresh(t, view, "j2", Options{})
	if p.Mode != ModeIncremental || len(p.Items) != 0 || len(p.RemovedSourceFragments) != 0 || len(p.RemovedSourceRows) != 2 {
		t.Fatalf("plan after the delete: %+v", p)
	}
	if res.RowsAdded != 0 || res.RowsRemoved == 0 || res.SourceFilesRecomputed != 2 {
		t.Fatalf("result after the delete: %+v", res)
	}
	got, addr := b.iceViewRows(t, view)
	eqRows(t, "view after the delete", got, iceChunkOracle(t, lake.Rows()))
	stable("after the delete", addr, 3, 12, 13)

	// A second delete on a file read again already, and an append.
	lake.Delete(0, 9, 15)
	lake.Append(rows(20, 25)...)
	notify("UPDATE")
	p, res = b.refresh(t, view, "j3", Options{})
	if p.Mode != ModeIncremental || len(p.Items) != 1 || p.Items[0].Rows != 5 || res.SourceFilesRecomputed != 2 {
		t.Fatalf("plan after the second delete: %+v, result %+v", p, res)
	}
	got, addr = b.iceViewRows(t, view)
	eqRows(t, "view after the second delete", got, iceChunkOracle(t, lake.Rows()))
	stable("after the second delete", addr, 0, 3, 9, 12, 13, 15)

	// Nothing changed: no-op.
	if p, _ := b.refresh(t, view, "j4", Options{}); p.Mode != ModeNoOp {
		t.Fatalf("refresh with nothing changed: %+v", p)
	}

	// A view created now (a full refresh) numbers every row the same.
	fresh := b.create(t, "fresh", CreateRequest{Kind: "chunker", SourceQuery: `SELECT id, text FROM "docs$lake"`, UDTFSpec: chunkerEntry(iceChunks)})
	b.refresh(t, fresh, "f1", Options{})
	got2, addr2 := b.iceViewRows(t, fresh)
	eqRows(t, "a view created after the deletes", got2, got)
	for id, a := range addr {
		if addr2[id] != a {
			t.Fatalf("source id %s: row %s in the view refreshed along, %s in one created after", id, a, addr2[id])
		}
	}
	// Rows stay in __source_row_id order in both.
	for _, id := range [][]string{view, fresh} {
		var prev []int
		for _, r := range b.rows(t, id) {
			var f, o, c int
			if _, err := fmt.Sscanf(r, "%d:%d|%d|", &f, &o, &c); err != nil {
				t.Fatal(err)
			}
			cur := []int{f, o, c}
			if prev != nil && slices.Compare(prev, cur) >= 0 {
				t.Fatalf("view %v: row %v after %v", id, cur, prev)
			}
			prev = cur
		}
	}
}

func fragIDs(m *table.Manifest) []uint32 {
	var out []uint32
	for _, f := range m.Fragments {
		out = append(out, f.ID)
	}
	return out
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
