// What the JavaScript SDK sees of a query besides its results: documents
// in creation order when there is no ORDER BY, and the query and index
// metrics the service measures, parsed by the SDK's own parsers.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { newClient, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsqueryfid") }));
});
after(async () => {
  await db.delete();
});

describe("creation order", () => {
  test("without ORDER BY a query and readAll list items in creation order, a re-created item last", async () => {
    const { container: c } = await db.containers.create({ id: "order", partitionKey: { paths: ["/pk"] } });
    const created = [];
    const ids = ["m", "c", "x", "a", "q", "b", "z", "k", "e"];
    for (const [i, id] of ids.entries()) {
      const pk = ["p1", "p2", "p3"][i % 3];
      await c.items.create({ id, pk });
      created.push(`${id}@${pk}`);
    }
    await c.item("c", "p2").replace({ id: "c", pk: "p2", v: 2 }); // keeps its place
    await c.item("a", "p1").delete();
    await c.items.create({ id: "a", pk: "p1" }); // moves to the end
    created.splice(created.indexOf("a@p1"), 1);
    created.push("a@p1");
    const names = (rs) => rs.map((d) => `${d.id}@${d.pk}`);

    for (const maxItemCount of [1, 4, 100]) {
      const q = await c.items.query("SELECT * FROM c", { maxItemCount }).fetchAll();
      assert.deepEqual(names(q.resources), created, `query across partitions, pages of ${maxItemCount}`);
      const all = await c.items.readAll({ maxItemCount }).fetchAll();
      assert.deepEqual(names(all.resources), created, `readAll, pages of ${maxItemCount}`);
    }
    const p1 = created.filter((e) => e.endsWith("@p1"));
    const scoped = await c.items.query("SELECT * FROM c", { partitionKey: "p1", maxItemCount: 1 }).fetchAll();
    assert.deepEqual(names(scoped.resources), p1, "query in partition p1");
    const pinned = await c.items.query("SELECT * FROM c WHERE c.pk = 'p1'", { maxItemCount: 1 }).fetchAll();
    assert.deepEqual(names(pinned.resources), p1, "partition p1 pinned by the filter");
  });
});

describe("query metrics", () => {
  test("populateQueryMetrics gives the measured counts on every page", async () => {
    const { container: c } = await db.containers.create({
      id: "metrics",
      partitionKey: { paths: ["/pk"] },
      indexingPolicy: { includedPaths: [{ path: "/*" }], excludedPaths: [{ path: "/note/?" }] },
    });
    for (let i = 0; i < 20; i++) {
      await c.items.create({ id: `i${i}`, pk: "p", n: i, note: `n${i % 4}` });
    }
    const { resources: stored } = await c.items.query("SELECT * FROM c", { partitionKey: "p" }).fetchAll();
    const storedSize = stored.reduce((s, d) => s + Buffer.byteLength(JSON.stringify(d)), 0);

    // A filter no index serves: the scan loads all 20, the filter keeps 5.
    const it = c.items.query("SELECT * FROM c WHERE c.note = 'n1'", {
      partitionKey: "p",
      populateQueryMetrics: true,
      maxItemCount: 100,
    });
    const page = await it.fetchNext();
    const metrics = Object.values(page.queryMetrics);
    assert.equal(metrics.length, 1, "one partition's metrics");
    const m = metrics[0];
    assert.equal(page.resources.length, 5);
    assert.equal(m.retrievedDocumentCount, 20);
    assert.equal(m.retrievedDocumentSize, storedSize);
    assert.equal(m.outputDocumentCount, 5);
    assert.equal(m.indexHitDocumentCount, 5, "the filter kept 5 of the 20 loaded");
    assert.ok(m.totalQueryExecutionTime.totalMilliseconds() >= m.documentLoadTime.totalMilliseconds());
    assert.ok(page.requestCharge > 0, "a nonzero charge");

    // Pages: each has its metrics and a continuation while more remain.
    const paged = c.items.query("SELECT * FROM c WHERE c.n >= 4", {
      partitionKey: "p",
      populateQueryMetrics: true,
      maxItemCount: 6,
    });
    let output = 0;
    let pages = 0;
    while (paged.hasMoreResults()) {
      const p = await paged.fetchNext();
      if (p.resources.length === 0 && !p.hasMoreResults) break;
      pages++;
      const pm = Object.values(p.queryMetrics)[0];
      assert.equal(pm.outputDocumentCount, p.resources.length, `page ${pages}`);
      assert.ok(p.resources.length <= 6, `page ${pages} honours maxItemCount`);
      assert.ok(p.requestCharge > 0);
      output += pm.outputDocumentCount;
    }
    assert.equal(output, 16);
    assert.equal(pages, 3);

    // Index metrics (the SDK's V2 form): the index used, and the one lacked.
    const ix = await c.items
      .query("SELECT * FROM c WHERE c.n = 3 AND c.note = 'n3'", { partitionKey: "p", populateIndexMetrics: true })
      .fetchNext();
    const u = JSON.parse(ix.indexMetrics);
    assert.deepEqual(u.UtilizedSingleIndexes.map((e) => e.IndexSpec), ["/n/?"]);
    assert.deepEqual(u.PotentialSingleIndexes.map((e) => e.IndexSpec), ["/note/?"]);
  });
});

describe("composite indexes", () => {
  test("an ORDER BY on two properties needs a composite index of them, in either direction, as on the service", async () => {
    const { container: c } = await db.containers.create({
      id: "composite",
      partitionKey: { paths: ["/pk"] },
      indexingPolicy: { compositeIndexes: [[{ path: "/key", order: "ascending" }, { path: "/field", order: "ascending" }]] },
    });
    for (const [id, key, field] of [["1", "1", "4"], ["2", "2", "3"], ["3", "2", "2"]]) {
      await c.items.create({ id, pk: "p", key, field });
    }
    const ids = async (q) => (await c.items.query(q).fetchAll()).resources.map((d) => d.id);
    assert.deepEqual(await ids("SELECT * FROM r ORDER BY r.key, r.field"), ["1", "3", "2"]);
    assert.deepEqual(await ids("SELECT * FROM r ORDER BY r.key DESC, r.field DESC"), ["2", "3", "1"]);
    for (const q of ["SELECT * FROM r ORDER BY r.key DESC, r.field ASC", "SELECT * FROM r ORDER BY r.field, r.key"]) {
      await assert.rejects(c.items.query(q).fetchAll(), (err) => {
        assert.equal(err.code, 400);
        assert.match(err.message, /does not have a corresponding composite index that it can be served from/);
        return true;
      }, q);
    }
    // One property needs none; an aggregate's single row has no order to serve.
    assert.deepEqual(await ids("SELECT * FROM r ORDER BY r.field"), ["3", "2", "1"]);
    const { resources } = await c.items.query("SELECT VALUE COUNT(1) FROM r ORDER BY r.field, r.key").fetchAll();
    assert.deepEqual(resources, [3]);
  });

  test("an included path \"/\" (the first policy format's root) is read as \"/*\"", async () => {
    const { resource } = await db.containers.create({
      id: "rootpath",
      partitionKey: { paths: ["/pk"] },
      indexingPolicy: { includedPaths: [{ path: "/", indexes: [{ kind: "Range", dataType: "Number" }] }] },
    });
    assert.equal(resource.indexingPolicy.includedPaths[0].path, "/*");
  });
});
