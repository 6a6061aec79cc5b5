// Offers and delete-by-partition-key through the JavaScript SDK: every
// container created without throughput has the service's default offer, a
// container sharing its database's throughput has none of its own, and
// deleteAllItemsForPartitionKey empties one logical partition only.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

describe("offers", () => {
  let database, shared;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jsoffers") }));
    ({ database: shared } = await client.databases.create({ id: uniqueId("jsshared"), throughput: 1000 }));
  });

  after(async () => {
    await database.delete();
    await shared.delete();
  });

  test("a container created without throughput reads the default 400 RU/s offer", async () => {
    const { container } = await database.containers.create({ id: "plain", partitionKey: { paths: ["/pk"] } });
    const { resource: offer } = await container.readOffer();
    assert.ok(offer, "readOffer found no offer");
    assert.equal(offer.content.offerThroughput, 400);
    const { resource: c } = await container.read();
    assert.equal(offer.offerResourceId, c._rid);

    const { resources: all } = await client.offers.readAll().fetchAll();
    assert.ok(all.some((o) => o.id === offer.id), "offers.readAll does not list the container's offer");

    offer.content.offerThroughput = 800;
    const { resource: replaced } = await client.offer(offer.id).replace(offer);
    assert.equal(replaced.content.offerThroughput, 800);
    const { resource: reread } = await container.readOffer();
    assert.equal(reread.content.offerThroughput, 800);

    reread.content.offerThroughput = 850;
    const err = await expectCosmosError(() => client.offer(offer.id).replace(reread));
    assert.equal(err.code, 400);
    assert.match(err.message, /in increments of 100/);
  });

  test("a container sharing its database's throughput has no offer of its own", async () => {
    const { container } = await shared.containers.create({ id: "sharing", partitionKey: { paths: ["/pk"] } });
    const { resource: offer } = await container.readOffer();
    assert.equal(offer, undefined);
    const { resource: dbOffer } = await shared.readOffer();
    assert.equal(dbOffer.content.offerThroughput, 1000);
  });

  test("an autoscale container's offer has its maximum", async () => {
    const { container } = await database.containers.create({
      id: "auto",
      partitionKey: { paths: ["/pk"] },
      maxThroughput: 4000,
    });
    const { resource: offer } = await container.readOffer();
    assert.equal(offer.content.offerAutopilotSettings.maxThroughput, 4000);
  });
});

describe("delete all items of a partition key", () => {
  let database, container;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jspkdelete") }));
    ({ container } = await database.containers.create({ id: "c", partitionKey: { paths: ["/pk"] } }));
  });

  after(async () => {
    await database.delete();
  });

  test("deletes every item of the partition and none of another", async () => {
    for (let i = 0; i < 300; i++) {
      await container.items.create({ id: `a${i}`, pk: "A", v: i });
    }
    for (let i = 0; i < 3; i++) {
      await container.items.create({ id: `b${i}`, pk: "B", v: i });
    }
    const res = await container.deleteAllItemsForPartitionKey("A");
    assert.equal(res.statusCode, 200);
    const { resources: left } = await container.items
      .query("SELECT VALUE COUNT(1) FROM c", { partitionKey: "A" })
      .fetchAll();
    assert.deepEqual(left, [0]);
    const { resources: other } = await container.items
      .query("SELECT VALUE c.id FROM c", { partitionKey: "B" })
      .fetchAll();
    assert.deepEqual(other.sort(), ["b0", "b1", "b2"]);
    const { statusCode } = await container.item("a7", "A").read();
    assert.equal(statusCode, 404);
  });
});

describe("computed properties", () => {
  let database, container;

  before(async () => {
    ({ database } = await client.databases.create({ id: uniqueId("jscomputed") }));
    ({ container } = await database.containers.create({
      id: "c",
      partitionKey: { paths: ["/pk"] },
      computedProperties: [{ name: "cp_lower", query: "SELECT VALUE LOWER(c.name) FROM c" }],
      indexingPolicy: { includedPaths: [{ path: "/*" }, { path: "/cp_lower/?" }], excludedPaths: [] },
    }));
  });

  after(async () => {
    await database.delete();
  });

  test("queries read computed properties; items and SELECT * never show them", async () => {
    await container.items.create({ id: "1", pk: "p", name: "Bob" });
    await container.items.create({ id: "2", pk: "p", name: "ALICE" });
    const { resources: ids } = await container.items
      .query({ query: "SELECT VALUE c.id FROM c WHERE c.cp_lower = @n", parameters: [{ name: "@n", value: "alice" }] }, { partitionKey: "p" })
      .fetchAll();
    assert.deepEqual(ids, ["2"]);
    const { resources: star } = await container.items.query("SELECT * FROM c", { partitionKey: "p" }).fetchAll();
    assert.ok(star.every((d) => !("cp_lower" in d)));
    const { resource: item } = await container.item("1", "p").read();
    assert.equal(item.cp_lower, undefined);
    const { resource: def } = await container.read();
    assert.deepEqual(def.computedProperties, [{ name: "cp_lower", query: "SELECT VALUE LOWER(c.name) FROM c" }]);
  });

  test("a cross-partition query orders by a computed property", async () => {
    await container.items.create({ id: "x1", pk: "q1", name: "Zed" });
    await container.items.create({ id: "x2", pk: "q2", name: "amy" });
    await container.items.create({ id: "x3", pk: "q3", name: "Mo" });
    const { resources } = await container.items
      .query("SELECT c.id, c.cp_lower FROM c WHERE STARTSWITH(c.id, 'x') ORDER BY c.cp_lower DESC")
      .fetchAll();
    assert.deepEqual(resources, [
      { id: "x1", cp_lower: "zed" },
      { id: "x3", cp_lower: "mo" },
      { id: "x2", cp_lower: "amy" },
    ]);
  });

  test("an invalid definition is a 400", async () => {
    const err = await expectCosmosError(() =>
      database.containers.create({
        id: "bad",
        partitionKey: { paths: ["/pk"] },
        computedProperties: [{ name: "id", query: "SELECT VALUE c.a FROM c" }],
      }),
    );
    assert.equal(err.code, 400);
  });
});
