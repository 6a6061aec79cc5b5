// Vector, full-text and hybrid search through the JavaScript SDK: container
// policies as the service takes and returns them, and VectorDistance,
// FullTextContains, FullTextScore with ORDER BY RANK and RRF queries across
// partitions. The containers have three partition key ranges (30,000 RU/s),
// so the SDK's pipelines for these queries (the non-streaming ORDER BY of
// VectorDistance, the hybrid search of ORDER BY RANK with its global
// statistics) run over several ranges and merge their answers. Expected
// results are computed here from the documents.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { newClient, uniqueId, expectCosmosError } from "./orrery.mjs";

const client = newClient();
let db;

before(async () => {
  ({ database: db } = await client.databases.create({ id: uniqueId("jssearch") }));
});
after(async () => {
  await db.delete();
});

/** Runs a query with fetchNext page by page and returns every result. */
async function pages(container, query, options = {}) {
  const it = container.items.query(query, options);
  const out = [];
  let n = 0;
  while (it.hasMoreResults()) {
    const { resources } = await it.fetchNext();
    if (resources) out.push(...resources);
    assert.ok(++n < 10000, "fetchNext does not finish");
  }
  return out;
}

const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
const euclidean = (a, b) => Math.sqrt(a.reduce((s, x, i) => s + (x - b[i]) ** 2, 0));
const cosine = (a, b) => dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b));
const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));

describe("vector embedding policy", () => {
  test("a container keeps the embeddings and vector indexes it was created with", async () => {
    const vectorEmbeddingPolicy = {
      vectorEmbeddings: [
        { path: "/vector1", dataType: "float32", dimensions: 500, distanceFunction: "euclidean" },
        { path: "/vector2", dataType: "int8", dimensions: 200, distanceFunction: "dotproduct" },
        { path: "/vector3", dataType: "uint8", dimensions: 400, distanceFunction: "cosine" },
      ],
    };
    const indexingPolicy = {
      vectorIndexes: [
        { path: "/vector1", type: "flat" },
        { path: "/vector2", type: "quantizedFlat" },
        { path: "/vector3", type: "diskANN", quantizationByteSize: 64, indexingSearchListSize: 100 },
      ],
    };
    const { resource } = await db.containers.create({
      id: "policy",
      partitionKey: { paths: ["/pk"] },
      vectorEmbeddingPolicy,
      indexingPolicy,
    });
    assert.deepEqual(resource.vectorEmbeddingPolicy, vectorEmbeddingPolicy);
    assert.deepEqual(resource.indexingPolicy.vectorIndexes, indexingPolicy.vectorIndexes);
    const { resource: read } = await db.container("policy").read();
    assert.deepEqual(read.vectorEmbeddingPolicy, vectorEmbeddingPolicy);

    // The embeddings' indexes cannot change on a replace, even when the
    // replace leaves the embedding policy out.
    const err = await expectCosmosError(() =>
      db.container("policy").replace({
        id: "policy",
        partitionKey: { paths: ["/pk"] },
        indexingPolicy: { vectorIndexes: [{ path: "/vector1", type: "quantizedFlat" }, ...indexingPolicy.vectorIndexes.slice(1)] },
      }),
    );
    assert.equal(err.code, 400);
    assert.match(err.body.message, /cannot be modified in Collection Replace/);
  });

  test("a vector index needs an embedding at its path", async () => {
    let err = await expectCosmosError(() =>
      db.containers.create({ id: "noembedding", partitionKey: { paths: ["/pk"] }, indexingPolicy: { vectorIndexes: [{ path: "/vector1", type: "flat" }] } }),
    );
    assert.equal(err.code, 400);
    err = await expectCosmosError(() =>
      db.containers.create({
        id: "mismatch",
        partitionKey: { paths: ["/pk"] },
        vectorEmbeddingPolicy: { vectorEmbeddings: [{ path: "/vector1", dataType: "float32", dimensions: 2, distanceFunction: "cosine" }] },
        indexingPolicy: { vectorIndexes: [{ path: "/vector2", type: "flat" }] },
      }),
    );
    assert.equal(err.code, 400);
    assert.ok(err.body.message.includes("vector2 not matching in Embedding's path"), err.body.message);
  });
});

describe("vector search across partitions", () => {
  let container;
  const query = [0.056419, -0.021141];
  const docs = Array.from({ length: 60 }, (_, i) => ({
    id: String(i),
    pk: `p${i % 7}`,
    kind: i % 3 === 0 ? "even" : "odd",
    vector1: [0.056419 + 0.001 * i, -0.021141 - 0.0007 * ((i * 13) % 17)],
    vector2: [Math.sin(i), Math.cos(i * 0.7)],
  }));

  before(async () => {
    ({ container } = await db.containers.create({
      id: "vectors",
      partitionKey: { paths: ["/pk"] },
      throughput: 30000,
      vectorEmbeddingPolicy: {
        vectorEmbeddings: [
          { path: "/vector1", dataType: "float32", dimensions: 2, distanceFunction: "euclidean" },
          { path: "/vector2", dataType: "float32", dimensions: 2, distanceFunction: "dotproduct" },
        ],
      },
      indexingPolicy: { vectorIndexes: [{ path: "/vector1", type: "flat" }] },
    }));
    const { resources: ranges } = await container.readPartitionKeyRanges().fetchAll();
    assert.ok(ranges.length >= 3, `the container has ${ranges.length} partition key ranges`);
    await Promise.all(docs.map((d) => container.items.create(d)));
  });

  /** The documents' ids and scores, best first by score(d) in the direction given. */
  function expected(score, ascending, keep = () => true) {
    return docs
      .filter(keep)
      .map((d) => ({ Id: d.id, similarityScore: score(d) }))
      .sort((a, b) => (ascending ? a.similarityScore - b.similarityScore : b.similarityScore - a.similarityScore));
  }

  function assertRanked(got, want) {
    assert.equal(got.length, want.length, JSON.stringify(got));
    for (let i = 0; i < want.length; i++) {
      assert.ok(close(got[i].similarityScore, want[i].similarityScore), `row ${i}: ${JSON.stringify(got[i])}, want ${JSON.stringify(want[i])}`);
    }
    assert.deepEqual(new Set(got.map((r) => r.Id)).size, got.length);
  }

  test("TOP N by Euclidean distance comes closest first, with the service's scores", async () => {
    const q = `SELECT TOP 10 c.id AS Id, VectorDistance([${query}], c.vector1, true, {distanceFunction:'euclidean'}) AS similarityScore FROM c ORDER BY VectorDistance([${query}], c.vector1, true, {distanceFunction:'euclidean'})`;
    assertRanked(await pages(container, q, { maxItemCount: 3 }), expected((d) => euclidean(query, d.vector1), true).slice(0, 10));
  });

  test("the policy's distance function orders when the query names none", async () => {
    const q = `SELECT TOP 5 c.id AS Id, VectorDistance(c.vector2, [1, 0.5]) AS similarityScore FROM c ORDER BY VectorDistance(c.vector2, [1, 0.5])`;
    assertRanked(await pages(container, q), expected((d) => dot(d.vector2, [1, 0.5]), false).slice(0, 5));
    const q1 = `SELECT TOP 5 c.id AS Id, VectorDistance(c.vector1, [${query}]) AS similarityScore FROM c ORDER BY VectorDistance(c.vector1, [${query}])`;
    assertRanked(await pages(container, q1), expected((d) => euclidean(query, d.vector1), true).slice(0, 5));
  });

  test("OFFSET LIMIT and DISTINCT over dot products, largest first", async () => {
    const want = expected((d) => dot(query, d.vector2), false);
    const q = `SELECT c.id AS Id, VectorDistance([${query}], c.vector2, true, {distanceFunction:'dotproduct'}) AS similarityScore FROM c ORDER BY VectorDistance([${query}], c.vector2, true, {distanceFunction:'dotproduct'}) OFFSET 3 LIMIT 7`;
    assertRanked(await pages(container, q, { maxItemCount: 2 }), want.slice(3, 10));
    const qd = `SELECT DISTINCT TOP 4 c.id AS Id, VectorDistance([${query}], c.vector2, true, {distanceFunction:'dotproduct'}) AS similarityScore FROM c ORDER BY VectorDistance([${query}], c.vector2, true, {distanceFunction:'dotproduct'})`;
    assertRanked(await pages(container, qd), want.slice(0, 4));
  });

  test("filters and a partition key narrow the candidates before the top N is taken", async () => {
    const q = `SELECT TOP 4 c.id AS Id, VectorDistance(c.vector1, [${query}]) AS similarityScore FROM c WHERE c.kind = 'even' ORDER BY VectorDistance(c.vector1, [${query}])`;
    assertRanked(await pages(container, q), expected((d) => euclidean(query, d.vector1), true, (d) => d.kind === "even").slice(0, 4));
    const qp = `SELECT TOP 3 c.id AS Id, VectorDistance(c.vector1, [${query}]) AS similarityScore FROM c ORDER BY VectorDistance(c.vector1, [${query}])`;
    assertRanked(await pages(container, qp, { partitionKey: "p3" }), expected((d) => euclidean(query, d.vector1), true, (d) => d.pk === "p3").slice(0, 3));
  });

  test("VectorDistance filters in WHERE", async () => {
    const q = `SELECT VALUE c.id FROM c WHERE VectorDistance(c.vector2, [1, 0]) > 0.5`;
    const got = (await pages(container, q)).sort();
    assert.deepEqual(got, docs.filter((d) => dot(d.vector2, [1, 0]) > 0.5).map((d) => d.id).sort());
  });

  test("cosine similarity when the query asks for it", async () => {
    const q = `SELECT TOP 3 c.id AS Id, VectorDistance(c.vector2, [0.3, 0.9], false, {distanceFunction:'cosine'}) AS similarityScore FROM c ORDER BY VectorDistance(c.vector2, [0.3, 0.9], false, {distanceFunction:'cosine'})`;
    assertRanked(await pages(container, q), expected((d) => cosine(d.vector2, [0.3, 0.9]), false).slice(0, 3));
  });

  test("the SDK refuses a vector search without TOP or LIMIT unless allowed, and bounds its buffer", async () => {
    const q = `SELECT c.id FROM c ORDER BY VectorDistance(c.vector1, [${query}])`;
    await assert.rejects(() => pages(container, q), /without TOP or LIMIT/);
    const all = await pages(container, q, { allowUnboundedNonStreamingQueries: true });
    assert.equal(all.length, docs.length);
    await assert.rejects(
      () => pages(container, `SELECT TOP 100 c.id FROM c ORDER BY VectorDistance(c.vector1, [${query}])`, { vectorSearchBufferSize: 50 }),
      /larger than the vectorSearchBufferSize/,
    );
  });
});

describe("vector search in a container created without a partition key", () => {
  test("euclidean closest first, dot product largest first, DISTINCT and OFFSET LIMIT", async () => {
    const { container } = await db.containers.create({
      id: "nopk",
      vectorEmbeddingPolicy: {
        vectorEmbeddings: [
          { path: "/vector1", dataType: "float32", dimensions: 2, distanceFunction: "euclidean" },
          { path: "/vector2", dataType: "float32", dimensions: 2, distanceFunction: "dotproduct" },
        ],
      },
      indexingPolicy: { vectorIndexes: [{ path: "/vector1", type: "flat" }] },
    });
    for (const [id, v] of [["1", [0.056419, -0.021141]], ["2", [0.066419, -0.031141]], ["3", [0.076419, -0.041141]]]) {
      await container.items.create({ id, vector1: v, vector2: v });
    }
    const q = "[0.056419, -0.021141]";
    const ids = (rows) => rows.map((r) => r.Id).join(",");
    let got = await pages(container, `SELECT TOP 10 c.id AS Id, VectorDistance(${q}, c.vector1, true, {distanceFunction:'euclidean'}) AS similarityScore FROM c ORDER BY VectorDistance(${q}, c.vector1, true, {distanceFunction:'euclidean'})`);
    assert.equal(ids(got), "1,2,3");
    assert.equal(got[0].similarityScore, 0);
    got = await pages(container, `SELECT DISTINCT c.id AS Id, VectorDistance(${q}, c.vector2, true, {distanceFunction:'dotProduct'}) AS similarityScore FROM c ORDER BY VectorDistance(${q}, c.vector1, true, {distanceFunction:'dotProduct'}) OFFSET 0 LIMIT 2`);
    assert.equal(ids(got), "3,2");
  });
});

describe("vector search over hundreds of items, paged", () => {
  test("LIMIT and TOP in the hundreds come back whole and in order, page by page from every range", async () => {
    const { container } = await db.containers.create({
      id: "many",
      partitionKey: { paths: ["/pk"] },
      throughput: 30000,
      vectorEmbeddingPolicy: { vectorEmbeddings: [{ path: "/vector1", dataType: "float32", dimensions: 2, distanceFunction: "dotproduct" }] },
      indexingPolicy: { vectorIndexes: [{ path: "/vector1", type: "flat" }] },
    });
    const n = 501;
    const items = Array.from({ length: n }, (_, i) => ({ id: String(i), pk: `p${i % 13}`, vector1: [0.0001 * (i + 1), 0.0001 * (i + 1)] }));
    for (let i = 0; i < n; i += 50) await Promise.all(items.slice(i, i + 50).map((d) => container.items.create(d)));
    const order = "ORDER BY VectorDistance([0.0001, 0.0001], c.vector1, true, {distanceFunction:'dotProduct'})";
    const check = (rows, want) => {
      assert.equal(rows.length, want);
      rows.forEach((r, i) => assert.equal(r.Id, String(n - 1 - i), `row ${i}`));
    };
    check(await pages(container, `SELECT c.id AS Id FROM c ${order} OFFSET 0 LIMIT 400`, { maxItemCount: 50 }), 400);
    check(await pages(container, `SELECT DISTINCT TOP 300 c.id AS Id FROM c ${order}`), 300);
    const skipped = await pages(container, `SELECT c.id AS Id FROM c ${order} OFFSET 100 LIMIT 50`);
    assert.deepEqual(skipped.map((r) => r.Id), items.slice(n - 150, n - 100).reverse().map((d) => d.id));
  });
});

describe("full-text and hybrid search across partitions", () => {
  let container;
  // Words that are their own stems and no stop words, so that the English
  // analyzer's terms are the words themselves.
  const words = ["swim", "run", "bike", "ocean", "lake", "fast", "blue", "red", "hill", "road"];
  const docs = Array.from({ length: 40 }, (_, i) => {
    const n = 2 + (i % 5);
    const text = Array.from({ length: n }, (_, k) => words[(i * 7 + k * k * 3 + k) % words.length]).join(" ");
    return { id: `t${i}`, pk: `p${i % 5}`, text, text2: `I do not like to ${words[i % words.length]}`, image: [i % 4, (i * 3) % 5, 1] };
  });

  before(async () => {
    ({ container } = await db.containers.create({
      id: "texts",
      partitionKey: { paths: ["/pk"] },
      throughput: 30000,
      fullTextPolicy: {
        defaultLanguage: "en-US",
        fullTextPaths: [
          { path: "/text", language: "en-US" },
          { path: "/text2", language: "en-US" },
        ],
      },
      vectorEmbeddingPolicy: { vectorEmbeddings: [{ path: "/image", dataType: "float32", dimensions: 3, distanceFunction: "euclidean" }] },
      indexingPolicy: { fullTextIndexes: [{ path: "/text" }, { path: "/text2" }] },
    }));
    await Promise.all(docs.map((d) => container.items.create(d)));
  });

  test("the full-text policy and indexes read back as created", async () => {
    const { resource } = await container.read();
    assert.equal(resource.fullTextPolicy.defaultLanguage, "en-US");
    assert.deepEqual(resource.fullTextPolicy.fullTextPaths.map((p) => p.path), ["/text", "/text2"]);
    assert.deepEqual(resource.indexingPolicy.fullTextIndexes, [{ path: "/text" }, { path: "/text2" }]);
  });

  test("FullTextContains, FullTextContainsAll and FullTextContainsAny match stemmed words", async () => {
    const has = (d, w) => d.text.split(" ").includes(w);
    let got = await pages(container, `SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'Swimming')`);
    assert.deepEqual(got.sort(), docs.filter((d) => has(d, "swim")).map((d) => d.id).sort());
    got = await pages(container, `SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.text, 'lakes', 'red')`);
    assert.deepEqual(got.sort(), docs.filter((d) => has(d, "lake") && has(d, "red")).map((d) => d.id).sort());
    got = await pages(container, `SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'hills', 'roads')`);
    assert.deepEqual(got.sort(), docs.filter((d) => has(d, "hill") || has(d, "road")).map((d) => d.id).sort());
  });

  /** BM25 over the whole container, as the service ranks. */
  function bm25(keywords) {
    const terms = docs.map((d) => d.text.split(" "));
    const n = terms.length;
    const avg = terms.reduce((s, t) => s + t.length, 0) / n;
    const idf = keywords.map((k) => {
      const h = terms.filter((t) => t.includes(k)).length;
      return Math.log(1 + (n - h + 0.5) / (h + 0.5));
    });
    return new Map(
      docs.map((d, i) => {
        let s = 0;
        keywords.forEach((k, j) => {
          const f = terms[i].filter((w) => w === k).length;
          if (f > 0) s += (idf[j] * f * 2.2) / (f + 1.2 * (0.25 + (0.75 * terms[i].length) / avg));
        });
        return [d.id, s];
      }),
    );
  }

  test("ORDER BY RANK FullTextScore ranks by BM25 over the container", async () => {
    const scores = bm25(["swim", "ocean"]);
    const want = [...scores.values()].filter((s) => s > 0).sort((a, b) => b - a).slice(0, 10);
    for (const options of [{}, { disableHybridSearchQueryPlanOptimization: true }]) {
      const got = await pages(container, "SELECT TOP 10 c.id FROM c ORDER BY RANK FullTextScore(c.text, 'swim', 'ocean')", options);
      assert.equal(got.length, want.length, JSON.stringify(got));
      got.forEach((r, i) => assert.ok(close(scores.get(r.id), want[i]), `row ${i}: ${r.id} scores ${scores.get(r.id)}, want ${want[i]}`));
    }
    // With a partition key the SDK's pipeline reads that partition only.
    const inP1 = await pages(container, "SELECT TOP 20 c.id, c.pk FROM c ORDER BY RANK FullTextScore(c.text, 'swim', 'ocean')", { partitionKey: "p1" });
    assert.deepEqual(inP1.map((r) => r.id).sort(), docs.filter((d) => d.pk === "p1").map((d) => d.id).sort());
    // The SDK's own full-text tests cap each operation at 200 RU: a small
    // container's hybrid search (statistics and component queries over
    // three ranges) stays well under it.
    const all = await container.items.query("SELECT TOP 10 * FROM c ORDER BY RANK FullTextScore(c.text, ['swim', 'run'])").fetchAll({ ruCapPerOperation: 200 });
    assert.ok(all.resources.length > 0 && all.resources.every((d) => d.text !== undefined));
    assert.ok(all.requestCharge > 2 && all.requestCharge < 200, `charge ${all.requestCharge}`);
  });

  test("RRF fuses full-text ranks with filters, and with a vector rank", async () => {
    const q =
      "SELECT TOP 10 c.id FROM c WHERE FullTextContains(c.text2, 'swim') ORDER BY RANK RRF(FullTextScore(c.text, ['swim', 'run']), FullTextScore(c.text2, ['swim', 'run']))";
    const got = await pages(container, q);
    assert.deepEqual(got.map((r) => r.id).sort(), docs.filter((d) => d.text2.endsWith("swim")).map((d) => d.id).sort());

    // The item best in both ranks comes first.
    const best = { id: "best", pk: "p9", text: "swim swim", text2: "x", image: [0, 0, 0] };
    await container.items.create(best);
    try {
      // The newer plan (the components project their scores) and the older.
      for (const options of [{}, { disableHybridSearchQueryPlanOptimization: true }]) {
        const hybrid = await pages(
          container,
          "SELECT TOP 3 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'swim'), VectorDistance(c.image, [0, 0, 0]), [2, 1])",
          options,
        );
        assert.equal(hybrid.length, 3);
        assert.equal(hybrid[0].id, "best", JSON.stringify(options));
      }
    } finally {
      await container.item("best", "p9").delete();
    }
  });
});
