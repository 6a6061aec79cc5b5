// Patch, transactional batch and bulk through the JavaScript SDK: the six
// patch operations (move included, which the Go SDK cannot send), conditional
// patch, batch all-or-nothing with 424s, and executeBulkOperations across
// partitions without a partition key header.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { expectCosmosError, newClient, quotedEtag, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;
let container;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jspatch") }));
  ({ container } = await db.containers.create({ id: "items", partitionKey: { paths: ["/pk"] } }));
});
after(async () => {
  await db.delete();
});

/** Returns the user properties of an item body, without system properties. */
function user(body) {
  const { _rid, _self, _etag, _ts, _attachments, ...rest } = body;
  return rest;
}

describe("patch", () => {
  test("all six operations in one patch, answered with the whole new item", async () => {
    const id = uniqueId("p");
    const created = await container.items.create({ id, pk: "a", price: 25.5, stock: 10, tags: ["board"], promo: "summer", old: { name: "x" } });
    const patched = await container.item(id, "a").patch([
      { op: "set", path: "/price", value: 22.5 },
      { op: "incr", path: "/stock", value: -3 },
      { op: "incr", path: "/rating", value: 4.5 },
      { op: "add", path: "/tags/0", value: "classic" },
      { op: "replace", path: "/old/name", value: "y" },
      { op: "remove", path: "/promo" },
      { op: "move", from: "/old", path: "/moved" },
    ]);
    assert.equal(patched.statusCode, 200);
    assert.match(patched.etag, quotedEtag);
    assert.notEqual(patched.etag, created.etag);
    assert.deepEqual(user(patched.resource), { id, pk: "a", price: 22.5, stock: 7, tags: ["classic", "board"], rating: 4.5, moved: { name: "y" } });
  });

  test("a condition that is false is a 412 and changes nothing", async () => {
    const id = uniqueId("p");
    const created = await container.items.create({ id, pk: "a", stock: 7 });
    const sell = (qty) =>
      container.item(id, "a").patch({ condition: `from c where c.stock >= ${qty}`, operations: [{ op: "incr", path: "/stock", value: -qty }] });
    const err = await expectCosmosError(() => sell(10));
    assert.equal(err.code, 412);
    assert.match(err.message, /One of the specified pre-condition is not met/);
    const read = await container.item(id, "a").read();
    assert.equal(read.etag, created.etag);
    const sold = await sell(5);
    assert.equal(sold.resource.stock, 2);
  });

  test("invalid patches are 400s naming the operation", async () => {
    const id = uniqueId("p");
    await container.items.create({ id, pk: "a", s: "x" });
    const cases = [
      [[{ op: "replace", path: "/missing", value: 1 }], /Operation\(1\): Node\(\/missing\) to be replaced is absent/],
      [[{ op: "set", path: "/s", value: 1 }, { op: "move", from: "/nope", path: "/t" }], /Operation\(2\): Node\(\/nope\) to be moved is absent/],
      [[{ op: "incr", path: "/s", value: 1 }], /incr can only add to a number/],
      [[{ op: "set", path: "/pk", value: "b" }], /partition key/],
      [Array.from({ length: 11 }, () => ({ op: "incr", path: "/n", value: 1 })), /can't exceed 10/],
    ];
    for (const [ops, message] of cases) {
      const err = await expectCosmosError(() => container.item(id, "a").patch(ops));
      assert.equal(err.code, 400, JSON.stringify(ops));
      assert.match(err.message, message);
    }
  });
});

describe("transactional batch", () => {
  test("reads see the batch's earlier writes", async () => {
    const id = uniqueId("b");
    const res = await container.items.batch(
      [
        { operationType: "Create", resourceBody: { id, pk: "a", n: 1 } },
        { operationType: "Patch", id, resourceBody: { operations: [{ op: "incr", path: "/n", value: 1 }] } },
        { operationType: "Read", id },
        { operationType: "Delete", id },
      ],
      "a",
    );
    assert.equal(res.code, 200);
    assert.deepEqual(res.result.map((r) => r.statusCode), [201, 200, 200, 204]);
    assert.equal(res.result[2].resourceBody.n, 2);
    assert.equal(res.result[3].resourceBody, undefined);
    assert.match(res.result[0].eTag, quotedEtag);
  });

  test("one failure fails all: its own status, 424 for the rest, nothing written", async () => {
    const id = uniqueId("b");
    await container.items.create({ id, pk: "a" });
    const fresh = uniqueId("b");
    const res = await container.items.batch(
      [
        { operationType: "Create", resourceBody: { id: fresh, pk: "a" } },
        { operationType: "Create", resourceBody: { id, pk: "a" } },
        { operationType: "Upsert", resourceBody: { id: uniqueId("b"), pk: "a" } },
      ],
      "a",
    );
    assert.equal(res.code, 207);
    assert.deepEqual(res.result.map((r) => r.statusCode), [424, 409, 424]);
    // The JavaScript SDK answers a read of a missing item with a 404
    // response rather than an error.
    const read = await container.item(fresh, "a").read();
    assert.equal(read.statusCode, 404);
  });
});

describe("bulk", () => {
  test("executeBulkOperations runs each operation on its own, across partitions", async () => {
    const a = uniqueId("k");
    const b = uniqueId("k");
    await container.items.create({ id: a, pk: "a", n: 1 });
    const results = await container.items.executeBulkOperations([
      { operationType: "Create", partitionKey: "b", resourceBody: { id: b, pk: "b" } },
      { operationType: "Create", partitionKey: "a", resourceBody: { id: a, pk: "a" } },
      { operationType: "Patch", id: a, partitionKey: "a", resourceBody: { operations: [{ op: "incr", path: "/n", value: 1 }] } },
      { operationType: "Read", id: b, partitionKey: "b" },
    ]);
    assert.equal(results.length, 4);
    assert.equal(results[0].response?.statusCode, 201);
    assert.equal(results[1].error?.code, 409);
    assert.equal(results[2].response?.statusCode, 200);
    assert.equal(results[3].response?.statusCode, 200);
    assert.equal((await container.item(a, "a").read()).resource.n, 2);
  });

  test("a request over the size limit is 413 with the service's message, in bulk and alone", async () => {
    // The service's words, in its gateway's format, which the SDK's own
    // suite looks for whole.
    const said = 'Message: {"Errors":["Request size is too large"]}\r\n';
    const value = "a".repeat(2_500_000);
    const [bulk] = await container.items.executeBulkOperations([
      { operationType: "Create", partitionKey: "big", resourceBody: { id: uniqueId("big"), pk: "big", value } },
    ]);
    assert.equal(bulk.error?.code, 413);
    assert.ok(bulk.error.message.includes(said), bulk.error.message);
    assert.ok(bulk.error.body);
    const alone = await expectCosmosError(() => container.items.create({ id: uniqueId("big"), pk: "big", value }));
    assert.equal(alone.code, 413);
    assert.ok(alone.message.includes(said), alone.message);
    // Under the limit, half the bulk body size a hundred times over is split
    // by the SDK and written whole.
    const half = "a".repeat(110_000);
    const many = await container.items.executeBulkOperations(
      Array.from({ length: 100 }, () => ({ operationType: "Create", partitionKey: "half", resourceBody: { id: uniqueId("h"), pk: "half", half } })),
    );
    assert.deepEqual([...new Set(many.map((r) => r.response?.statusCode ?? r.error?.code))], [201]);
  });

  test("continueOnError false: the first failure stops the request, 424 for the rest, nothing after it written", async () => {
    const dup = uniqueId("d");
    const later = [uniqueId("l"), uniqueId("l"), uniqueId("l")];
    const ops = [
      { operationType: "Create", resourceBody: { id: dup, pk: "s" } },
      { operationType: "Create", resourceBody: { id: dup, pk: "s" } },
      ...later.map((id) => ({ operationType: "Create", resourceBody: { id, pk: "s" } })),
    ];
    const stopped = await container.items.bulk(ops, { continueOnError: false });
    assert.deepEqual(stopped.map((r) => r.statusCode), [201, 409, 424, 424, 424]);
    for (const id of later) {
      assert.equal((await container.item(id, "s").read()).statusCode, 404);
    }
    // By default every operation runs.
    const all = await container.items.bulk(ops.slice(1));
    assert.deepEqual(all.map((r) => r.statusCode), [409, 201, 201, 201]);
  });

  test("hierarchical partition keys, more than 100 operations for one partition", async () => {
    const { container: h } = await db.containers.create({
      id: uniqueId("hier"),
      partitionKey: { paths: ["/tenant", "/user"], kind: "MultiHash", version: 2 },
    });
    const ops = [];
    for (let i = 0; i < 150; i++) {
      ops.push({ operationType: "Create", partitionKey: ["t", "u"], resourceBody: { id: `i${i}`, tenant: "t", user: "u" } });
    }
    ops.push({ operationType: "Read", id: "i7", partitionKey: ["t", "u"] });
    const results = await h.items.executeBulkOperations(ops);
    assert.equal(results.filter((r) => r.response?.statusCode === 201).length, 150);
    assert.equal(results[150].response?.statusCode, 200);
    const { resources } = await h.items.query("SELECT VALUE COUNT(1) FROM c", { partitionKey: ["t", "u"] }).fetchAll();
    assert.deepEqual(resources, [150]);
  });
});
