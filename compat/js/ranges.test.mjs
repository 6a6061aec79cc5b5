// Containers with several partition key ranges through the JavaScript SDK:
// feed ranges follow the throughput a container is created with, the change
// feed and queries fan out over the ranges, and the change feed iterator
// keeps going across splits (the SDK handles the parent's 410/1002 itself).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ChangeFeedStartFrom, StatusCodes } from "@azure/cosmos";
import { newClient, splitRange, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsranges") }));
});
after(async () => {
  await db.delete();
});

async function newContainer(throughput) {
  const { container } = await db.containers.create(
    { id: uniqueId("ranges"), partitionKey: { paths: ["/pk"], version: 2 } },
    { offerThroughput: throughput },
  );
  return container;
}

/** Reads pages until the iterator answers 304; returns the items and token. */
async function drain(iterator) {
  const items = [];
  for (let i = 0; i < 1000; i++) {
    const res = await iterator.readNext();
    if (res.statusCode === StatusCodes.NotModified) {
      return { items, token: res.continuationToken };
    }
    assert.equal(res.statusCode, StatusCodes.Ok);
    items.push(...res.result);
  }
  throw new Error("the change feed never answered 304");
}

/** Fails unless every key's last version seen is its last version written. */
function assertLatest(seen, written, what) {
  const last = new Map();
  for (const it of seen) {
    const prev = last.get(it.id);
    assert.ok(prev === undefined || prev < it.v, `${what}: ${it.id} went from version ${prev} to ${it.v}`);
    last.set(it.id, it.v);
  }
  for (const [id, v] of written) {
    assert.equal(last.get(id), v, `${what}: ${id}'s last version`);
  }
}

test("feed ranges follow throughput; change feed and queries cover every range once", async () => {
  const container = await newContainer(24000);
  const ranges = await container.getFeedRanges();
  assert.equal(ranges.length, 4, "24,000 RU/s make four ranges (one per 6,000 RU/s above 10,000)");
  const docs = [];
  for (let i = 0; i < 60; i++) {
    docs.push({ id: `d${i}`, pk: `p${i % 30}`, n: i });
  }
  await Promise.all(docs.map((d) => container.items.create(d)));

  const seen = new Map();
  for (const range of ranges) {
    const { items } = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) }));
    for (const it of items) {
      seen.set(it.id, (seen.get(it.id) ?? 0) + 1);
    }
  }
  assert.equal(seen.size, docs.length, "every item in some range's change feed");
  assert.ok([...seen.values()].every((n) => n === 1), "no item in two ranges' change feeds");

  const { items: whole } = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }));
  assert.equal(whole.length, docs.length, "the container's change feed spans its ranges");

  const { resources: all } = await container.items.query("SELECT * FROM c WHERE c.n >= 0").fetchAll();
  assert.equal(all.length, docs.length, "a cross-partition query reads every range once");

  // Queries whose results a pipeline would have to merge come out whole.
  const run = async (query, options = {}) => (await container.items.query(query, options).fetchAll()).resources;
  const ns = docs.map((d) => d.n);
  assert.deepEqual((await run("SELECT VALUE c.n FROM c ORDER BY c.n", { maxItemCount: 7 })), ns, "ORDER BY, paged");
  assert.deepEqual(await run("SELECT VALUE COUNT(1) FROM c"), [docs.length], "COUNT");
  assert.deepEqual(await run({ query: "SELECT TOP 3 VALUE c.n FROM c WHERE c.n < @lim ORDER BY c.n DESC", parameters: [{ name: "@lim", value: 50 }] }), [49, 48, 47], "TOP with a parameter");
  assert.deepEqual((await run("SELECT DISTINCT VALUE c.n % 3 FROM c")).sort(), [0, 1, 2], "DISTINCT");
});

test("the change feed iterator continues across splits under writes", async () => {
  const container = await newContainer(12000);
  assert.equal((await container.getFeedRanges()).length, 2);
  const written = new Map();
  const seq = async (n) => {
    for (let i = 0; i < n; i++) {
      const id = `k${i % 25}`;
      const v = (written.get(id) ?? 0) + 1;
      written.set(id, v);
      await container.items.upsert({ id, pk: id, v });
    }
  };

  await seq(50);
  const iterator = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 10 });
  const seen = [];
  const first = await drain(iterator);
  seen.push(...first.items);
  assertLatest(seen, written, "before the split");
  const before = first.token;

  // Split range 0 while a read of the iterator is in flight and writes go on.
  const reading = iterator.readNext();
  const [, right] = await splitRange(db.id, container.id, "0");
  await seq(40);
  const mid = await reading;
  seen.push(...(mid.result ?? []));
  seen.push(...(await drain(iterator)).items);
  assertLatest(seen, written, "after splitting range 0");

  // And one of its children.
  await splitRange(db.id, container.id, right.id);
  await seq(40);
  seen.push(...(await drain(iterator)).items);
  assertLatest(seen, written, "after splitting a child");
  assert.equal((await container.getFeedRanges()).length, 4);

  // A continuation taken before the splits resumes on the children.
  const resumed = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(before) }));
  assertLatest(resumed.items, written, "from the continuation taken before the splits");
  assert.equal(resumed.items.length, written.size, "each changed item once, as its latest version");
});
