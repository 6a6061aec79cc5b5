// The change feed through the JavaScript SDK's getChangeFeedIterator: latest
// version from the beginning, now, a point in time and a continuation, for
// the whole container, a feed range and a partition key; 304 when idle; and
// all versions and deletes, including deletes by time to live.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ChangeFeedMode, ChangeFeedPolicy, ChangeFeedRetentionTimeSpan, ChangeFeedStartFrom, PartitionKeyDefinitionVersion, StatusCodes } from "@azure/cosmos";
import { newClient, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsfeed") }));
});
after(async () => {
  await db.delete();
});

// allVersions is the container option the all-versions-and-deletes mode needs.
const allVersions = { changeFeedPolicy: new ChangeFeedPolicy(ChangeFeedRetentionTimeSpan.fromMinutes(60)) };

async function newContainer(extra = {}) {
  const { container } = await db.containers.create({ id: uniqueId("feed"), partitionKey: { paths: ["/pk"] }, ...extra });
  return container;
}

/**
 * Reads pages until the iterator answers 304 and returns the items, the last
 * continuation token and the last response.
 */
async function drain(iterator) {
  const items = [];
  for (let i = 0; i < 1000; i++) {
    const res = await iterator.readNext();
    assert.ok(res.continuationToken, "every response carries a continuation token");
    if (res.statusCode === StatusCodes.NotModified) {
      assert.equal(res.result.length, 0, "a 304 has no items");
      return { items, token: res.continuationToken, last: res };
    }
    assert.equal(res.statusCode, StatusCodes.Ok);
    items.push(...res.result);
  }
  throw new Error("the change feed never answered 304");
}

const names = (items) => items.map((it) => `${it.id}@${it.v}`);

test("latest version: beginning, now, time and continuation", async () => {
  const container = await newContainer();
  await container.items.upsert({ id: "a1", pk: "a", v: 1 });
  await container.items.upsert({ id: "b1", pk: "b", v: 1 });
  await container.items.upsert({ id: "a2", pk: "a", v: 1 });

  const fromStart = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }));
  assert.deepEqual(names(fromStart.items), ["a1@1", "b1@1", "a2@1"]);
  for (const it of fromStart.items) {
    assert.ok(it._lsn > 0 && it._etag && it._ts > 0, `${it.id} carries _lsn, _etag and _ts`);
  }

  const [range] = await container.getFeedRanges();
  const byRange = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) }));
  assert.deepEqual(names(byRange.items), ["a1@1", "b1@1", "a2@1"], "feed range");

  const byKey = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning("a") }));
  assert.deepEqual(names(byKey.items), ["a1@1", "a2@1"], "partition key a");

  const now = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now() });
  const idle = await now.readNext();
  assert.equal(idle.statusCode, StatusCodes.NotModified, "start from now: nothing yet");

  // _ts has whole seconds: wait past the second of the earlier writes.
  await sleep(1100);
  const since = new Date();
  await container.items.upsert({ id: "a1", pk: "a", v: 2 });
  await container.items.upsert({ id: "c1", pk: "c", v: 1 });
  await container.items.upsert({ id: "a1", pk: "a", v: 3 });

  assert.deepEqual(names((await drain(now)).items), ["c1@1", "a1@3"], "from now: each changed item once, latest version");
  const fromTime = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Time(since) }));
  assert.deepEqual(names(fromTime.items), ["c1@1", "a1@3"], "from a point in time");
  const resumed = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(fromStart.token) }));
  assert.deepEqual(names(resumed.items), ["c1@1", "a1@3"], "from the continuation");
  const resumedKey = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(byKey.token) }));
  assert.deepEqual(names(resumedKey.items), ["a1@3"], "partition key a from its continuation");

  // Idle again: 304, and the continuation still resumes at the same point.
  const again = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Continuation(resumed.token) }));
  assert.deepEqual(again.items, []);
  assert.equal(again.last.statusCode, StatusCodes.NotModified);
});

test("latest version: pages of maxItemCount", async () => {
  const container = await newContainer();
  for (let i = 0; i < 7; i++) {
    await container.items.create({ id: `i${i}`, pk: `p${i % 3}`, v: 1 });
  }
  const iterator = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 3 });
  const sizes = [];
  for (;;) {
    const res = await iterator.readNext();
    if (res.statusCode === StatusCodes.NotModified) break;
    sizes.push(res.result.length);
  }
  assert.deepEqual(sizes, [3, 3, 1]);
});

test("all versions and deletes: needs the container's changeFeedPolicy", async () => {
  const container = await newContainer();
  const iterator = container.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Now(),
    changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes,
  });
  await assert.rejects(iterator.readNext(), (err) => {
    assert.equal(err.code, 400);
    assert.match(err.message, /changeFeedPolicy/);
    return true;
  });
  const { resource } = await container.read();
  assert.equal(resource.changeFeedPolicy, undefined);
  const logged = await newContainer(allVersions);
  assert.equal((await logged.read()).resource.changeFeedPolicy.retentionDuration, 60);
});

test("all versions and deletes: creates, replaces and deletes with metadata", async () => {
  const container = await newContainer(allVersions);
  const iterator = container.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Now(),
    changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes,
  });
  assert.equal((await iterator.readNext()).statusCode, StatusCodes.NotModified);
  await container.items.create({ id: "x", pk: "p", v: 1 });
  await container.items.upsert({ id: "x", pk: "p", v: 2 });
  await container.item("x", "p").delete();
  await container.items.create({ id: "x", pk: "p", v: 3 });

  const { items } = await drain(iterator);
  assert.deepEqual(items.map((r) => r.metadata.operationType), ["create", "replace", "delete", "create"]);
  const [created, replaced, deleted, recreated] = items;
  assert.equal(created.current.v, 1);
  assert.equal(replaced.current.v, 2);
  assert.equal(replaced.metadata.previousImageLSN, created.metadata.lsn);
  assert.ok(replaced.metadata.lsn > created.metadata.lsn);
  assert.equal(deleted.metadata.id, "x");
  assert.deepEqual(deleted.metadata.partitionKey, { pk: "p" });
  assert.equal(deleted.metadata.timeToLiveExpired, false);
  assert.equal(deleted.previous.v, 2, "the delete carries the deleted version");
  assert.equal(recreated.current.v, 3);
  for (const r of items) {
    assert.ok(r.metadata.crts > 0 && r.metadata.lsn > 0, "crts and lsn on every record");
  }
});

test("all versions and deletes: expiry by time to live is a delete flagged timeToLiveExpired", async () => {
  // 3 s leaves at least 2 s (_ts has whole seconds) to see the item before
  // it expires, however slow the machine.
  const container = await newContainer({ defaultTtl: 3, ...allVersions });
  const iterator = container.items.getChangeFeedIterator({
    changeFeedStartFrom: ChangeFeedStartFrom.Now(),
    changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes,
  });
  await iterator.readNext();
  await container.items.create({ id: "short", pk: "p" });
  await container.items.create({ id: "forever", pk: "p", ttl: -1 });
  const latest = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }));
  assert.deepEqual(latest.items.map((it) => it.id), ["short", "forever"]);

  // The item is gone from reads within 4 s; the sweeper deletes it for real
  // and logs the delete soon after.
  await sleep(4100);
  assert.equal((await container.item("short", "p").read()).statusCode, StatusCodes.NotFound);
  const afterExpiry = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning() }));
  assert.deepEqual(afterExpiry.items.map((it) => it.id), ["forever"], "latest version leaves expired items out");
  const records = [];
  for (let i = 0; i < 50 && !records.some((r) => r.metadata.operationType === "delete"); i++) {
    records.push(...(await drain(iterator)).items);
    await sleep(100);
  }
  assert.deepEqual(records.map((r) => `${r.metadata.operationType}:${r.current?.id ?? r.metadata.id}`), ["create:short", "create:forever", "delete:short"]);
  assert.equal(records[2].metadata.timeToLiveExpired, true);
});

test("all versions and deletes: refuses to start from the beginning, as the service does", async () => {
  const container = await newContainer({ ...allVersions, throughput: 20000 });
  await container.items.create({ id: "x", pk: "p" });
  const [range] = await container.getFeedRanges();
  for (const [what, from] of [
    ["the container", ChangeFeedStartFrom.Beginning()],
    ["a feed range", ChangeFeedStartFrom.Beginning(range)],
    ["a partition key", ChangeFeedStartFrom.Beginning("p")],
  ]) {
    const iterator = container.items.getChangeFeedIterator({ changeFeedStartFrom: from, changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes });
    await assert.rejects(iterator.readNext(), (err) => {
      assert.equal(err.code, 400, what);
      assert.match(err.message, /You must read the change feed from within the retention period\./, what);
      return true;
    });
  }
  // From now it serves.
  const now = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Now(), changeFeedMode: ChangeFeedMode.AllVersionsAndDeletes });
  assert.equal((await now.readNext()).statusCode, StatusCodes.NotModified);
});

test("latest version by feed range: each range its own changes, the container's ranges breadth first", async () => {
  const container = await newContainer({ throughput: 18000 });
  for (let i = 0; i < 30; i++) await container.items.create({ id: `i${i}`, pk: `p${i}` });
  const ranges = await container.getFeedRanges();
  assert.equal(ranges.length, 3);
  const seen = new Set();
  for (const range of ranges) {
    const { items } = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) }));
    assert.ok(items.length > 0, "every range holds some of 30 keys");
    for (const it of items) {
      assert.ok(!seen.has(it.id), `${it.id} in two ranges`);
      seen.add(it.id);
    }
  }
  assert.equal(seen.size, 30);

  // Over the whole container, one page per range in turn.
  const iterator = container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 1 });
  const rangeIds = [];
  for (let i = 0; i < 3; i++) {
    const res = await iterator.readNext();
    rangeIds.push(res.headers["x-ms-documentdb-partitionkeyrangeid"]);
  }
  assert.equal(new Set(rangeIds).size, 3, `pages from ranges ${rangeIds}`);
});

test("latest version by feed range on a V1 container: its ranges are cut in the V1 hash space, each item in the range of its V1 key", async () => {
  const { container } = await db.containers.create({
    id: uniqueId("feedv1"),
    partitionKey: { paths: ["/name"], version: PartitionKeyDefinitionVersion.V1 },
    throughput: 21000,
  });
  const names = ["sample1", "sample2", "sample3", "sample4"];
  for (let i = 0; i < 5; i++) for (const name of names) await container.items.create({ id: `${name}-${i}`, name });
  const ranges = await container.getFeedRanges();
  // The service's four V1 ranges: the 32-bit hash space in equal slices.
  assert.deepEqual(
    ranges.map((r) => [r.minInclusive, r.maxExclusive]),
    [["", "05C1CFFFFFFFF8"], ["05C1CFFFFFFFF8", "05C1DFFFFFFFF8"], ["05C1DFFFFFFFF8", "05C1E7FFFFFFFA"], ["05C1E7FFFFFFFA", "FF"]],
  );
  // V1 hashes: sample3 867163591 and sample2 1333683568 fall in the first
  // two ranges, sample4 and sample1 (above 3.2e9) in the last.
  const want = [["sample3"], ["sample2"], [], ["sample1", "sample4"]];
  for (const [i, range] of ranges.entries()) {
    const { items } = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(range) }));
    assert.deepEqual([...new Set(items.map((it) => it.name))].sort(), want[i], `range ${i}`);
    assert.equal(items.length, 5 * want[i].length, `range ${i}`);
  }
  // Routed by partition key, the SDK's V1 hash finds each item.
  for (const name of names) {
    const { resources } = await container.items.query("SELECT * FROM c", { partitionKey: name }).fetchAll();
    assert.equal(resources.length, 5, name);
    const { items } = await drain(container.items.getChangeFeedIterator({ changeFeedStartFrom: ChangeFeedStartFrom.Beginning(name) }));
    assert.equal(items.length, 5, name);
  }
  const { resources: all } = await container.items.query("SELECT VALUE COUNT(1) FROM c").fetchAll();
  assert.deepEqual(all, [20]);
});
