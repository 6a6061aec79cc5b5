// Partition key values through the JavaScript SDK: null and absent (None)
// values, numbers and booleans, nested paths, the SDK's default
// /_partitionKey container and hierarchical (MultiHash) keys.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { CosmosClient, HTTPMethod, PartitionKeyBuilder, PartitionKeyKind, ResourceType } from "@azure/cosmos";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

// The SDK's NonePartitionKeyType: an empty object names the "absent" key
// value, which the SDK sends as {} in the partition key header.
const NonePartitionKeyValue = {};

const client = newClient();
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jspk") }));
});
after(async () => {
  await db.delete();
});

/** Creates a container with the given partition key definition. */
async function newContainer(partitionKey) {
  const { container } = await db.containers.create({ id: uniqueId("c"), partitionKey });
  return container;
}

describe("single-path partition keys", () => {
  let c;
  before(async () => {
    c = await newContainer({ paths: ["/pk"] });
  });

  test("values of each JSON type address their own logical partition", async (t) => {
    // Each case creates the same id under a different key value: every one
    // is a distinct item, readable only with its own key.
    const id = uniqueId("typed");
    const cases = [
      { name: "string", body: { pk: "5" }, key: "5" },
      { name: "number", body: { pk: 5 }, key: 5 },
      { name: "fraction", body: { pk: -1.5 }, key: -1.5 },
      { name: "boolean true", body: { pk: true }, key: true },
      { name: "boolean false", body: { pk: false }, key: false },
      { name: "empty string", body: { pk: "" }, key: "" },
      { name: "non-ASCII string", body: { pk: "ünïcödé ✓ 日本語 🚀" }, key: "ünïcödé ✓ 日本語 🚀" },
      { name: "quotes and backslashes", body: { pk: 'q"uote\\back' }, key: 'q"uote\\back' },
      { name: "null", body: { pk: null }, key: null },
      { name: "absent (None)", body: {}, key: NonePartitionKeyValue },
    ];
    for (const tc of cases) {
      await t.test(`create ${tc.name}`, async () => {
        const created = await c.items.create({ id, ...tc.body, name: tc.name });
        assert.equal(created.statusCode, 201);
      });
    }
    for (const tc of cases) {
      await t.test(`read, replace and upsert ${tc.name}`, async () => {
        const read = await c.item(id, tc.key).read();
        assert.equal(read.statusCode, 200, `read with key ${JSON.stringify(tc.key)}`);
        assert.equal(read.resource.name, tc.name);
        assert.deepEqual(read.resource.pk, tc.body.pk);
        const replaced = await c.item(id, tc.key).replace({ id, ...tc.body, name: tc.name, v: 2 });
        assert.equal(replaced.resource.v, 2);
        const upserted = await c.items.upsert({ id, ...tc.body, name: tc.name, v: 3 });
        assert.equal(upserted.statusCode, 200, "upsert of an existing item replaces it");
        assert.equal((await c.item(id, tc.key).read()).resource.v, 3);
      });
    }
    await t.test("readAll with each key sees only its own item", async () => {
      for (const tc of cases) {
        const { resources } = await c.items.readAll({ partitionKey: tc.key }).fetchAll();
        assert.deepEqual(resources.map((d) => d.name), [tc.name], `readAll with key ${JSON.stringify(tc.key)}`);
      }
    });
    await t.test("delete each", async () => {
      for (const tc of cases) {
        const deleted = await c.item(id, tc.key).delete();
        assert.equal(deleted.statusCode, 204, `delete with key ${JSON.stringify(tc.key)}`);
      }
    });
  });

  test("null and None are different keys", async () => {
    const nullId = uniqueId("null");
    const noneId = uniqueId("none");
    await c.items.create({ id: nullId, pk: null });
    await c.items.create({ id: noneId });
    assert.equal((await c.item(nullId, NonePartitionKeyValue).read()).statusCode, 404);
    assert.equal((await c.item(noneId, null).read()).statusCode, 404);
    assert.equal((await c.item(nullId, null).read()).statusCode, 200);
    assert.equal((await c.item(noneId, NonePartitionKeyValue).read()).statusCode, 200);
    // An item reference without a key asks the SDK for the container's
    // undefined key, which is None.
    const noKey = await c.item(noneId).read();
    assert.equal(noKey.statusCode, 200);
    assert.equal(noKey.resource.id, noneId);
  });

  test("a body whose key differs from the addressed item's key is rejected with 400", async () => {
    const id = uniqueId("moved");
    await c.items.create({ id, pk: "a" });
    const err = await expectCosmosError(() => c.item(id, "a").replace({ id, pk: "b" }));
    assert.equal(err.code, 400);
    assert.equal((await c.item(id, "a").read()).resource.pk, "a");
  });

  test("the key must be given exactly: a string is not the number it spells", async () => {
    const id = uniqueId("exact");
    await c.items.create({ id, pk: 42 });
    assert.equal((await c.item(id, "42").read()).statusCode, 404);
    assert.equal((await c.item(id, 42).read()).statusCode, 200);
  });
});

describe("nested and default paths", () => {
  test("a nested path takes its value from inside the item", async () => {
    const c = await newContainer({ paths: ["/address/city"] });
    const id = uniqueId("nested");
    await c.items.create({ id, address: { city: "Oslo", zip: "0150" } });
    assert.equal((await c.item(id, "Oslo").read()).resource.address.zip, "0150");
    await c.items.create({ id, address: {} });
    assert.equal((await c.item(id, NonePartitionKeyValue).read()).statusCode, 200);
    assert.equal((await c.item(id, "Bergen").read()).statusCode, 404);
  });

  test("the id itself as the partition key", async () => {
    const c = await newContainer({ paths: ["/id"] });
    const id = uniqueId("self");
    await c.items.create({ id, v: 1 });
    assert.equal((await c.item(id, id).read()).resource.v, 1);
    assert.equal((await c.item(id).read()).statusCode, 404, "without a key the SDK sends the None key");
  });

  test("a container created without a partition key gets /_partitionKey", async () => {
    const { container: c, resource } = await db.containers.create({ id: uniqueId("nopk") });
    assert.deepEqual(resource.partitionKey.paths, ["/_partitionKey"]);
    const bare = uniqueId("bare");
    await c.items.create({ id: bare, v: 1 });
    assert.equal((await c.item(bare).read()).resource.v, 1);
    assert.equal((await c.item(bare, NonePartitionKeyValue).read()).resource.v, 1);
    const keyed = uniqueId("keyed");
    await c.items.create({ id: keyed, _partitionKey: "k", v: 2 });
    assert.equal((await c.item(keyed, "k").read()).resource.v, 2);
    const { resources } = await c.items.readAll().fetchAll();
    assert.deepEqual(resources.map((d) => d.id).sort(), [bare, keyed].sort());
  });

  test("a client on an API version before 2018-12-31 creates a non-partitioned container, addressed with no key", async () => {
    // A plugin as an old client: the container is created with no partition
    // key on API version 2018-06-18.
    const legacy = new CosmosClient({
      endpoint: process.env.ORRERY_ENDPOINT,
      key: process.env.ORRERY_KEY,
      plugins: [{
        on: "request",
        plugin: (context, diagnosticNode, next) => {
          if (context.resourceType === ResourceType.container && context.method === HTTPMethod.post) {
            context.body = JSON.stringify({ id: JSON.parse(context.body).id });
          }
          context.headers["x-ms-version"] = "2018-06-18";
          return next(context);
        },
      }],
    });
    const id = uniqueId("np");
    await legacy.database(db.id).containers.create({ id, partitionKey: { paths: ["/pk"] } });
    legacy.dispose();
    const c = db.container(id);
    const { resource } = await c.read();
    assert.deepEqual(resource.partitionKey.paths, ["/_partitionKey"]);
    assert.equal(resource.partitionKey.systemKey, true);
    // The SDK reads systemKey and sends [] for every item of the container.
    await c.items.create({ id: "a", v: 1 });
    await c.items.upsert({ id: "b", v: 2 });
    assert.equal((await c.item("a", undefined).read()).resource.v, 1);
    assert.equal((await c.item("a", undefined).replace({ id: "a", v: 3 })).resource.v, 3);
    assert.equal((await c.items.query("SELECT * FROM c").fetchAll()).resources.length, 2);
    await c.item("a", undefined).delete();
    assert.equal((await c.item("a", undefined).read()).statusCode, 404);
    assert.equal((await c.item("b", NonePartitionKeyValue).read()).resource.v, 2);
  });
});

describe("hierarchical partition keys", () => {
  test("an item holding {} at a key path is in the undefined partition, as the SDK's NonePartitionKey names it", async () => {
    const c = await newContainer({ paths: ["/a", "/b"], kind: PartitionKeyKind.MultiHash, version: 2 });
    await c.items.create({ id: "half", a: 5, b: {} });
    await c.items.create({ id: "none", a: {}, b: {} });
    assert.equal((await c.item("half", [5, NonePartitionKeyValue]).read()).resource.id, "half");
    assert.equal((await c.item("none", [NonePartitionKeyValue, NonePartitionKeyValue]).read()).resource.id, "none");
    const [del] = await c.items.bulk([{ operationType: "Delete", id: "none", partitionKey: [{}, {}] }]);
    assert.equal(del.statusCode, 204);
    const err = await expectCosmosError(() => c.items.create({ id: "obj", a: { k: 1 }, b: 1 }, { partitionKey: [NonePartitionKeyValue, 1] }));
    assert.equal(err.code, 400);
  });

  let c;
  before(async () => {
    c = await newContainer({ paths: ["/tenant", "/user", "/session"], kind: PartitionKeyKind.MultiHash, version: 2 });
  });

  test("CRUD addressed by the full key", async () => {
    const id = uniqueId("h");
    const key = ["contoso", "alice", 7];
    const doc = { id, tenant: "contoso", user: "alice", session: 7, v: 1 };
    const created = await c.items.create(doc);
    assert.equal(created.statusCode, 201);

    const read = await c.item(id, key).read();
    assert.equal(read.statusCode, 200);
    assert.equal(read.resource.v, 1);
    const built = new PartitionKeyBuilder().addValue("contoso").addValue("alice").addValue(7).build();
    assert.equal((await c.item(id, built).read()).statusCode, 200);

    const replaced = await c.item(id, key).replace({ ...doc, v: 2 });
    assert.equal(replaced.resource.v, 2);
    const upserted = await c.items.upsert({ ...doc, v: 3 });
    assert.equal(upserted.statusCode, 200);

    for (const other of [["contoso", "alice", 8], ["contoso", "bob", 7], ["fabrikam", "alice", 7]]) {
      assert.equal((await c.item(id, other).read()).statusCode, 404, `read with ${JSON.stringify(other)}`);
    }

    const conflict = await expectCosmosError(() => c.items.create(doc));
    assert.equal(conflict.code, 409);
    const sibling = await c.items.create({ ...doc, user: "bob" });
    assert.equal(sibling.statusCode, 201, "the same id under another user is another item");

    const err = await expectCosmosError(() => c.item(id, key).replace({ ...doc, session: 8 }));
    assert.equal(err.code, 400, "a body whose key differs from the addressed key");

    assert.equal((await c.item(id, key).delete()).statusCode, 204);
    assert.equal((await c.item(id, key).read()).statusCode, 404);
    assert.equal((await c.item(id, ["contoso", "bob", 7]).read()).statusCode, 200);
  });

  test("null and absent components", async (t) => {
    const cases = [
      { name: "null user", body: { tenant: "t", user: null, session: 1 }, key: ["t", null, 1] },
      {
        name: "absent session",
        body: { tenant: "t", user: "u" },
        key: new PartitionKeyBuilder().addValue("t").addValue("u").addNoneValue().build(),
      },
      { name: "absent session via an empty object", body: { tenant: "t", user: "v" }, key: ["t", "v", NonePartitionKeyValue] },
      { name: "everything absent", body: {}, key: [NonePartitionKeyValue, NonePartitionKeyValue, NonePartitionKeyValue] },
    ];
    for (const tc of cases) {
      await t.test(tc.name, async () => {
        const id = uniqueId("hn");
        assert.equal((await c.items.create({ id, ...tc.body })).statusCode, 201);
        const read = await c.item(id, tc.key).read();
        assert.equal(read.statusCode, 200);
        assert.equal(read.resource.id, id);
        assert.equal((await c.item(id, tc.key).delete()).statusCode, 204);
      });
    }
  });

  test("readAll over the whole container, one full key and a key prefix", async () => {
    const hc = await newContainer({ paths: ["/tenant", "/user"], kind: PartitionKeyKind.MultiHash, version: 2 });
    const docs = [
      { id: "1", tenant: "a", user: "x" },
      { id: "2", tenant: "a", user: "x" },
      { id: "3", tenant: "a", user: "y" },
      { id: "4", tenant: "b", user: "x" },
    ];
    for (const d of docs) await hc.items.create(d);
    const all = await hc.items.readAll().fetchAll();
    assert.deepEqual(all.resources.map((d) => d.id).sort(), ["1", "2", "3", "4"]);
    const ax = await hc.items.readAll({ partitionKey: ["a", "x"] }).fetchAll();
    assert.deepEqual(ax.resources.map((d) => d.id).sort(), ["1", "2"]);
    // A partial key: the SDK sends the one-value prefix ["a"] in the
    // partition key header of the query.
    const a = await hc.items.readAll({ partitionKey: ["a"] }).fetchAll();
    assert.deepEqual(a.resources.map((d) => d.id).sort(), ["1", "2", "3"]);
    const built = await hc.items.readAll({ partitionKey: new PartitionKeyBuilder().addValue("b").build() }).fetchAll();
    assert.deepEqual(built.resources.map((d) => d.id), ["4"]);
  });
});
