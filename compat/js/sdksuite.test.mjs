// Cases of the JavaScript SDK's own public suite (test/public) that the
// server answers, written again here as the service answers them.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { PartitionKeyKind } from "@azure/cosmos";
import { expectCosmosError, newClient, uniqueId } from "./orrery.mjs";

const client = newClient();

describe("partition key paths", () => {
  let db;
  before(async () => {
    ({ database: db } = await client.databases.create({ id: uniqueId("jspkpaths") }));
  });
  after(async () => {
    await db.delete();
  });

  test("a partition key path naming anything but letters, digits and '_' unquoted is refused with the service's 400", async () => {
    for (const partitionKey of [
      { paths: ["/id ds"] },
      { paths: ["/user-id"] },
      { paths: ["/a//b"] },
      { paths: ["/a/*"] },
      { paths: ["id", "/id2"], kind: PartitionKeyKind.MultiHash, version: 2 },
      { paths: ["/tenant", "/id ds"], kind: PartitionKeyKind.MultiHash, version: 2 },
    ]) {
      const err = await expectCosmosError(() => db.containers.create({ id: uniqueId("c"), partitionKey }));
      assert.equal(err.code, 400, `${JSON.stringify(partitionKey)}: ${err.message}`);
      assert.ok(
        err.message.includes("Partition key paths must contain only valid characters and not contain a trailing slash or wildcard character"),
        err.message,
      );
      const first = partitionKey.paths.find((p) => !/^(\/[A-Za-z0-9_]+)+$/.test(p));
      assert.ok(
        err.message.includes(`The partition key component definition path '${first}' could not be accepted`),
        err.message,
      );
    }
  });

  test("quoted, nested and hierarchical partition key paths are accepted as sent", async () => {
    for (const partitionKey of [
      { paths: ['/"user-id"'] },
      { paths: ["/address/zip_code"] },
      { paths: ["/tenant", "/user", "/session"], kind: PartitionKeyKind.MultiHash, version: 2 },
    ]) {
      const { resource } = await db.containers.create({ id: uniqueId("c"), partitionKey });
      assert.deepEqual(resource.partitionKey.paths, partitionKey.paths);
    }
  });
});

describe("VectorDistance brute force over rows without a vector of the query's dimensions", () => {
  let db;
  let container;
  before(async () => {
    ({ database: db } = await client.databases.create({ id: uniqueId("jsvecbrute") }));
    ({ container } = await db.containers.create({
      id: "words",
      partitionKey: { paths: ["/id"] },
      throughput: 20000, // two ranges: the SDK merges the ranges' pages by their orderByItems
      vectorEmbeddingPolicy: {
        vectorEmbeddings: [{ path: "/vector1", dataType: "float32", dimensions: 3, distanceFunction: "euclidean" }],
      },
      indexingPolicy: { vectorIndexes: [{ path: "/vector1", type: "flat" }] },
    }));
    const rows = [
      { id: "a", word: "near", embedding: [1, 0, 0] },
      { id: "b", word: "middle", embedding: [0.7, 0.7, 0] },
      { id: "c", word: "far", embedding: [-1, 0, 0] },
      { id: "d", word: "short", embedding: [1, 0] }, // two dimensions: no distance
    ];
    for (const r of rows) await container.items.create(r);
  });
  after(async () => {
    await db.delete();
  });

  const words = async (fn, bruteForce = true) => {
    const { resources } = await container.items
      .query(`SELECT c.word FROM c ORDER BY VectorDistance([1, 0, 0], c.embedding, ${bruteForce}, {distanceFunction:'${fn}'})`, {
        allowUnboundedNonStreamingQueries: true,
      })
      .fetchAll();
    return resources.map((r) => r.word);
  };

  test("by similarity (cosine, dot product) the row without a distance comes last", async () => {
    assert.deepEqual(await words("Cosine"), ["near", "middle", "far", "short"]);
    assert.deepEqual(await words("DotProduct"), ["near", "middle", "far", "short"]);
  });

  test("by distance (euclidean) the row without a distance comes first", async () => {
    assert.deepEqual(await words("Euclidean"), ["short", "near", "middle", "far"]);
  });

  test("an index search (third argument false) leaves the row without a distance out", async () => {
    assert.deepEqual(await words("Euclidean", false), ["near", "middle", "far"]);
    assert.deepEqual(await words("Cosine", false), ["near", "middle", "far"]);
  });
});

describe("ORDER BY RANK without TOP or LIMIT", () => {
  let db;
  let container;
  before(async () => {
    ({ database: db } = await client.databases.create({ id: uniqueId("jsrankall") }));
    ({ container } = await db.containers.create({ id: "t", partitionKey: { paths: ["/id"] }, throughput: 25000 }));
    const titles = ["John went home", "the United States", "John Smith in the United States", "nothing here", "John and John"];
    for (let i = 0; i < titles.length; i++) await container.items.create({ id: String(i), index: i, title: titles[i] });
  });
  after(async () => {
    await db.delete();
  });

  test("every matching row is ranked, as with a TOP that covers them all", async () => {
    const ranked = "FROM c WHERE FullTextContains(c.title, 'John') ORDER BY RANK FullTextScore(c.title, ['John'])";
    const options = { allowUnboundedNonStreamingQueries: true };
    const all = (await container.items.query(`SELECT c.index ${ranked}`, options).fetchAll()).resources.map((r) => r.index);
    const top = (await container.items.query(`SELECT TOP 10 c.index ${ranked}`, options).fetchAll()).resources.map((r) => r.index);
    assert.equal(all.length, 3, `ranked without TOP: ${JSON.stringify(all)}`);
    assert.deepEqual(all, top);
    const rrf = "SELECT c.index FROM c ORDER BY RANK RRF(FullTextScore(c.title, ['John']), FullTextScore(c.title, ['States']))";
    const fused = (await container.items.query(rrf, options).fetchAll()).resources.map((r) => r.index);
    assert.deepEqual([...fused].sort(), [0, 1, 2, 3, 4], `RRF without TOP: ${JSON.stringify(fused)}`);
  });
});
