import * as lancedb from "@lancedb/lancedb";
const db = await lancedb.connectNamespace("rest", { uri: process.env.MVQ_URL });
const step = async (name, fn) => { try { const r = await fn(); console.log("OK", name, r ?? ""); } catch (e) { console.log("ERR", name, e.message.slice(0, 400)); } };
await step("createNamespace", () => db.createNamespace(["kb"]));
let t;
await step("createTable", async () => { t = await db.createTable({ name: "docs", namespace: ["kb"], data: [{ id: 1, text: "a" }, { id: 2, text: "b" }] }); });
if (!t) await step("createTable2", async () => { t = await db.createTable("docs", [{ id: 1, text: "a" }, { id: 2, text: "b" }], ["kb"]); });
if (t) {
  await step("count", () => t.countRows());
  await step("add", () => t.add([{ id: 3, text: "c" }]));
  await step("count", () => t.countRows());
  await step("versions", async () => (await t.listVersions()).map(v => v.version).join(","));
  await step("delete", () => t.delete("id = 1"));
  await step("count", () => t.countRows());
  await step("checkout", async () => { await t.checkout(1); return await t.countRows(); });
}
