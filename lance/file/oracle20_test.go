package file

// A stand-in for the shared LanceDB oracle harness (lance/internal/oracle)
// until it lands: node scripts that make LanceDB write and read datasets.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const oracleScript20 = `
import * as lancedb from "@lancedb/lancedb";
import fs from "node:fs";
import path from "node:path";
const [cmd, dir, file, ver, mode] = process.argv.slice(2);
const db = await lancedb.connect(path.dirname(dir));
const name = path.basename(dir).replace(/\.lance$/, "");
// Arrow IPC goes to and from the native layer untouched: the JS Arrow
// library (apache-arrow 18) cannot parse large lists, and the JS sanitizer
// refuses large strings.
if (cmd === "write") {
  const buf = fs.readFileSync(file);
  const opts = ver ? { new_table_data_storage_version: ver } : {};
  if ((mode || "create") === "create") {
    await db.inner.createTable(name, buf, "create", [], opts);
  } else {
    const tbl = await db.openTable(name);
    await tbl.inner.add(buf, mode);
  }
} else if (cmd === "read") {
  const tbl = await db.openTable(name);
  const it = await tbl.query().nativeExecute();
  let i = 0;
  for (let b = await it.next(); b; b = await it.next()) {
    fs.writeFileSync(file + "." + String(i++).padStart(6, "0"), b);
  }
} else if (cmd === "count") {
  const tbl = await db.openTable(name);
  console.log(await tbl.countRows(ver || undefined));
}
`

type oracle20 struct {
	dir string
	env []string // added to node's environment
}

// needOracle20 skips the test when node or LanceDB's node modules are absent
// (under CI=true it fails instead).
func needOracle20(t testing.TB) *oracle20 {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	mods := filepath.Join(filepath.Dir(self), "..", "oracle", "node_modules")
	_, errNode := exec.LookPath("node")
	_, errMods := os.Stat(filepath.Join(mods, "@lancedb", "lancedb"))
	if errNode != nil || errMods != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("LanceDB oracle unavailable: node %v, modules %v", errNode, errMods)
		}
		t.Skip("LanceDB oracle unavailable (run npm ci in lance/oracle)")
	}
	dir := t.TempDir()
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "o.mjs"), []byte(oracleScript20), 0o644); err != nil {
		t.Fatal(err)
	}
	return &oracle20{dir: dir}
}

func (o *oracle20) run(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("node", append([]string{filepath.Join(o.dir, "o.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), o.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// write makes LanceDB write rec as dataset dir (a .lance folder) with the
// given storage version; mode is create, append or overwrite.
func (o *oracle20) write(t testing.TB, dir string, rec arrow.RecordBatch, version, mode string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in.arrow")
	writeIPC20(t, in, rec)
	o.run(t, "write", dir, in, version, mode)
}

// read returns LanceDB's query().toArrow() of the dataset as one record
// batch (taken from the native layer as Arrow IPC, batch by batch).
func (o *oracle20) read(t testing.TB, dir string) arrow.RecordBatch {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	o.run(t, "read", dir, out)
	parts, err := filepath.Glob(out + ".*")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(parts)
	var sc *arrow.Schema
	var recs []arrow.RecordBatch
	for _, p := range parts {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(raw, []byte("ARROW1")) {
			fr, err := ipc.NewFileReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			sc = fr.Schema()
			for i := 0; i < fr.NumRecords(); i++ {
				rec, err := fr.RecordBatch(i)
				if err != nil {
					t.Fatal(err)
				}
				rec.Retain()
				recs = append(recs, rec)
			}
			fr.Close()
			continue
		}
		r, err := ipc.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		sc = r.Schema()
		for r.Next() {
			rec := r.RecordBatch()
			rec.Retain()
			recs = append(recs, rec)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if sc == nil {
		t.Fatalf("LanceDB returned no batches for %s", dir)
	}
	tbl := array.NewTableFromRecords(sc, recs)
	defer tbl.Release()
	for _, rec := range recs {
		rec.Release()
	}
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		chunks := tbl.Column(i).Data().Chunks()
		if len(chunks) == 0 {
			b := array.NewBuilder(memory.DefaultAllocator, tbl.Schema().Field(i).Type)
			cols[i] = b.NewArray()
			b.Release()
			continue
		}
		c, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(tbl.Schema(), cols, tbl.NumRows())
}

// writeIPC20 writes rec as an Arrow IPC file (the format LanceDB's native
// layer takes).
func writeIPC20(t testing.TB, path string, rec arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(rec.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
