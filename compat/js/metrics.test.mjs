// /metrics after work done through the JavaScript SDK, on a server of its
// own (ORRERY_METRICS_ENDPOINT: metrics on, no TTL sweeper, a 2 s script
// budget), so that other test files' scripts do not add to its counts:
// script runs by kind and outcome, a change-feed reader's lag, and a TTL
// backlog.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ChangeFeedStartFrom, CosmosClient, StatusCodes, TriggerOperation, TriggerType } from "@azure/cosmos";
import { expectCosmosError, uniqueId } from "./orrery.mjs";

const endpoint = process.env.ORRERY_METRICS_ENDPOINT;
const key = process.env.ORRERY_KEY;
if (!endpoint || !key) {
  throw new Error("ORRERY_METRICS_ENDPOINT and ORRERY_KEY are not set: run these tests through `go test ./compat`");
}
const client = new CosmosClient({ endpoint, key });
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsmetrics") }));
});
after(async () => {
  await db.delete();
});

/** Scrapes /metrics with the master key; returns samples by series. */
async function scrape() {
  const res = await fetch(new URL("/metrics", endpoint), { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200, "GET /metrics with the master key");
  const samples = new Map();
  for (const line of (await res.text()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    samples.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return samples;
}

const series = (name, labels) =>
  `${name}{${Object.keys(labels).sort().map((k) => `${k}="${labels[k]}"`).join(",")}}`;

test("script runs are counted by kind and outcome", async () => {
  const { container } = await db.containers.create({ id: uniqueId("scripts"), partitionKey: { paths: ["/pk"] } });
  const sprocs = container.scripts.storedProcedures;
  await sprocs.create({ id: "ok", body: "function () { getContext().getResponse().setBody(1); }" });
  await sprocs.create({ id: "throws", body: "function () { throw new Error('no'); }" });
  await sprocs.create({ id: "loops", body: "function () { while (true) {} }" });
  await container.scripts.triggers.create({
    id: "stamp", triggerType: TriggerType.Pre, triggerOperation: TriggerOperation.All,
    body: "function () { var r = getContext().getRequest(); var d = r.getBody(); d.stamped = true; r.setBody(d); }",
  });
  await container.scripts.userDefinedFunctions.create({ id: "double", body: "function (x) { return 2 * x; }" });

  await container.scripts.storedProcedure("ok").execute("a", []);
  const thrown = await expectCosmosError(() => container.scripts.storedProcedure("throws").execute("a", []));
  assert.equal(thrown.code, StatusCodes.BadRequest);
  const stopped = await expectCosmosError(() => container.scripts.storedProcedure("loops").execute("a", []));
  assert.equal(stopped.code, StatusCodes.RequestTimeout);
  const { resource } = await container.items.create({ id: "1", pk: "a", n: 21 }, { preTriggerInclude: ["stamp"] });
  assert.equal(resource.stamped, true);
  const { resources } = await container.items
    .query("SELECT VALUE udf.double(c.n) FROM c", { partitionKey: "a" })
    .fetchAll();
  assert.deepEqual(resources, [42]);

  const m = await scrape();
  for (const [labels, want] of [
    [{ kind: "sproc", outcome: "ok" }, 1],
    [{ kind: "sproc", outcome: "error" }, 1],
    [{ kind: "sproc", outcome: "timeout" }, 1],
    [{ kind: "trigger", outcome: "ok" }, 1],
    [{ kind: "udf", outcome: "ok" }, 1],
  ]) {
    const s = series("orrery_script_runs_total", labels);
    assert.equal(m.get(s), want, s);
  }
  assert.equal(m.get("orrery_scripts_running"), 0);
});

test("a change-feed reader's lag is the changes it has not read", async () => {
  const { container } = await db.containers.create({ id: uniqueId("feed"), partitionKey: { paths: ["/pk"] } });
  for (const id of ["a", "b", "c"]) await container.items.create({ id, pk: id });
  const labels = { container: container.id, database: db.id };
  assert.equal((await scrape()).has(series("orrery_changefeed_lag_changes", labels)), false,
    "no lag before any reader read");

  const iterator = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() });
  let read = 0;
  for (;;) {
    const res = await iterator.readNext();
    if (res.statusCode === StatusCodes.NotModified) break;
    read += res.result.length;
  }
  assert.equal(read, 3);
  let m = await scrape();
  assert.equal(m.get(series("orrery_changefeed_lag_changes", labels)), 0, "caught up");

  await container.items.upsert({ id: "a", pk: "a", v: 2 });
  await container.items.create({ id: "d", pk: "d" });
  m = await scrape();
  assert.equal(m.get(series("orrery_changefeed_lag_changes", labels)), 2, "two changes not read");
  assert.ok(m.get(series("orrery_changefeed_lag_seconds", labels)) >= 0);

  const res = await iterator.readNext();
  assert.equal(res.result.length, 2);
  m = await scrape();
  assert.equal(m.get(series("orrery_changefeed_lag_changes", labels)), 0, "read again: caught up");
});

test("items past their time to live are the TTL backlog while no sweep runs", async () => {
  const { container } = await db.containers.create({ id: uniqueId("ttl"), partitionKey: { paths: ["/pk"] }, defaultTtl: 1 });
  for (const id of ["x", "y", "z"]) await container.items.create({ id, pk: id });
  await container.items.create({ id: "keep", pk: "k", ttl: -1 });
  const backlog = series("orrery_ttl_backlog_items", { container: container.id, database: db.id });
  // They expire a second or two after their _ts; with the sweeper off the
  // backlog then stays.
  let n;
  for (let i = 0; i < 100 && n !== 3; i++) {
    await sleep(200);
    n = (await scrape()).get(backlog);
  }
  assert.equal(n, 3);
  const { resources } = await container.items.readAll().fetchAll();
  assert.deepEqual(resources.map((it) => it.id), ["keep"], "expired items are hidden already");
});
