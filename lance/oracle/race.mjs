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
// Rows have the shape of namespace.mjs's: id, lang, body, and an
// 8-dimensional float32 vector.
import * as lancedb from "@lancedb/lancedb";

const [cmd, uri, token, ns, name, a, b, c] = process.argv.slice(2);
const db = await lancedb.connectNamespace("rest", {
  uri,
  headers: token ? { Authorization: `Bearer ${token}` } : {},
});

function rows(from, to) {
  const out = [];
  for (let i = from; i < to; i++) {
    const words = [];
    for (let w = 0; w < 3 + (i % 9); w++) words.push(`w${i}_${w}`);
    const vec = [];
    for (let k = 0; k < 8; k++) vec.push(i * 8 + k);
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
  default:
    throw new Error(`unknown command ${cmd}`);
}
process.stdout.write(JSON.stringify(out) + "\n");
