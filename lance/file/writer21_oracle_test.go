package file

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mvq-dev/mvq/lance/pb/filepb"
	"github.com/mvq-dev/mvq/lance/pb/tablepb"
)

// Test-only stand-ins until lance/schema and lance/dataset land.

func testLogicalType(dt arrow.DataType) string {
	unit := func(u arrow.TimeUnit) string { return []string{"s", "ms", "us", "ns"}[u] }
	switch t := dt.(type) {
	case *arrow.NullType:
		return "null"
	case *arrow.BooleanType:
		return "bool"
	case *arrow.Float16Type:
		return "halffloat"
	case *arrow.Float32Type:
		return "float"
	case *arrow.Float64Type:
		return "double"
	case *arrow.StringType:
		return "string"
	case *arrow.LargeStringType:
		return "large_string"
	case *arrow.BinaryType:
		return "binary"
	case *arrow.LargeBinaryType:
		return "large_binary"
	case *arrow.Date32Type:
		return "date32:day"
	case *arrow.Date64Type:
		return "date64:ms"
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal:128:%d:%d", t.Precision, t.Scale)
	case *arrow.Decimal256Type:
		return fmt.Sprintf("decimal:256:%d:%d", t.Precision, t.Scale)
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return "timestamp:" + unit(t.Unit) + ":" + tz
	case *arrow.Time32Type:
		return "time32:" + unit(t.Unit)
	case *arrow.Time64Type:
		return "time64:" + unit(t.Unit)
	case *arrow.DurationType:
		return "duration:" + unit(t.Unit)
	case *arrow.StructType:
		return "struct"
	case *arrow.ListType:
		if _, ok := t.Elem().(*arrow.StructType); ok {
			return "list.struct"
		}
		return "list"
	case *arrow.LargeListType:
		if _, ok := t.Elem().(*arrow.StructType); ok {
			return "large_list.struct"
		}
		return "large_list"
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list:%s:%d", testLogicalType(t.Elem()), t.Len())
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary:%d", t.ByteWidth)
	}
	return dt.Name()
}

func testFields(s *arrow.Schema) []*filepb.Field {
	var out []*filepb.Field
	var add func(f arrow.Field, parent int32)
	add = func(f arrow.Field, parent int32) {
		pf := &filepb.Field{Name: f.Name, Id: int32(len(out)), ParentId: parent, LogicalType: testLogicalType(f.Type), Nullable: f.Nullable}
		out = append(out, pf)
		switch t := f.Type.(type) {
		case *arrow.StructType:
			pf.Type = filepb.Field_PARENT
			for _, c := range t.Fields() {
				add(c, pf.Id)
			}
		case *arrow.ListType:
			pf.Type = filepb.Field_REPEATED
			add(t.ElemField(), pf.Id)
		case *arrow.LargeListType:
			pf.Type = filepb.Field_REPEATED
			add(t.ElemField(), pf.Id)
		default:
			pf.Type = filepb.Field_LEAF
		}
	}
	for _, f := range s.Fields() {
		add(f, -1)
	}
	return out
}

// writeTestDataset writes recs with the Writer into <root>/<name>.lance as a
// one-fragment dataset and returns the data file's size.
func writeTestDataset(t testing.TB, root, name string, recs []arrow.RecordBatch, opts WriterOptions) int64 {
	t.Helper()
	fields := testFields(recs[0].Schema())
	dir := filepath.Join(root, name+".lance")
	for _, d := range []string{"data", "_versions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, fields, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	fname := "0000test.lance"
	if keep := os.Getenv("LANCE_TEST_KEEP"); keep != "" {
		_ = os.WriteFile(filepath.Join(keep, name+".lance"), buf.Bytes(), 0o644)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", fname), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	df := &tablepb.DataFile{Path: fname, FileMajorVersion: 2, FileMinorVersion: 1, FileSizeBytes: uint64(buf.Len())}
	col := int32(0)
	hasKids := map[int32]bool{}
	for _, f := range fields {
		hasKids[f.ParentId] = true
	}
	for _, f := range fields {
		if !hasKids[f.Id] {
			df.Fields = append(df.Fields, f.Id)
			df.ColumnIndices = append(df.ColumnIndices, col)
			col++
		}
	}
	zero := uint32(0)
	m := &tablepb.Manifest{
		Fields:        fields,
		Fragments:     []*tablepb.DataFragment{{Id: 0, Files: []*tablepb.DataFile{df}, PhysicalRows: rows}},
		Version:       1,
		WriterVersion: &tablepb.Manifest_WriterVersion{Library: "lance", Version: "8.0.0"},
		Timestamp:     timestamppb.New(time.Now()),
		MaxFragmentId: &zero,
		DataFormat:    &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.1"},
	}
	mb, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	out = binary.LittleEndian.AppendUint32(out, uint32(len(mb)))
	out = append(out, mb...)
	out = binary.LittleEndian.AppendUint64(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 2)
	out = append(out, "LANC"...)
	if err := os.WriteFile(filepath.Join(dir, "_versions", fmt.Sprintf("%020d.manifest", ^uint64(0)-1)), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(buf.Len())
}

const oracleScript = `
import { createRequire } from "module";
import fs from "fs";
const [,, pkg, root, name, out, where] = process.argv;
const require = createRequire(pkg);
const lancedb = require("@lancedb/lancedb");
const db = await lancedb.connect(root);
const tbl = await db.openTable(name);
const count = await tbl.countRows(where || undefined);
let q = tbl.query();
if (where) q = q.where(where);
const inner = await q.nativeExecute();
let i = 0;
for (let b = await inner.next(); b; b = await inner.next()) fs.writeFileSync(out + "." + (i++), b);
console.log(JSON.stringify({count, batches: i}));
`

func oraclePkg(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	pkg := filepath.Join(filepath.Dir(file), "..", "oracle", "package.json")
	if _, err := os.Stat(filepath.Join(filepath.Dir(pkg), "node_modules", "@lancedb", "lancedb")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("LanceDB oracle not installed: %v", err)
		}
		t.Skip("LanceDB oracle not installed (cd lance/oracle && npm ci)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found")
	}
	return pkg
}

// oracleRead reads <root>/<name>.lance with LanceDB, returning its row count
// for where and the scanned rows as one table per batch.
func oracleRead(t testing.TB, root, name, where string) (int64, []arrow.RecordBatch) {
	t.Helper()
	pkg := oraclePkg(t)
	tmp := t.TempDir()
	script := filepath.Join(tmp, "read.mjs")
	if err := os.WriteFile(script, []byte(oracleScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	cmd := exec.Command("node", script, pkg, root, name, out, where)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("LanceDB read failed: %v\n%s", err, stderr.String())
	}
	var r struct{ Count, Batches int64 }
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("oracle output %q: %v", res, err)
	}
	var recs []arrow.RecordBatch
	for i := int64(0); i < r.Batches; i++ {
		b, err := os.ReadFile(fmt.Sprintf("%s.%d", out, i))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(b, []byte("ARROW1")) {
			fr, err := ipc.NewFileReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < fr.NumRecords(); j++ {
				rec, err := fr.Record(j)
				if err != nil {
					t.Fatal(err)
				}
				rec.Retain()
				recs = append(recs, rec)
			}
			fr.Close()
			continue
		}
		rd, err := ipc.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for rd.Next() {
			rec := rd.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		if rd.Err() != nil {
			t.Fatal(rd.Err())
		}
		rd.Release()
	}
	return r.Count, recs
}

func concatColumn(t testing.TB, recs []arrow.RecordBatch, name string) arrow.Array {
	t.Helper()
	var parts []arrow.Array
	for _, r := range recs {
		idx := r.Schema().FieldIndices(name)
		if len(idx) == 0 {
			t.Fatalf("column %q missing from LanceDB's result %s", name, r.Schema())
		}
		parts = append(parts, r.Column(idx[0]))
	}
	if len(parts) == 0 {
		return nil
	}
	a, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// assertOracleEqual checks that LanceDB reads back exactly want.
func assertOracleEqual(t *testing.T, root, name string, want []arrow.RecordBatch) {
	t.Helper()
	var rows int64
	for _, r := range want {
		rows += r.NumRows()
	}
	count, got := oracleRead(t, root, name, "")
	if count != rows {
		t.Fatalf("LanceDB countRows = %d, want %d", count, rows)
	}
	for i, f := range want[0].Schema().Fields() {
		var parts []arrow.Array
		for _, r := range want {
			parts = append(parts, r.Column(i))
		}
		exp, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		act := concatColumn(t, got, f.Name)
		if act == nil {
			t.Fatalf("%s: no rows from LanceDB", f.Name)
		}
		if !arrow.TypeEqual(exp.DataType(), act.DataType()) {
			t.Errorf("%s: LanceDB type %s, wrote %s", f.Name, act.DataType(), exp.DataType())
			continue
		}
		if !array.Equal(exp, act) {
			t.Errorf("%s: LanceDB read differs from what was written\n%s", f.Name, firstDiff(exp, act))
		}
	}
}

func firstDiff(a, b arrow.Array) string {
	if a.Len() != b.Len() {
		return fmt.Sprintf("len %d vs %d", a.Len(), b.Len())
	}
	for i := 0; i < a.Len(); i++ {
		if !array.SliceEqual(a, int64(i), int64(i+1), b, int64(i), int64(i+1)) {
			sa, sb := a.ValueStr(i), b.ValueStr(i)
			return fmt.Sprintf("row %d: wrote %s, read %s", i, trunc(sa), trunc(sb))
		}
	}
	return "?"
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return strings.TrimSpace(s)
}
