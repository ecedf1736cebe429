// Times LanceDB's own reads of a dataset for the Go read benchmark:
//   node bench_read.mjs <oracle_dir> <dataset_dir> <iterations> <take_offsets_json_file>
// prints JSON {full_ms, proj_ms, take_ms}: the median time of
// query().toArrow() (every column), query().select(["id","text"]).toArrow()
// and takeOffsets(offsets).toArrow(), after one warm-up run of each.
import { createRequire } from "node:module";
import * as fs from "node:fs";
import * as path from "node:path";

const [oracleDir, dir, iterArg, takeFile] = process.argv.slice(2);
const require = createRequire(path.join(oracleDir, "package.json"));
const lancedb = require("@lancedb/lancedb");
const iters = Number(iterArg);
const offsets = JSON.parse(fs.readFileSync(takeFile, "utf8"));

const db = await lancedb.connect(path.dirname(dir));
const table = await db.openTable(path.basename(dir).replace(/\.lance$/, ""));

async function time(fn) {
  await fn();
  const ms = [];
  for (let i = 0; i < iters; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ms.sort((a, b) => a - b);
  return ms[Math.floor(ms.length / 2)];
}

const out = {
  full_ms: await time(async () => {
    const t = await table.query().toArrow();
    if (t.numRows === 0) throw new Error("empty");
  }),
  proj_ms: await time(async () => {
    await table.query().select(["id", "text"]).toArrow();
  }),
  take_ms: await time(async () => {
    const t = await table.takeOffsets(offsets).toArrow();
    if (t.numRows === 0) throw new Error("take returned no rows");
  }),
};
console.log(JSON.stringify(out));
