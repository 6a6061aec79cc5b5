// Cross-partition queries through the JavaScript SDK's query pipeline: the
// SDK sends each query straight to the gateway and, when the server refuses
// it as the service does (400, substatus 1004, the plan in
// additionalErrorInfo), executes the query plan it asked for in parallel.
// Every query runs with a small maxItemCount, through fetchAll and through
// fetchNext page by page, and must give the results computed here.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { BulkOperationType } from "@azure/cosmos";
import { newClient, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;
let container;

const colors = ["red", "green", "blue", "black"];
const partitions = ["north", "south", "east", "west", "centre", "up"];

/** The documents: 48 items over six partition key values. */
const docs = Array.from({ length: 48 }, (_, i) => ({
  id: `q${String(i).padStart(2, "0")}`,
  pk: partitions[i % partitions.length],
  n: (i * 37) % 50, // unique, not in id order
  price: (i % 7) * 1.25 + 0.5, // exact in binary: sums do not depend on order
  cat: colors[i % colors.length],
  tags: colors.filter((_, k) => (i >> k) & 1),
}));

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsquery") }));
  // The composite index serves ORDER BY c.cat ASC, c.n DESC, as the
  // service needs one for an ORDER BY on two properties.
  ({ container } = await db.containers.create({
    id: "items",
    partitionKey: { paths: ["/pk"] },
    indexingPolicy: { compositeIndexes: [[{ path: "/cat", order: "ascending" }, { path: "/n", order: "descending" }]] },
  }));
  await Promise.all(docs.map((d) => container.items.create(d)));
});
after(async () => {
  await db.delete();
});

/** Runs a query with fetchAll and returns its results. */
async function fetchAll(query, options = {}) {
  const { resources } = await container.items.query(query, { maxItemCount: 3, ...options }).fetchAll();
  return resources;
}

/** Runs a query page by page with fetchNext and returns its results and page count. */
async function fetchPages(query, options = {}, target = container) {
  const it = target.items.query(query, { maxItemCount: 3, ...options });
  const out = [];
  let pages = 0;
  while (it.hasMoreResults()) {
    const { resources } = await it.fetchNext();
    pages++;
    if (resources) out.push(...resources);
    assert.ok(pages < 10000, "fetchNext does not finish");
  }
  return { results: out, pages };
}

/** Asserts that fetchAll and fetchNext both give want (in order unless unordered). */
async function expectResults(query, want, { unordered = false, options = {} } = {}) {
  const canon = (rows) => (unordered ? rows.map((r) => JSON.stringify(r)).sort() : rows);
  const all = await fetchAll(query, options);
  assert.deepEqual(canon(all), canon(want), `fetchAll: ${typeof query === "string" ? query : query.query}`);
  const { results } = await fetchPages(query, options);
  assert.deepEqual(canon(results), canon(want), `fetchNext: ${typeof query === "string" ? query : query.query}`);
}

const byNumber = (f) => (a, b) => f(a) - f(b);
const sum = (xs) => xs.reduce((a, b) => a + b, 0);

describe("cross-partition ORDER BY", () => {
  test("ascending and descending on one key", async () => {
    const asc = [...docs].sort(byNumber((d) => d.n));
    await expectResults("SELECT VALUE c.n FROM c ORDER BY c.n", asc.map((d) => d.n));
    await expectResults("SELECT c.id, c.n FROM c ORDER BY c.n DESC", asc.reverse().map(({ id, n }) => ({ id, n })));
    const byPrice = [...docs].sort((a, b) => a.price - b.price || (a.id < b.id ? -1 : 1));
    const got = await fetchAll("SELECT VALUE c.price FROM c ORDER BY c.price ASC");
    assert.deepEqual(got, byPrice.map((d) => d.price));
  });

  test("several keys", async () => {
    const want = [...docs]
      .sort((a, b) => (a.cat < b.cat ? -1 : a.cat > b.cat ? 1 : b.n - a.n))
      .map((d) => ({ cat: d.cat, n: d.n }));
    await expectResults("SELECT c.cat, c.n FROM c ORDER BY c.cat ASC, c.n DESC", want);
  });

  test("a whole document per row keeps its system properties", async () => {
    const rows = await fetchAll("SELECT * FROM c ORDER BY c.n DESC");
    assert.equal(rows.length, docs.length);
    for (const r of rows) {
      const { _rid, _self, _etag, _ts, _attachments, ...user } = r;
      assert.ok(_rid && _self && _etag && _ts, `row lacks system properties: ${JSON.stringify(r)}`);
      assert.deepEqual(user, docs.find((d) => d.id === r.id));
    }
  });
});

describe("cross-partition DISTINCT", () => {
  test("DISTINCT VALUE and DISTINCT objects", async () => {
    const cats = [...new Set(docs.map((d) => d.cat))];
    await expectResults("SELECT DISTINCT VALUE c.cat FROM c", cats, { unordered: true });
    await expectResults("SELECT DISTINCT c.cat FROM c", cats.map((cat) => ({ cat })), { unordered: true });
    await expectResults("SELECT DISTINCT VALUE c.cat FROM c ORDER BY c.cat DESC", [...cats].sort().reverse());
  });
});

describe("cross-partition aggregates", () => {
  const ns = docs.map((d) => d.n);
  const prices = docs.map((d) => d.price);
  test("VALUE aggregates", async () => {
    await expectResults("SELECT VALUE COUNT(1) FROM c", [docs.length]);
    await expectResults("SELECT VALUE SUM(c.n) FROM c", [sum(ns)]);
    await expectResults("SELECT VALUE AVG(c.price) FROM c", [sum(prices) / prices.length]);
    await expectResults("SELECT VALUE MIN(c.n) FROM c", [Math.min(...ns)]);
    await expectResults("SELECT VALUE MAX(c.cat) FROM c", [[...colors].sort().at(-1)]);
    await expectResults("SELECT VALUE COUNT(1) FROM c WHERE c.n > 40", [ns.filter((n) => n > 40).length]);
  });

  test("non-VALUE aggregates", async () => {
    await expectResults("SELECT COUNT(1) AS cnt, SUM(c.n) AS total, AVG(c.price) AS avgPrice, MIN(c.n) AS lo, MAX(c.n) AS hi FROM c", [
      { cnt: docs.length, total: sum(ns), avgPrice: sum(prices) / prices.length, lo: Math.min(...ns), hi: Math.max(...ns) },
    ]);
  });

  test("GROUP BY", async () => {
    const want = colors.map((cat) => {
      const g = docs.filter((d) => d.cat === cat);
      return { cat, cnt: g.length, total: sum(g.map((d) => d.n)), hi: Math.max(...g.map((d) => d.n)) };
    });
    await expectResults("SELECT c.cat, COUNT(1) AS cnt, SUM(c.n) AS total, MAX(c.n) AS hi FROM c GROUP BY c.cat", want, {
      unordered: true,
    });
    const perPartition = partitions.map((p) => docs.filter((d) => d.pk === p).length);
    await expectResults("SELECT VALUE COUNT(1) FROM c GROUP BY c.pk", perPartition, { unordered: true });
  });
});

describe("cross-partition TOP and OFFSET/LIMIT", () => {
  const asc = [...docs].sort(byNumber((d) => d.n)).map((d) => d.n);
  test("TOP with ORDER BY", async () => {
    await expectResults("SELECT TOP 7 VALUE c.n FROM c ORDER BY c.n DESC", [...asc].reverse().slice(0, 7));
  });
  test("TOP without ORDER BY returns that many distinct items", async () => {
    const rows = await fetchAll("SELECT TOP 5 VALUE c.id FROM c");
    assert.equal(new Set(rows).size, 5);
    for (const id of rows) assert.ok(docs.some((d) => d.id === id), id);
  });
  test("OFFSET and LIMIT", async () => {
    await expectResults("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 5 LIMIT 10", asc.slice(5, 15));
    await expectResults("SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 45 LIMIT 10", asc.slice(45));
  });
});

describe("cross-partition JOINs and parameters", () => {
  test("JOIN fans out over arrays", async () => {
    const want = docs.flatMap((d) => d.tags.map((t) => ({ id: d.id, tag: t })));
    await expectResults("SELECT c.id, t AS tag FROM c JOIN t IN c.tags", want, { unordered: true });
    const red = docs.filter((d) => d.tags.includes("red")).sort(byNumber((d) => d.n));
    await expectResults("SELECT VALUE c.n FROM c JOIN t IN c.tags WHERE t = 'red' ORDER BY c.n", red.map((d) => d.n));
    await expectResults("SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags", [want.length]);
  });

  test("parameters", async () => {
    const query = {
      query: "SELECT VALUE c.id FROM c WHERE c.n >= @lo AND ARRAY_CONTAINS(@cats, c.cat) ORDER BY c.n DESC",
      parameters: [
        { name: "@lo", value: 20 },
        { name: "@cats", value: ["red", "blue"] },
      ],
    };
    const want = docs
      .filter((d) => d.n >= 20 && ["red", "blue"].includes(d.cat))
      .sort(byNumber((d) => -d.n))
      .map((d) => d.id);
    await expectResults(query, want);
    await expectResults(
      { query: "SELECT TOP @k VALUE c.n FROM c ORDER BY c.n", parameters: [{ name: "@k", value: 4 }] },
      docs.map((d) => d.n).sort((a, b) => a - b).slice(0, 4),
    );
  });

  test("a continuation token that is not one of the query's is a 400 naming an Invalid Continuation Token", async () => {
    for (const options of [{}, { partitionKey: "east" }]) {
      await assert.rejects(container.items.readAll({ maxItemCount: 2, continuationToken: "junk", ...options }).fetchNext(), (err) => {
        assert.equal(err.code, 400);
        assert.match(err.message, /Invalid Continuation Token/);
        return true;
      });
    }
  });

  test("a streaming query needs no plan and pages across partitions", async () => {
    const want = docs.filter((d) => d.cat === "green").map((d) => d.id);
    await expectResults("SELECT VALUE c.id FROM c WHERE c.cat = 'green'", want, { unordered: true });
  });

  test("over several ranges, the async iterator ends with the last full page, as the SDK's per-range pipeline ends", async () => {
    const { container: wide } = await db.containers.create({ id: uniqueId("wide"), partitionKey: { paths: ["/id"] }, throughput: 24000 });
    assert.ok((await wide.getFeedRanges()).length > 1);
    for (let i = 0; i < 20; i++) await wide.items.create({ id: String(i) });
    const pages = [];
    for await (const { resources } of wide.items.query("SELECT * FROM root r", { maxItemCount: 2 }).getAsyncIterator()) {
      pages.push(resources.length);
    }
    assert.equal(pages.reduce((a, b) => a + b, 0), 20);
    assert.ok(!pages.includes(0), `pages ${pages}: no empty page after the last results`);
    await wide.delete();
  });

  test("with a partition key the query stays in its partition", async () => {
    const want = docs.filter((d) => d.pk === "east").sort(byNumber((d) => d.n)).map((d) => d.n);
    await expectResults("SELECT VALUE c.n FROM c ORDER BY c.n", want, { options: { partitionKey: "east" } });
    await expectResults("SELECT VALUE COUNT(1) FROM c", [want.length], { options: { partitionKey: "east" } });
  });
});

describe("seed 001 through the JavaScript SDK", () => {
  // scope.py: a batch for customer c1 that also creates an order of customer
  // c2 fails whole; the cross-partition count then finds no order.
  test("scope.py: orders written: [0]", async () => {
    const { container: orders } = await db.containers.create({ id: "orders", partitionKey: { paths: ["/customerId"] } });
    const ops = [
      { operationType: BulkOperationType.Create, resourceBody: { id: "o1", customerId: "c1", total: 20.5 } },
      { operationType: BulkOperationType.Create, resourceBody: { id: "o2", customerId: "c2", total: 12.5 } },
    ];
    const res = await orders.items.batch(ops, "c1");
    assert.deepEqual(
      res.result.map((r) => r.statusCode),
      [424, 400],
    );
    assert.deepEqual((await orders.items.query("SELECT VALUE COUNT(1) FROM c").fetchAll()).resources, [0]);
    await orders.items.create({ id: "o1", customerId: "c1", total: 20.5 });
    await orders.items.create({ id: "o2", customerId: "c2", total: 12.5 });
    assert.deepEqual((await orders.items.query("SELECT VALUE COUNT(1) FROM c").fetchAll()).resources, [2]);
  });
});

describe("paging a large container", () => {
  // 10,000 items over ten partitions; the cross-partition ORDER BY is read
  // seven items a page.
  test("cross-partition ORDER BY with page size 7 returns every item once, in order", async (t) => {
    const started = Date.now();
    const { container: big } = await db.containers.create({ id: "big", partitionKey: { paths: ["/pk"] } });
    const n = 10000;
    const all = Array.from({ length: n }, (_, i) => ({ id: String(i), pk: `p${i % 10}`, k: (i * 7919) % n }));
    // Transactional batches of 100 items of one partition each: the quickest
    // way in, and every create must succeed.
    const batches = [];
    for (let p = 0; p < 10; p++) {
      const inPartition = all.filter((d) => d.pk === `p${p}`);
      for (let i = 0; i < inPartition.length; i += 100) batches.push([`p${p}`, inPartition.slice(i, i + 100)]);
    }
    await Promise.all(
      batches.map(async ([pk, items]) => {
        const res = await big.items.batch(
          items.map((d) => ({ operationType: BulkOperationType.Create, resourceBody: d })),
          pk,
        );
        assert.equal(res.code, 200);
        assert.ok(res.result.every((r) => r.statusCode === 201));
      }),
    );
    const loaded = Date.now();
    const { results, pages } = await fetchPages("SELECT VALUE c.k FROM c ORDER BY c.k DESC", { maxItemCount: 7 }, big);
    t.diagnostic(`loaded ${n} items in ${loaded - started} ms; read ${pages} pages in ${Date.now() - loaded} ms`);
    assert.equal(results.length, n);
    assert.ok(pages >= Math.ceil(n / 7), `${pages} pages`);
    for (let i = 0; i < n; i++) assert.equal(results[i], n - 1 - i, `position ${i}`);
  });
});
