// The LanceDB oracle: a small command-line front to @lancedb/lancedb (pinned
// in package.json) that the Go tests drive, so that what the Go Lance package
// reads and writes is checked against the real client.
//
//   node oracle.mjs write    <dataset_dir> <in.arrows> [--version 2.0|2.1] [--mode create|append|overwrite] [--option key=value ...]
//   node oracle.mjs read     <dataset_dir> <out.arrows> [--columns a,b] [--where SQL] [--limit N] [--at VERSION] [--row-id] [--js]
//   node oracle.mjs count    <dataset_dir> [--where SQL] [--at VERSION]
//   node oracle.mjs update   <dataset_dir> [--where SQL] --set col=SQLEXPR [--set ...]
//   node oracle.mjs delete   <dataset_dir> --where SQL
//   node oracle.mjs search   <dataset_dir> <out.arrows> --column v --vector '[..]' --k N [--distance l2|cosine|dot] [--columns a,b] [--where SQL]
//   node oracle.mjs versions <dataset_dir>
//   node oracle.mjs add-columns  <dataset_dir> --set name=SQLEXPR [--set ...] | --field name=int64|float64|utf8   (--field: a column of nulls, no data)
//   node oracle.mjs drop-columns <dataset_dir> --columns a,b
//   node oracle.mjs alter-columns <dataset_dir> --set path=TYPE [--set ...]   (a new data type: int64, float64, …; rename:NAME renames)
//   node oracle.mjs optimize     <dataset_dir> [--cleanup]   (compaction; keeps old versions unless --cleanup; prints the stats JSON)
//   node oracle.mjs clone        <dataset_dir> <source_dataset_dir> [--at VERSION]   (a shallow clone: base paths)
//   node oracle.mjs create-index <dataset_dir> --column c [--type btree|bitmap|ivf_pq]   (prints listIndices JSON)
//   node oracle.mjs indices      <dataset_dir>   (listIndices JSON, each with its indexStats)
//
// write --option sets LanceDB storage options of a new table, e.g.
// new_table_enable_v2_manifest_paths=false (V1 manifest names) or
// new_table_enable_stable_row_ids=true.
// write --mode append --hold (and delete --hold) opens the table, prints
// "opened <version>" and waits for a line on stdin before writing, so a test
// can commit another version in between (LanceDB must then rebase on it).
//
// dataset_dir is the absolute path of a `.lance` folder; the oracle connects
// to its parent folder and opens the table named after it (LanceDB may add a
// `__manifest` folder to that parent).
//
// Arrow data crosses as bytes, never through the JavaScript Arrow library
// where that can be avoided, because apache-arrow (JS) rewrites some types:
//   - write: an input in the Arrow IPC *file* format ("ARROW1" magic) goes to
//     LanceDB's native core untouched; an IPC *stream* input is decoded by the
//     JS library and handed to the public createTable/add API (subject to
//     that library's conversions).
//   - read/search: LanceDB's native core returns each batch as an IPC file;
//     their messages are copied byte for byte into one IPC stream (read --js
//     takes the public toArrow() path through the JS library instead).
// Errors go to stderr with exit status 1; results go to stdout or the named file.

import * as fs from "node:fs";
import * as path from "node:path";
import * as lancedb from "@lancedb/lancedb";
import { createRequire } from "node:module";
import * as flatbuffers from "flatbuffers";
import { Message } from "apache-arrow/fb/message";
import { MessageHeader } from "apache-arrow/fb/message-header";

// LanceDB loads apache-arrow's CommonJS build; tables handed to it must come
// from that same instance (the ES module build's classes fail its checks).
const arrow = createRequire(import.meta.url)("apache-arrow");

function usage(msg) {
  throw new Error(`${msg}\nusage: oracle.mjs write|read|count|update|delete|search|versions <dataset_dir> ...`);
}

// parseArgs splits positional arguments from --flags; flags named in
// `repeated` collect every value, --row-id style booleans take none.
function parseArgs(argv) {
  const booleans = new Set(["row-id", "js", "hold", "cleanup"]);
  const pos = [];
  const flags = { set: [], option: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) {
      pos.push(a);
      continue;
    }
    const name = a.slice(2);
    if (booleans.has(name)) {
      flags[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) usage(`flag ${a} needs a value`);
    const v = argv[++i];
    if (name === "set" || name === "option") (flags[name] ??= []).push(v);
    else flags[name] = v;
  }
  return { pos, flags };
}

async function openDataset(dir) {
  if (!path.isAbsolute(dir)) usage(`dataset_dir must be absolute: ${dir}`);
  const base = path.basename(dir);
  if (!base.endsWith(".lance")) usage(`dataset_dir must end in .lance: ${dir}`);
  const db = await lancedb.connect(path.dirname(dir));
  return { db, name: base.slice(0, -".lance".length) };
}

async function openTable(dir, at) {
  const { db, name } = await openDataset(dir);
  const t = await db.openTable(name);
  if (at !== undefined) await t.checkout(Number(at));
  return t;
}

const IPC_MAGIC = "ARROW1";

function isIPCFile(buf) {
  return buf.length >= 8 && buf.subarray(0, 6).toString("latin1") === IPC_MAGIC;
}

// ipcMessages lists the encapsulated messages of an IPC file or stream buffer
// as {header, bytes} in order, stopping at the end-of-stream marker.
function ipcMessages(buf) {
  let pos = 0;
  if (isIPCFile(buf)) {
    // The magic is padded to the writer's alignment (64 bytes from the
    // native core) with zeros before the first message.
    pos = 8;
    while (pos + 8 <= buf.length && buf.readUInt32LE(pos) === 0 && buf.readUInt32LE(pos + 4) === 0) pos += 8;
  }
  const out = [];
  while (pos + 4 <= buf.length) {
    const start = pos;
    let metaLen = buf.readInt32LE(pos);
    pos += 4;
    if (metaLen === -1) {
      if (pos + 4 > buf.length) break;
      metaLen = buf.readInt32LE(pos);
      pos += 4;
    }
    if (metaLen === 0) break;
    if (metaLen < 0 || pos + metaLen > buf.length) throw new Error("corrupt IPC message length");
    const bb = new flatbuffers.ByteBuffer(new Uint8Array(buf.buffer, buf.byteOffset + pos, metaLen));
    const msg = Message.getRootAsMessage(bb);
    const bodyLen = Number(msg.bodyLength());
    const end = pos + metaLen + bodyLen;
    if (end > buf.length) throw new Error("corrupt IPC message body");
    out.push({ header: msg.headerType(), bytes: buf.subarray(start, end) });
    pos = end;
  }
  return out;
}

const EOS = Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);

// writeStream joins the batches of the IPC buffers into one IPC stream file:
// the first schema message, then every dictionary and record batch message.
// With no buffers it writes the fallback schema (an IPC buffer) and no batch.
function writeStream(file, buffers, fallbackSchema) {
  const parts = [];
  let haveSchema = false;
  for (const buf of buffers) {
    for (const m of ipcMessages(buf)) {
      if (m.header === MessageHeader.Schema) {
        if (!haveSchema) parts.push(m.bytes);
        haveSchema = true;
      } else {
        parts.push(m.bytes);
      }
    }
  }
  if (!haveSchema) {
    const m = ipcMessages(fallbackSchema).find((m) => m.header === MessageHeader.Schema);
    if (!m) throw new Error("no schema in fallback buffer");
    parts.push(m.bytes);
  }
  parts.push(EOS);
  fs.writeFileSync(file, Buffer.concat(parts));
}

// drain collects every IPC buffer a native query returns.
async function drain(query) {
  const it = await query.nativeExecute();
  const bufs = [];
  for (let b = await it.next(); b; b = await it.next()) bufs.push(Buffer.from(b));
  return bufs;
}

// emptySchema is the IPC bytes of the schema a query's result has, for
// results without batches: the schema of the same projection over one row
// without the filter, or the table's schema when it has no rows.
async function emptySchema(table, columns, rowId) {
  let q = table.query().limit(1);
  if (columns) q = q.select(columns);
  if (rowId) q = q.withRowId();
  const bufs = await drain(q);
  if (bufs.length > 0) return bufs[0];
  const raw = Buffer.from(await table.inner.schema());
  if (!columns && !rowId) return raw;
  // An empty table: project its schema with the JS library (schema only,
  // no data crosses it).
  const schema = arrow.tableFromIPC(raw).schema;
  let fields = schema.fields;
  if (columns) {
    fields = columns.map((c) => {
      const f = schema.fields.find((f) => f.name === c);
      if (!f) throw new Error(`no column ${c}`);
      return f;
    });
  }
  if (rowId) fields = [...fields, new arrow.Field("_rowid", new arrow.Uint64(), false)];
  return Buffer.from(arrow.tableToIPC(new arrow.Table(new arrow.Schema(fields, schema.metadata)), "stream"));
}

async function cmdWrite(pos, flags) {
  const [dir, input] = pos;
  if (!dir || !input) usage("write needs <dataset_dir> <in.arrows>");
  const mode = flags.mode ?? "create";
  if (!["create", "append", "overwrite"].includes(mode)) usage(`bad --mode ${mode}`);
  const buf = fs.readFileSync(input);
  const { db, name } = await openDataset(dir);
  const storage = {};
  if (flags.version) storage.new_table_data_storage_version = flags.version;
  for (const o of flags.option) {
    const i = o.indexOf("=");
    if (i <= 0) usage(`bad --option ${o}`);
    storage[o.slice(0, i)] = o.slice(i + 1);
  }
  const raw = isIPCFile(buf);
  if (mode === "append") {
    const t = await db.openTable(name);
    if (flags.hold) {
      process.stdout.write(`opened ${await t.version()}\n`);
      await waitLine();
    }
    if (raw) await t.inner.add(buf, "append");
    else await t.add(arrow.tableFromIPC(buf), { mode: "append" });
  } else if (raw) {
    await db.inner.createTable(name, buf, mode, [], storage);
  } else {
    await db.createTable(name, arrow.tableFromIPC(buf), {
      mode,
      dataStorageVersion: flags.version,
    });
  }
}

// waitLine resolves when a line (or the end) arrives on stdin.
function waitLine() {
  return new Promise((resolve) => {
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      process.stdin.pause();
      resolve();
    };
    process.stdin.on("data", (d) => {
      if (d.includes(10)) finish();
    });
    process.stdin.on("end", finish);
  });
}

async function cmdRead(pos, flags) {
  const [dir, out] = pos;
  if (!dir || !out) usage("read needs <dataset_dir> <out.arrows>");
  const t = await openTable(dir, flags.at);
  let q = t.query();
  const columns = flags.columns ? flags.columns.split(",") : undefined;
  if (columns) q = q.select(columns);
  if (flags.where) q = q.where(flags.where);
  if (flags.limit) q = q.limit(Number(flags.limit));
  if (flags["row-id"]) q = q.withRowId();
  if (flags.js) {
    // The public path: toArrow() decodes with the JS library, which then
    // encodes the stream again.
    fs.writeFileSync(out, Buffer.from(arrow.tableToIPC(await q.toArrow(), "stream")));
    return;
  }
  const bufs = await drain(q);
  writeStream(out, bufs, bufs.length ? undefined : await emptySchema(t, columns, flags["row-id"]));
}

async function cmdCount(pos, flags) {
  const [dir] = pos;
  if (!dir) usage("count needs <dataset_dir>");
  const t = await openTable(dir, flags.at);
  process.stdout.write(`${await t.countRows(flags.where)}\n`);
}

async function cmdUpdate(pos, flags) {
  const [dir] = pos;
  if (!dir || flags.set.length === 0) usage("update needs <dataset_dir> --set col=SQLEXPR");
  const valuesSql = {};
  for (const s of flags.set) {
    const i = s.indexOf("=");
    if (i <= 0) usage(`bad --set ${s}`);
    valuesSql[s.slice(0, i)] = s.slice(i + 1);
  }
  const t = await openTable(dir);
  const opts = { valuesSql };
  if (flags.where) opts.where = flags.where;
  const r = await t.update(opts);
  process.stdout.write(`${JSON.stringify(r)}\n`);
}

async function cmdDelete(pos, flags) {
  const [dir] = pos;
  if (!dir || !flags.where) usage("delete needs <dataset_dir> --where SQL");
  const t = await openTable(dir);
  if (flags.hold) {
    process.stdout.write(`opened ${await t.version()}\n`);
    await waitLine();
  }
  const r = await t.delete(flags.where);
  process.stdout.write(`${JSON.stringify(r)}\n`);
}

async function cmdSearch(pos, flags) {
  const [dir, out] = pos;
  if (!dir || !out || !flags.vector) usage("search needs <dataset_dir> <out.arrows> --vector '[..]'");
  const t = await openTable(dir, flags.at);
  const vec = JSON.parse(flags.vector);
  let q = t.vectorSearch(vec);
  if (flags.column) q = q.column(flags.column);
  if (flags.distance) q = q.distanceType(flags.distance);
  if (flags.where) q = q.where(flags.where);
  if (flags.columns) q = q.select(flags.columns.split(","));
  q = q.limit(Number(flags.k ?? 10));
  const bufs = await drain(q);
  if (bufs.length === 0) throw new Error("search returned no batches");
  writeStream(out, bufs);
}

async function cmdAddColumns(pos, flags) {
  const [dir] = pos;
  if (!dir || (flags.set.length === 0 && !flags.field)) usage("add-columns needs <dataset_dir> --set name=SQLEXPR or --field name=TYPE");
  let cols;
  if (flags.field) {
    // A column of nulls the schema gains without data (no data file).
    const [name, type] = flags.field.split("=");
    const types = { int64: new arrow.Int64(), float64: new arrow.Float64(), utf8: new arrow.Utf8() };
    if (!name || !types[type]) usage(`bad --field ${flags.field}`);
    cols = new arrow.Field(name, types[type], true);
  } else {
    cols = flags.set.map((s) => {
      const i = s.indexOf("=");
      if (i <= 0) usage(`bad --set ${s}`);
      return { name: s.slice(0, i), valueSql: s.slice(i + 1) };
    });
  }
  const t = await openTable(dir);
  process.stdout.write(`${JSON.stringify(await t.addColumns(cols))}\n`);
}

async function cmdDropColumns(pos, flags) {
  const [dir] = pos;
  if (!dir || !flags.columns) usage("drop-columns needs <dataset_dir> --columns a,b");
  const t = await openTable(dir);
  process.stdout.write(`${JSON.stringify(await t.dropColumns(flags.columns.split(",")))}\n`);
}

async function cmdAlterColumns(pos, flags) {
  const [dir] = pos;
  if (!dir || flags.set.length === 0) usage("alter-columns needs <dataset_dir> --set path=TYPE");
  const types = { int64: new arrow.Int64(), float64: new arrow.Float64(), int32: new arrow.Int32(), float32: new arrow.Float32() };
  const alts = flags.set.map((s) => {
    const i = s.indexOf("=");
    const v = s.slice(i + 1);
    if (i > 0 && v.startsWith("rename:") && v.length > 7) return { path: s.slice(0, i), rename: v.slice(7) };
    if (i <= 0 || !types[v]) usage(`bad --set ${s}`);
    return { path: s.slice(0, i), dataType: types[v] };
  });
  const t = await openTable(dir);
  process.stdout.write(`${JSON.stringify(await t.alterColumns(alts))}\n`);
}

async function cmdCreateIndex(pos, flags) {
  const [dir] = pos;
  if (!dir || !flags.column) usage("create-index needs <dataset_dir> --column c");
  const t = await openTable(dir);
  const configs = {
    btree: () => lancedb.Index.btree(),
    bitmap: () => lancedb.Index.bitmap(),
    ivf_pq: () => lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 2 }),
  };
  const make = configs[flags.type ?? "btree"];
  if (!make) usage(`bad --type ${flags.type}`);
  await t.createIndex(flags.column, { config: make() });
  process.stdout.write(`${JSON.stringify(await t.listIndices())}\n`);
}

async function cmdIndices(pos) {
  const [dir] = pos;
  if (!dir) usage("indices needs <dataset_dir>");
  const t = await openTable(dir);
  const out = [];
  for (const ix of await t.listIndices()) {
    out.push({ ...ix, stats: await t.indexStats(ix.name) });
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

async function cmdOptimize(pos, flags) {
  const [dir] = pos;
  if (!dir) usage("optimize needs <dataset_dir>");
  const t = await openTable(dir);
  // --cleanup: also remove every file older than now that the latest
  // version does not reference (old versions too), unverified ones included.
  const opts = flags.cleanup ? { cleanupOlderThan: new Date(), deleteUnverified: true } : undefined;
  const stats = await t.optimize(opts);
  process.stdout.write(`${JSON.stringify(stats, (k, v) => (typeof v === "bigint" ? Number(v) : v))}\n`);
}

async function cmdClone(pos, flags) {
  const [dir, source] = pos;
  if (!dir || !source || !path.isAbsolute(source)) usage("clone needs <dataset_dir> <absolute source_dataset_dir>");
  const { db, name } = await openDataset(dir);
  const opts = { isShallow: true };
  if (flags.at !== undefined) opts.sourceVersion = Number(flags.at);
  await db.cloneTable(name, source, opts);
}

async function cmdVersions(pos) {
  const [dir] = pos;
  if (!dir) usage("versions needs <dataset_dir>");
  const t = await openTable(dir);
  const vs = await t.listVersions();
  const out = vs.map((v) => ({
    version: Number(v.version),
    timestamp: new Date(v.timestamp).toISOString(),
    metadata: v.metadata ?? {},
  }));
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

const commands = {
  write: cmdWrite,
  read: cmdRead,
  count: cmdCount,
  update: cmdUpdate,
  delete: cmdDelete,
  search: cmdSearch,
  versions: cmdVersions,
  "add-columns": cmdAddColumns,
  "alter-columns": cmdAlterColumns,
  "drop-columns": cmdDropColumns,
  "create-index": cmdCreateIndex,
  indices: cmdIndices,
  clone: cmdClone,
  optimize: cmdOptimize,
};

async function main() {
  const [cmd, ...rest] = process.argv.slice(2);
  const fn = commands[cmd];
  if (!fn) usage(`unknown command ${cmd ?? "(none)"}`);
  const { pos, flags } = parseArgs(rest);
  await fn(pos, flags);
}

try {
  await main();
} catch (e) {
  process.stderr.write(`oracle: ${e?.stack ?? e}\n`);
  process.exit(1);
}
