import * as lancedb from "@lancedb/lancedb";
const db = await lancedb.connectNamespace("rest", { uri: process.env.MVQ_URL });
const t = await db.openTable("articles", ["docs"]);
console.log("count", await t.countRows());
try { await t.delete("id = 1"); console.log("deleted"); } catch (e) { console.log("ERR delete", e.message.slice(0, 500)); }
