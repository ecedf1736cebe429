// LanceDB's REST namespace client against a running mvq API, for the Go
// end-to-end tests (service/lancedb_rest_test.go). Each command prints one
// JSON object on stdout.
//
//   node namespace.mjs create URL TOKEN NS TABLE FROM TO   create NS, a table of rows FROM..TO
//   node namespace.mjs add URL TOKEN NS TABLE FROM TO      append rows FROM..TO
//   node namespace.mjs read URL TOKEN NS TABLE [WHERE]     count and ids (sorted) of a table or view
//   node namespace.mjs versions URL TOKEN NS TABLE V       versions, and the count at version V
//   node namespace.mjs delete URL TOKEN NS TABLE WHERE     delete the rows WHERE matches
//   node namespace.mjs update URL TOKEN NS TABLE WHERE BODY  set body on the rows WHERE matches
//   node namespace.mjs upsert URL TOKEN NS TABLE FROM TO   mergeInsert on id of rows FROM..TO
//   node namespace.mjs index URL TOKEN NS TABLE            a scalar index on id; its indices
//   node namespace.mjs search URL TOKEN NS TABLE ID K      vectorSearch on vec with row ID's vector: the K nearest ids
//   node namespace.mjs addcol URL TOKEN NS TABLE NAME SQL  addColumns: NAME computed by SQL (a new data file per fragment)
//   node namespace.mjs altercol URL TOKEN NS TABLE NAME TYPE  alterColumns: NAME cast to TYPE, float32 or float64 (rewritten in new files)
//   node namespace.mjs dropcol URL TOKEN NS TABLE NAME     dropColumns
//
// Rows have the shape of the Go tests' doc(i): id, lang, body, and a
// 384-dimensional float32 vector (row i's is i*384 + k, k = 0..383).
import * as lancedb from "@lancedb/lancedb";
import { Float32, Field, FixedSizeList, Float64, Int64, Schema, Utf8 } from "apache-arrow";

const [cmd, uri, token, ns, name, a, b] = process.argv.slice(2);
const db = await lancedb.connectNamespace("rest", {
  uri,
  headers: token ? { Authorization: `Bearer ${token}` } : {},
});

const DIM = 384;
const schema = new Schema([
  new Field("id", new Int64(), true),
  new Field("lang", new Utf8(), true),
  new Field("body", new Utf8(), true),
  new Field("vec", new FixedSizeList(DIM, new Field("item", new Float32(), true)), true),
]);

function vector(i) {
  const vec = [];
  for (let k = 0; k < DIM; k++) vec.push(i * DIM + k);
  return vec;
}

function rows(from, to) {
  const out = [];
  for (let i = from; i < to; i++) {
    const words = [];
    for (let w = 0; w < 3 + (i % 9); w++) words.push(`w${i}_${w}`);
    out.push({ id: BigInt(i), lang: i % 5 === 4 ? "de" : "en", body: words.join(" "), vec: vector(i) });
  }
  return out;
}

const out = {};
switch (cmd) {
  case "create": {
    await db.createNamespace([ns]);
    const t = await db.createTable(name, rows(+a, +b), [ns], { schema });
    out.count = await t.countRows();
    break;
  }
  case "add": {
    const t = await db.openTable(name, [ns]);
    out.version = (await t.add(rows(+a, +b))).version;
    out.count = await t.countRows();
    break;
  }
  case "read": {
    const t = await db.openTable(name, [ns]);
    out.count = await t.countRows(a || undefined);
    let q = t.query();
    if (a) q = q.where(a);
    const got = await q.toArray();
    out.ids = got.map((r) => Number(r.id)).sort((x, y) => x - y);
    out.version = await t.version();
    break;
  }
  case "versions": {
    const t = await db.openTable(name, [ns]);
    out.versions = (await t.listVersions()).map((v) => v.version);
    await t.checkout(+a);
    out.count = await t.countRows();
    break;
  }
  case "delete": {
    const t = await db.openTable(name, [ns]);
    await t.delete(a);
    out.count = await t.countRows();
    out.version = await t.version();
    break;
  }
  case "update": {
    const t = await db.openTable(name, [ns]);
    await t.update({ where: a, values: { body: b } });
    out.count = await t.countRows();
    out.version = await t.version();
    break;
  }
  case "upsert": {
    const t = await db.openTable(name, [ns]);
    const rs = rows(+a, +b).map((r) => ({ ...r, body: r.body + " upserted" }));
    await t.mergeInsert("id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(rs);
    out.count = await t.countRows();
    out.version = await t.version();
    break;
  }
  case "index": {
    const t = await db.openTable(name, [ns]);
    await t.createIndex("id");
    out.indices = (await t.listIndices()).map((i) => i.name);
    out.version = await t.version();
    break;
  }
  case "search": {
    const t = await db.openTable(name, [ns]);
    const got = await t.vectorSearch(vector(+a)).column("vec").limit(+b).toArray();
    out.ids = got.map((r) => Number(r.id)).sort((x, y) => x - y);
    break;
  }
  case "addcol": {
    const t = await db.openTable(name, [ns]);
    out.version = (await t.addColumns([{ name: a, valueSql: b }])).version;
    out.columns = (await t.schema()).fields.map((f) => f.name);
    break;
  }
  case "altercol": {
    const t = await db.openTable(name, [ns]);
    const types = { float32: new Float32(), float64: new Float64() };
    if (!types[b]) throw new Error(`altercol: type ${b}`);
    out.version = (await t.alterColumns([{ path: a, dataType: types[b] }])).version;
    out.type = String((await t.schema()).fields.find((f) => f.name === a).type);
    break;
  }
  case "dropcol": {
    const t = await db.openTable(name, [ns]);
    out.version = (await t.dropColumns([a])).version;
    out.columns = (await t.schema()).fields.map((f) => f.name);
    break;
  }
  default:
    throw new Error(`unknown command ${cmd}`);
}
process.stdout.write(JSON.stringify(out) + "\n");
