// LanceDB appends in a loop through mvq's REST namespace (managed
// versioning: every commit is a version/create), for the concurrent-writer
// test (service/race_e2e_test.go) and the benchmarks that drive LanceDB
// commits (service/lance_bench_test.go). Prints one JSON object on stdout.
//
//   node race.mjs appends URL TOKEN NS TABLE FROM COUNT BATCH
//       COUNT appends of BATCH rows each, ids FROM, FROM+1, ...; each add
//       is awaited before the next. Prints {acked: [[from, to], ...],
//       failed: [{from, to, error}], versions: [...], ms: [...]}: the id
//       ranges whose add LanceDB reported done, the ones it threw on (with
//       its message), the version each acknowledged add produced and how
//       long each add took.
//
//   node race.mjs fill URL TOKEN NS TABLE FROM TO BATCH
//       creates NS (when missing) and TABLE with rows FROM..TO, BATCH rows
//       per commit (the first creates the table, the others are adds), so
//       a large table never sits in node's memory at once. Prints {count,
//       version}.
//
// Rows have the shape of namespace.mjs's: id, lang, body, and an
// 384-dimensional float32 vector (namespace.mjs's shape).
import * as lancedb from "@lancedb/lancedb";
import { Float32, Field, FixedSizeList, Int64, Schema, Utf8 } from "apache-arrow";

const [cmd, uri, token, ns, name, a, b, c] = process.argv.slice(2);
const db = await lancedb.connectNamespace("rest", {
  uri,
  headers: token ? { Authorization: `Bearer ${token}` } : {},
});

const schema = new Schema([
  new Field("id", new Int64(), true),
  new Field("lang", new Utf8(), true),
  new Field("body", new Utf8(), true),
  new Field("vec", new FixedSizeList(384, new Field("item", new Float32(), true)), true),
]);

function rows(from, to) {
  const out = [];
  for (let i = from; i < to; i++) {
    const words = [];
    for (let w = 0; w < 3 + (i % 9); w++) words.push(`w${i}_${w}`);
    const vec = [];
    for (let k = 0; k < 384; k++) vec.push(i * 384 + k);
    out.push({ id: BigInt(i), lang: i % 5 === 4 ? "de" : "en", body: words.join(" "), vec });
  }
  return out;
}

const out = {};
switch (cmd) {
  case "appends": {
    const from = +a, count = +b, batch = +c;
    const t = await db.openTable(name, [ns]);
    out.acked = [];
    out.failed = [];
    out.versions = [];
    out.ms = [];
    for (let k = 0; k < count; k++) {
      const lo = from + k * batch, hi = lo + batch;
      const t0 = performance.now();
      try {
        const r = await t.add(rows(lo, hi));
        out.ms.push(performance.now() - t0);
        out.acked.push([lo, hi]);
        out.versions.push(r.version);
      } catch (e) {
        out.failed.push({ from: lo, to: hi, error: String(e && e.message ? e.message : e) });
      }
    }
    break;
  }
  case "fill": {
    const from = +a, to = +b, batch = +c;
    try {
      await db.createNamespace([ns]);
    } catch (e) {
      // It exists already.
    }
    let t;
    for (let lo = from; lo < to; lo += batch) {
      const rs = rows(lo, Math.min(lo + batch, to));
      if (!t) t = await db.createTable(name, rs, [ns], { schema });
      else await t.add(rs);
    }
    out.count = await t.countRows();
    out.version = await t.version();
    break;
  }
  default:
    throw new Error(`unknown command ${cmd}`);
}
process.stdout.write(JSON.stringify(out) + "\n");
