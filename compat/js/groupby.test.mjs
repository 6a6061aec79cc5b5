// GROUP BY through the JavaScript SDK's own GROUP BY pipeline. The SDK
// lists GroupBy among the query features it supports, so the query plan
// Orrery answers is the service's: groupByExpressions, groupByAliases,
// groupByAliasToAggregateType and a rewritten query whose rows carry
// groupByItems and a payload of partial aggregates. The SDK sends that
// query to every partition key range and merges the groups itself, which
// is what gives the service's shape to groups whose aggregates saw no
// values: the alias is present with the value undefined. The results are
// compared strictly (deepStrictEqual) against what is computed here.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { newClient, uniqueId } from "./orrery.mjs";

const client = newClient();
let db;
let container;

const names = ["Abby", "Bill", "Carl", "Dora", "Eric"];
/** 60 items over 60 partition key values, spread over 4 ranges. */
const docs = Array.from({ length: 60 }, (_, i) => ({
  id: `g${String(i).padStart(2, "0")}`,
  name: names[(i * 7) % names.length],
  age: 11 + ((i * 13) % 8),
  team: "ABCD"[i % 4],
}));

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jsgroupby") }));
  // 24,000 RU/s: four partition key ranges, one per 6,000 RU/s.
  ({ container } = await db.containers.create({ id: "people", partitionKey: { paths: ["/id"] }, throughput: 24000 }));
  await Promise.all(docs.map((d) => container.items.create(d)));
});
after(async () => {
  await db.delete();
});

async function query(text) {
  const { resources } = await container.items.query(text, { maxItemCount: 7 }).fetchAll();
  return resources;
}

/** Groups docs by key(d) and returns, per group, build(members). */
function groupsOf(key, build) {
  const groups = new Map();
  for (const d of docs) {
    const k = key(d);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(d);
  }
  return [...groups.values()].map(build);
}

const byAge = (a, b) => a.age - b.age;
const byName = (a, b) => a.name.localeCompare(b.name);

describe("GROUP BY through the SDK's pipeline", () => {
  test("the container spans several partition key ranges", async () => {
    const { resources } = await container.readPartitionKeyRanges().fetchAll();
    assert.ok(resources.length >= 3, `expected at least 3 ranges, got ${resources.length}`);
  });

  test("the plan is the service's GROUP BY plan", async () => {
    const { resources, diagnostics } = await container.items
      .query("SELECT c.age, COUNT(1) AS n FROM c GROUP BY c.age", { maxItemCount: 7 })
      .fetchAll();
    assert.equal(resources.length, 8);
    // The SDK ran its own GROUP BY: it asked for the plan and then queried
    // every range (one request per range at least), not range 0 alone.
    const gateway = diagnostics.clientSideRequestStatistics.gatewayStatistics;
    const ranges = new Set(gateway.filter((g) => g.partitionKeyRangeId).map((g) => g.partitionKeyRangeId));
    assert.ok(ranges.size >= 3, `queried ranges ${[...ranges]}`);
  });

  test("COUNT, SUM, MIN, MAX and AVG per group", async () => {
    const got = await query(
      "SELECT c.name, COUNT(1) AS n, SUM(c.age) AS total, MIN(c.age) AS lo, MAX(c.age) AS hi, AVG(c.age) AS mean FROM c GROUP BY c.name",
    );
    const want = groupsOf(
      (d) => d.name,
      (m) => {
        const ages = m.map((d) => d.age);
        const total = ages.reduce((a, b) => a + b, 0);
        return { name: m[0].name, n: m.length, total, lo: Math.min(...ages), hi: Math.max(...ages), mean: total / m.length };
      },
    );
    assert.deepStrictEqual(got.sort(byName), want.sort(byName));
  });

  test("COUNTIF per group", async () => {
    const got = await query("SELECT c.team, COUNTIF(c.age >= 15) AS older FROM c GROUP BY c.team");
    const want = groupsOf(
      (d) => d.team,
      (m) => ({ team: m[0].team, older: m.filter((d) => d.age >= 15).length }),
    );
    const order = (a, b) => a.team.localeCompare(b.team);
    assert.deepStrictEqual(got.sort(order), want.sort(order));
  });

  test("several GROUP BY expressions", async () => {
    const got = await query("SELECT c.team, c.age, COUNT(1) AS n FROM c GROUP BY c.team, c.age");
    const want = groupsOf(
      (d) => `${d.team}/${d.age}`,
      (m) => ({ team: m[0].team, age: m[0].age, n: m.length }),
    );
    const order = (a, b) => a.team.localeCompare(b.team) || a.age - b.age;
    assert.deepStrictEqual(got.sort(order), want.sort(order));
  });

  test("aggregates over a field no item has: undefined values, counted and summed as zero", async () => {
    const got = await query(`SELECT
        c.age,
        AVG(c.doesNotExist) AS undefined_avg,
        MIN(c.doesNotExist) AS undefined_min,
        MAX(c.doesNotExist) AS undefined_max,
        COUNT(c.doesNotExist) AS undefined_count,
        SUM(c.doesNotExist) AS undefined_sum
      FROM c
      GROUP BY c.age`);
    const want = groupsOf(
      (d) => d.age,
      (m) => ({
        age: m[0].age,
        undefined_count: 0,
        undefined_sum: 0,
        undefined_min: undefined,
        undefined_max: undefined,
        undefined_avg: undefined,
      }),
    );
    assert.deepStrictEqual(got.sort(byAge), want.sort(byAge));
  });

  test("AVG of a string constant: the alias with the value undefined", async () => {
    const got = await query('SELECT AVG("asdf") AS avg_asdf FROM c GROUP BY c.age');
    assert.deepStrictEqual(got, Array.from({ length: 8 }, () => ({ avg_asdf: undefined })));
  });

  test("a grouped field no item has is left out of the results", async () => {
    const got = await query("SELECT c.age, c.doesNotExist FROM c GROUP BY c.age, c.doesNotExist");
    assert.deepStrictEqual(got.sort(byAge), groupsOf((d) => d.age, (m) => ({ age: m[0].age })).sort(byAge));
  });

  test("WHERE before GROUP BY", async () => {
    const got = await query("SELECT c.team, COUNT(1) AS n FROM c WHERE c.age >= 15 GROUP BY c.team");
    const want = groupsOf(
      (d) => d.team,
      (m) => ({ team: m[0].team, n: m.filter((d) => d.age >= 15).length }),
    ).filter((g) => g.n > 0);
    const order = (a, b) => a.team.localeCompare(b.team);
    assert.deepStrictEqual(got.sort(order), want.sort(order));
  });

  test("an unnamed aggregate and a grouped expression keep the service's aliases", async () => {
    const got = await query("SELECT UPPER(c.name) AS shout, COUNT(1) FROM c GROUP BY UPPER(c.name)");
    const want = groupsOf(
      (d) => d.name,
      (m) => ({ shout: m[0].name.toUpperCase(), $1: m.length }),
    );
    const order = (a, b) => a.shout.localeCompare(b.shout);
    assert.deepStrictEqual(got.sort(order), want.sort(order));
  });

  test("parameters reach the rewritten query", async () => {
    const { resources } = await container.items
      .query({ query: "SELECT c.team, MAX(c.age) AS hi FROM c WHERE c.age < @limit GROUP BY c.team", parameters: [{ name: "@limit", value: 15 }] })
      .fetchAll();
    const want = groupsOf(
      (d) => d.team,
      (m) => ({ team: m[0].team, hi: Math.max(...m.filter((d) => d.age < 15).map((d) => d.age)) }),
    );
    const order = (a, b) => a.team.localeCompare(b.team);
    assert.deepStrictEqual(resources.sort(order), want.sort(order));
  });

  test("fetchNext pages end with every group once", async () => {
    const it = container.items.query("SELECT c.age FROM c GROUP BY c.age", { maxItemCount: 2 });
    const got = [];
    let pages = 0;
    while (it.hasMoreResults()) {
      const { resources } = await it.fetchNext();
      if (resources) got.push(...resources);
      assert.ok(++pages < 1000, "fetchNext does not finish");
    }
    assert.deepStrictEqual(got.sort(byAge), groupsOf((d) => d.age, (m) => ({ age: m[0].age })).sort(byAge));
  });

  test("MAKELIST and MAKESET per group: the ranges' lists concatenated, their sets united", async () => {
    const { resources: got, diagnostics } = await container.items
      .query("SELECT c.team, MAKELIST(c.age) AS ages, MAKESET(c.age) AS distinctAges FROM c GROUP BY c.team", { maxItemCount: 7 })
      .fetchAll();
    // The SDK merged them itself, over every range.
    const gateway = diagnostics.clientSideRequestStatistics.gatewayStatistics;
    const ranges = new Set(gateway.filter((g) => g.partitionKeyRangeId).map((g) => g.partitionKeyRangeId));
    assert.ok(ranges.size >= 3, `queried ranges ${[...ranges]}`);
    const want = groupsOf((d) => d.team, (m) => ({ team: m[0].team, ages: m.map((d) => d.age), distinctAges: [...new Set(m.map((d) => d.age))] }));
    const canon = (rows) =>
      rows
        .map((r) => ({ team: r.team, ages: [...r.ages].sort(), distinctAges: [...r.distinctAges].sort() }))
        .sort((a, b) => a.team.localeCompare(b.team));
    assert.deepStrictEqual(canon(got), canon(want));
  });

  test("VALUE GROUP BY still answers", async () => {
    const got = await query("SELECT VALUE c.team FROM c GROUP BY c.team");
    assert.deepStrictEqual(got.sort(), ["A", "B", "C", "D"]);
  });
});
