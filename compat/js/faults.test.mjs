// What the JavaScript SDK does with each fault Orrery injects (the rules of
// /_admin/faults): each case installs a rule that fires once (or on every
// attempt, to count the SDK's attempts) on one kind of operation of the
// test's own container, runs the operation, and checks what the SDK ended
// with, how many attempts the rule faulted, and whether a write whose reply
// was lost was applied. The printed table is the JavaScript column of the
// README's fault table.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ChangeFeedStartFrom } from "@azure/cosmos";
import { faultsAdmin, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

/**
 * What an SDK call ended with: "ok", "status[/substatus]", "conn" for a
 * transport error, or "error" for an Error that lost the status (the SDK's
 * transactional batch rethrows every failure as a plain Error).
 */
function outcome(err) {
  if (!err) return "ok";
  const code = err.code ?? err.statusCode ?? err.cause?.code;
  if (typeof code === "number") {
    const sub = err.substatus ?? err.headers?.["x-ms-substatus"];
    return sub && Number(sub) !== 0 ? `${code}/${sub}` : `${code}`;
  }
  return typeof code === "string" ? "conn" : "error";
}

// [type, op, expected outcome, applied, extra result fields, every attempt?, attempts faulted]
const cases = [
  ["TooManyRequests", "ReadItem", "ok", false, { retryAfter: "300ms" }],
  ["TooManyRequests", "CreateItem", "ok", true],
  ["TooManyRequests", "ReadItem", "429/3200", false, { retryAfter: "10ms" }, true, 10],
  ["TooManyRequests", "QueryItem", "ok", false],
  ["TooManyRequests", "BatchItem", "ok", true],
  ["TooManyRequests", "BulkItem", "ok", true],
  ["TooManyRequests", "ChangeFeedItem", "ok", false],
  ["TooManyRequests", "ExecuteStoredProcedure", "ok", true],
  ["Timeout", "ReadItem", "408", false],
  ["Timeout", "CreateItem", "408", false],
  ["ServiceUnavailable", "ReadItem", "ok", false],
  ["ServiceUnavailable", "CreateItem", "503", false],
  ["InternalServerError", "ReadItem", "500", false],
  ["InternalServerError", "CreateItem", "500", false],
  ["RetryWith", "ReadItem", "449", false],
  ["RetryWith", "CreateItem", "449", false],
  ["PartitionIsGone", "ReadItem", "ok", false],
  ["PartitionIsGone", "CreateItem", "ok", true],
  ["PartitionIsGone", "QueryItem", "ok", false],
  ["PartitionIsGone", "QueryAllRanges", "ok", false],
  ["PartitionIsGone", "ChangeFeedItem", "ok", false],
  ["PartitionIsSplitting", "ReadItem", "410/1007", false],
  ["ResponseDelay", "ReadItem", "ok", false, { delay: "300ms" }],
  ["ConnectionReset", "ReadItem", "ok", false],
  ["ConnectionReset", "CreateItem", "conn", false],
  ["AppliedThenLost", "CreateItem", "conn", true],
  ["AppliedThenLost", "CreateItem", "503", true, { lost: "ServiceUnavailable" }],
  ["AppliedThenLost", "CreateItem", "408", true, { lost: "Timeout" }],
  ["AppliedThenLost", "BatchItem", "error", true, { lost: "ServiceUnavailable" }],
  ["AppliedThenLost", "ExecuteStoredProcedure", "503", true, { lost: "ServiceUnavailable" }],
  ["LostBeforeApply", "CreateItem", "conn", false],
  ["LostBeforeApply", "CreateItem", "503", false, { lost: "ServiceUnavailable" }],
];

test("the JavaScript SDK under each fault, once", async () => {
  const { database } = await client.databases.createIfNotExists({ id: uniqueId("faults-js") });
  const table = [];
  const failures = [];
  try {
    let n = 0;
    for (const [type, op, want, wantApplied, extra = {}, always = false, wantHits = 1] of cases) {
      // A container per case: a split leaves it with more ranges.
      const { container } = await database.containers.create({ id: uniqueId("c"), partitionKey: { paths: ["/pk"] } });
      await container.items.upsert({ id: "seed", pk: "p" });
      await container.scripts.storedProcedures.create({
        id: "put",
        body: "function (doc) { var c = getContext().getCollection(); if (!c.createDocument(c.getSelfLink(), doc, function (err) { if (err) throw err; getContext().getResponse().setBody('ok'); })) throw new Error('not accepted'); }",
      });
      const id = `w${++n}`;
      const ruleOp = { BulkItem: "BatchItem", QueryAllRanges: "QueryItem" }[op] ?? op;
      const rule = `js-${n}`;
      const probe = `js-${n}-pkranges`;
      await faultsAdmin("POST", undefined, [
        { id: rule, times: always ? 0 : 1, condition: { container: container.id, operations: [ruleOp] }, result: { type, ...extra } },
        { id: probe, condition: { container: container.id, operations: ["MetadataPartitionKeyRanges"] }, result: { type: "ResponseDelay", delay: "1us" } },
      ]);
      const start = Date.now();
      let err;
      try {
        switch (op) {
          case "ReadItem":
            await container.item("seed", "p").read().then((r) => {
              if (r.statusCode !== 200) throw Object.assign(new Error("read"), { code: r.statusCode });
            });
            break;
          case "CreateItem":
            await container.items.create({ id, pk: "p" });
            break;
          case "QueryItem":
            await container.items.query("SELECT * FROM c", { partitionKey: "p" }).fetchAll();
            break;
          case "QueryAllRanges":
            await container.items.query("SELECT * FROM c").fetchAll();
            break;
          case "BatchItem": {
            const res = await container.items.batch([{ operationType: "Create", resourceBody: { id, pk: "p" } }], "p");
            if (res.code >= 300) throw Object.assign(new Error("batch"), { code: res.code });
            break;
          }
          case "BulkItem": {
            const res = await container.items.executeBulkOperations([{ operationType: "Create", partitionKey: "p", resourceBody: { id, pk: "p" } }]);
            const r = res[0];
            if (r.error) throw r.error;
            if (r.response && r.response.statusCode >= 300) throw Object.assign(new Error("bulk"), { code: r.response.statusCode });
            break;
          }
          case "ChangeFeedItem": {
            const it = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
            await it.readNext();
            break;
          }
          case "ExecuteStoredProcedure":
            await container.scripts.storedProcedure("put").execute("p", [{ id, pk: "p" }]);
            break;
        }
      } catch (e) {
        err = e;
      }
      const elapsed = Date.now() - start;
      const got = outcome(err);
      const st = await faultsAdmin("GET", rule);
      const refreshes = (await faultsAdmin("GET", probe)).hits;
      await faultsAdmin("DELETE", rule);
      await faultsAdmin("DELETE", probe);
      let applied = false;
      if (!["ReadItem", "QueryItem", "QueryAllRanges", "ChangeFeedItem"].includes(op)) {
        const r = await container.item(id, "p").read();
        applied = r.statusCode === 200;
      }
      const lost = extra.lost ?? "";
      table.push(`${type.padEnd(22)} ${`${op} ${lost}`.padEnd(34)} ${got.padEnd(9)} attempts faulted=${st.hits} applied=${String(applied).padEnd(5)} pkranges reads=${refreshes} ${elapsed}ms${err && got === "conn" ? ` (${err.code ?? err.message})` : ""}`);
      if (got !== want) failures.push(`${type} ${op} ${lost}: ended with ${got} (${err?.message?.split("\n")[0]}), want ${want}`);
      if (applied !== wantApplied) failures.push(`${type} ${op} ${lost}: applied ${applied}, want ${wantApplied}`);
      if (st.hits !== wantHits) failures.push(`${type} ${op} ${lost}: the rule fired ${st.hits} times, want ${wantHits}`);
      if (type === "TooManyRequests" && got === "ok" && extra.retryAfter === "300ms" && elapsed < 290) failures.push(`${type} ${op}: retried after ${elapsed}ms, before the retry-after`);
      if (type === "PartitionIsGone" && op === "ChangeFeedItem" && got === "ok" && refreshes === 0) failures.push(`${type} ${op}: went on after a split without reading the partition key ranges again`);
    }
  } finally {
    console.log(`the JavaScript SDK under each fault, once:\n${table.join("\n")}`);
    await database.delete();
  }
  assert.deepEqual(failures, []);
});
