// Databases and containers through the JavaScript SDK: create, read, list,
// replace and delete, with the partition key definitions, TTL and indexing
// policy the service echoes back.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { PartitionKeyKind } from "@azure/cosmos";
import { expectCosmosError, newClient, quotedEtag, uniqueId } from "./orrery.mjs";

const client = newClient();

/**
 * Reads a feed page by page with the given maxItemCount, checking every page
 * against it, and returns the resources by id (failing on a duplicate).
 */
async function readAllPaged(feed, maxItemCount) {
  const seen = new Map();
  const sizes = [];
  const it = feed.readAll({ maxItemCount });
  while (it.hasMoreResults()) {
    const page = await it.fetchNext();
    sizes.push(page.resources.length);
    for (const r of page.resources) {
      assert.ok(!seen.has(r.id), `${r.id} listed twice`);
      seen.set(r.id, r);
    }
  }
  assert.ok(sizes.every((n) => n <= maxItemCount), `page sizes ${sizes} exceed maxItemCount ${maxItemCount}`);
  return seen;
}

describe("databases", () => {
  test("create, read, list and delete", async () => {
    const id = uniqueId("jsdb");
    const created = await client.databases.create({ id });
    assert.equal(created.statusCode, 201);
    assert.equal(created.resource.id, id);
    assert.match(created.etag, quotedEtag);
    assert.equal(created.resource._etag, created.etag);
    assert.ok(created.requestCharge > 0, `requestCharge ${created.requestCharge}`);
    for (const key of ["_rid", "_self", "_ts", "_colls", "_users"]) {
      assert.ok(key in created.resource, `database body lacks ${key}: ${JSON.stringify(created.resource)}`);
    }
    assert.equal(created.database.id, id);

    const read = await client.database(id).read();
    assert.equal(read.statusCode, 200);
    assert.deepEqual(read.resource, created.resource);
    assert.equal(read.etag, created.etag);

    const notModified = await client.database(id).read({ accessCondition: { type: "IfNoneMatch", condition: created.etag } });
    assert.equal(notModified.statusCode, 304);
    assert.equal(notModified.resource, null);
    const modified = await client.database(id).read({ accessCondition: { type: "IfNoneMatch", condition: '"other"' } });
    assert.equal(modified.statusCode, 200);

    const { resources: all } = await client.databases.readAll().fetchAll();
    assert.ok(all.some((d) => d.id === id && d._rid === created.resource._rid), "readAll lacks the new database");

    const { resources: queried } = await client.databases
      .query({ query: "SELECT * FROM root r WHERE r.id = @id", parameters: [{ name: "@id", value: id }] })
      .fetchAll();
    assert.deepEqual(queried.map((d) => d.id), [id]);

    const deleted = await client.database(id).delete();
    assert.equal(deleted.statusCode, 204);
    assert.equal(deleted.resource, null);

    const err = await expectCosmosError(() => client.database(id).read());
    assert.equal(err.code, 404);
  });

  test("a second create is a 409 conflict; createIfNotExists returns the existing one", async () => {
    const id = uniqueId("jsdb");
    const first = await client.databases.create({ id });
    const err = await expectCosmosError(() => client.databases.create({ id }));
    assert.equal(err.code, 409);
    assert.equal(typeof err.message, "string");
    const again = await client.databases.createIfNotExists({ id });
    assert.equal(again.statusCode, 200);
    assert.equal(again.resource._rid, first.resource._rid);
    await client.database(id).delete();
  });

  test("readAll pages by maxItemCount and lists each database once, as read", async () => {
    const ids = [uniqueId("page"), uniqueId("page"), uniqueId("page")];
    const bodies = [];
    for (const id of ids) bodies.push((await client.databases.create({ id })).resource);
    const seen = await readAllPaged(client.databases, 2);
    for (const body of bodies) {
      assert.deepEqual(seen.get(body.id), body);
    }
    for (const id of ids) await client.database(id).delete();
  });

  test("deleting a missing database is a 404", async () => {
    const err = await expectCosmosError(() => client.database(uniqueId("missing")).delete());
    assert.equal(err.code, 404);
  });
});

describe("containers", () => {
  let db;
  before(async () => {
    ({ database: db } = await client.databases.create({ id: uniqueId("jscoll") }));
  });
  after(async () => {
    await db.delete();
  });

  test("create with a single path fills kind and the default policies; without a version it is hash V1, as the service makes it", async () => {
    const id = uniqueId("c");
    const created = await db.containers.create({ id, partitionKey: { paths: ["/pk"] } });
    assert.equal(created.statusCode, 201);
    const body = created.resource;
    assert.equal(body.id, id);
    assert.deepEqual(body.partitionKey.paths, ["/pk"]);
    assert.equal(body.partitionKey.kind, "Hash");
    assert.equal(body.partitionKey.version, undefined);
    assert.equal(body.indexingPolicy.indexingMode, "consistent");
    assert.equal(body.indexingPolicy.automatic, true);
    assert.ok(Array.isArray(body.indexingPolicy.includedPaths), "includedPaths is not an array");
    assert.ok(Array.isArray(body.indexingPolicy.excludedPaths), "excludedPaths is not an array");
    assert.equal(body.defaultTtl, undefined);
    for (const key of ["_rid", "_self", "_etag", "_ts", "_docs", "_sprocs", "_triggers", "_udfs", "_conflicts"]) {
      assert.ok(key in body, `container body lacks ${key}: ${JSON.stringify(body)}`);
    }
    assert.equal(body._etag, created.etag);
    assert.ok(created.requestCharge > 0);
    // The JS SDK keys session tokens by the container RID, which must be 8 bytes.
    assert.equal(Buffer.from(body._rid.replace(/-/g, "/"), "base64").length, 8);

    const read = await db.container(id).read();
    assert.equal(read.statusCode, 200);
    assert.deepEqual(read.resource, body);
  });

  test("the partition key definition, TTL and indexing policy round-trip", async (t) => {
    const indexingPolicy = {
      indexingMode: "consistent",
      automatic: true,
      includedPaths: [{ path: "/name/?" }],
      excludedPaths: [{ path: "/*" }, { path: '/"_etag"/?' }],
    };
    const cases = [
      {
        name: "hierarchical MultiHash version 2",
        def: {
          partitionKey: { paths: ["/tenant", "/user", "/session"], kind: PartitionKeyKind.MultiHash, version: 2 },
        },
        want: { paths: ["/tenant", "/user", "/session"], kind: "MultiHash", version: 2 },
      },
      {
        name: "explicit Hash with defaultTtl -1",
        def: { partitionKey: { paths: ["/a"], kind: PartitionKeyKind.Hash, version: 2 }, defaultTtl: -1 },
        want: { paths: ["/a"], kind: "Hash", version: 2 },
        ttl: -1,
      },
      {
        name: "nested path with defaultTtl 3600 and an indexing policy",
        def: { partitionKey: { paths: ["/address/city"] }, defaultTtl: 3600, indexingPolicy },
        want: { paths: ["/address/city"], kind: "Hash" },
        ttl: 3600,
        indexingPolicy,
      },
    ];
    for (const c of cases) {
      await t.test(c.name, async () => {
        const id = uniqueId("c");
        const { resource, statusCode } = await db.containers.create({ id, ...c.def });
        assert.equal(statusCode, 201);
        for (const got of [resource, (await db.container(id).read()).resource]) {
          assert.deepEqual(got.partitionKey, c.want);
          assert.equal(got.defaultTtl, c.ttl);
          if (c.indexingPolicy) {
            assert.equal(got.indexingPolicy.indexingMode, c.indexingPolicy.indexingMode);
            assert.equal(got.indexingPolicy.automatic, c.indexingPolicy.automatic);
            assert.deepEqual(got.indexingPolicy.includedPaths, c.indexingPolicy.includedPaths);
            assert.deepEqual(got.indexingPolicy.excludedPaths, c.indexingPolicy.excludedPaths);
          }
        }
      });
    }
  });

  test("the service's indexing policy defaults: /\"_etag\"/? excluded, one included path", async (t) => {
    const etag = { path: '/"_etag"/?' };
    const cases = [
      { name: "no policy", policy: undefined, excluded: [etag] },
      { name: "an empty policy", policy: {}, excluded: [etag] },
      { name: "included paths only", policy: { includedPaths: [{ path: "/*" }] }, excluded: [etag] },
      {
        name: "an excluded path of its own",
        policy: { automatic: true, indexingMode: "consistent", includedPaths: [{ path: "/*" }], excludedPaths: [{ path: '/"systemMetadata"/*' }] },
        excluded: [{ path: '/"systemMetadata"/*' }, etag],
      },
    ];
    for (const c of cases) {
      await t.test(c.name, async () => {
        const id = uniqueId("ip");
        const { resource } = await db.containers.create({ id, partitionKey: { paths: ["/pk"] }, indexingPolicy: c.policy });
        assert.deepEqual(resource.indexingPolicy.excludedPaths, c.excluded);
        assert.equal(resource.indexingPolicy.includedPaths.length, 1);
        assert.equal(resource.indexingPolicy.includedPaths[0].path, "/*");
        // Replaced as read, the policy keeps its shape.
        const { resource: replaced } = await db.container(id).replace(resource);
        assert.deepEqual(replaced.indexingPolicy.excludedPaths, c.excluded);
      });
    }
  });

  test("populateQuotaInfo: the index transformation progress, no lazy indexing progress", async () => {
    const id = uniqueId("q");
    await db.containers.create({ id, partitionKey: { paths: ["/pk"] } });
    const { headers } = await db.container(id).read({ populateQuotaInfo: true });
    assert.equal(headers["x-ms-documentdb-collection-index-transformation-progress"], "100");
    assert.equal(headers["x-ms-documentdb-collection-lazy-indexing-progress"], undefined);
  });

  test("populateQuotaInfo: the container's quota and what it uses, as the service lists them", async () => {
    const id = uniqueId("q");
    const { container } = await db.containers.create({ id, partitionKey: { paths: ["/pk"] } });
    await container.items.create({ id: "a", pk: "p", text: "x".repeat(3000) });
    await container.items.create({ id: "b", pk: "q" });
    await container.scripts.storedProcedures.create({ id: "sp", body: "function () {}" });
    const parse = (h) => Object.fromEntries(h.split(";").filter(Boolean).map((kv) => kv.split("=")).map(([k, v]) => [k, Number(v)]));
    const { headers } = await container.read({ populateQuotaInfo: true });
    const quota = parse(headers["x-ms-resource-quota"]);
    assert.equal(quota.collectionSize, 10 * 1024 * 1024);
    assert.equal(quota.storedProcedures, 100);
    assert.equal(quota.documentsCount, -1);
    const usage = parse(headers["x-ms-resource-usage"]);
    assert.equal(usage.documentsCount, 2);
    assert.equal(usage.storedProcedures, 1);
    assert.equal(usage.triggers, 0);
    assert.ok(usage.documentsSize >= 3, `documentsSize ${usage.documentsSize} KB holds the 3 KB item`);
    const plain = await container.read();
    assert.equal(plain.headers["x-ms-resource-quota"], undefined);
  });

  test("the conflicts feed, as one write region serves it: empty, listed or queried", async () => {
    const id = uniqueId("cf");
    const { container } = await db.containers.create({ id, partitionKey: { paths: ["/pk"] } });
    await container.items.create({ id: "x", pk: "p" });
    assert.deepEqual((await container.conflicts.readAll().fetchAll()).resources, []);
    assert.deepEqual((await container.conflicts.query("SELECT * FROM c").fetchNext()).resources, []);
    assert.deepEqual((await container.conflicts.query("SELECT * FROM c", { forceQueryPlan: true }).fetchNext()).resources, []);
  });

  test("list, query, replace, conflict and delete", async () => {
    const ids = [uniqueId("l1"), uniqueId("l2")].sort();
    for (const id of ids) {
      await db.containers.create({ id, partitionKey: { paths: ["/pk"] } });
    }
    const { resources: all } = await db.containers.readAll().fetchAll();
    for (const id of ids) {
      assert.ok(all.some((c) => c.id === id), `readAll lacks ${id}: ${all.map((c) => c.id)}`);
    }
    const paged = await readAllPaged(db.containers, 1);
    for (const id of ids) {
      assert.deepEqual(paged.get(id), (await db.container(id).read()).resource);
    }
    const { resources: queried } = await db.containers
      .query({ query: "SELECT * FROM root r WHERE r.id = @id", parameters: [{ name: "@id", value: ids[0] }] })
      .fetchAll();
    assert.deepEqual(queried.map((c) => c.id), [ids[0]]);

    const conflict = await expectCosmosError(() => db.containers.create({ id: ids[0], partitionKey: { paths: ["/pk"] } }));
    assert.equal(conflict.code, 409);
    const existing = await db.containers.createIfNotExists({ id: ids[0], partitionKey: { paths: ["/pk"] } });
    assert.equal(existing.statusCode, 200);

    const { resource: before } = await db.container(ids[0]).read();
    const replaced = await db.container(ids[0]).replace({ ...before, defaultTtl: 60 });
    assert.equal(replaced.statusCode, 200);
    assert.equal(replaced.resource.defaultTtl, 60);
    assert.notEqual(replaced.etag, before._etag);
    assert.equal(replaced.resource._rid, before._rid);
    assert.equal((await db.container(ids[0]).read()).resource.defaultTtl, 60);

    const deleted = await db.container(ids[0]).delete();
    assert.equal(deleted.statusCode, 204);
    const gone = await expectCosmosError(() => db.container(ids[0]).read());
    assert.equal(gone.code, 404);
    const { resources: left } = await db.containers.readAll().fetchAll();
    assert.ok(!left.some((c) => c.id === ids[0]), "deleted container still listed");
    assert.ok(left.some((c) => c.id === ids[1]), "the other container vanished");
  });

  test("a container in a missing database is a 404", async () => {
    const err = await expectCosmosError(() =>
      client.database(uniqueId("missing")).containers.create({ id: "c", partitionKey: { paths: ["/pk"] } }),
    );
    assert.equal(err.code, 404);
  });
});
