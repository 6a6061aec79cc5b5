// Browser tests of the explorer's scores for vector, full-text and hybrid
// search: a container with a vector embedding policy, a full-text policy
// and their indexes, queried from the Query tab with ORDER BY
// VectorDistance, ORDER BY RANK FullTextScore and RRF. The scores shown
// must be the ones the service's semantics give: VectorDistance as the
// server projects it for the same query, BM25 (k1 = 1.2, b = 0.75) and RRF
// (1 / (60 + rank) per component) computed here from the items; and the
// order and VectorDistance values must be what the official JavaScript
// SDK returns for the same queries, across partition key ranges and in one
// partition.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { close, launch, newPage, openContainer, pk, rest, shots, signIn } from './helpers.mjs';

before(launch);
after(close);

// Every text holds "comet" (so every item has a BM25 score) with its own
// count and length, and every vector its own angle to the query's: no ties.
const ITEMS = [
  { id: 's1', pk: 'a', text: 'comet orbit', v: [1, 0, 0] },
  { id: 's2', pk: 'b', text: 'comet comet dust moon', v: [0.9, 0.5, 0.1] },
  { id: 's3', pk: 'a', text: 'comet star star star star moon', v: [0.2, 1, 0] },
  { id: 's4', pk: 'b', text: 'comet comet comet nebula', v: [0, 0.3, 1] },
  { id: 's5', pk: 'a', text: 'comet dust dust dust dust dust dust orbit', v: [0.7, 0.7, 0.7] },
  { id: 's6', pk: 'b', text: 'comet moon moon', v: [1, 0.45, 0.05] },
];
const QVEC = [1, 0.5, 0];

/** bm25 scores each item's text for one keyword, as the service does. */
function bm25(keyword) {
  const terms = ITEMS.map((it) => it.text.split(' '));
  const n = terms.length;
  const avgdl = terms.reduce((s, t) => s + t.length, 0) / n;
  const df = terms.filter((t) => t.includes(keyword)).length;
  const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
  return new Map(ITEMS.map((it, i) => {
    const tf = terms[i].filter((w) => w === keyword).length;
    return [it.id, idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * terms[i].length / avgdl))];
  }));
}

function cosine(a, b) {
  const dot = a.reduce((s, x, i) => s + x * b[i], 0);
  return dot / Math.sqrt(a.reduce((s, x) => s + x * x, 0) * b.reduce((s, x) => s + x * x, 0));
}

/** rrf fuses score maps (each highest best) by rank. */
function rrf(...maps) {
  const out = new Map(ITEMS.map((it) => [it.id, 0]));
  for (const m of maps) {
    [...m.entries()].sort((x, y) => y[1] - x[1]).forEach(([id], i) => out.set(id, out.get(id) + 1 / (60 + i + 1)));
  }
  return out;
}

const close9 = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));

/** runQuery runs a query in the Query tab and returns the scores table and the result ids. */
async function runQuery(page, query) {
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill(query);
  await page.getByRole('button', { name: 'Run query' }).click();
  const table = page.getByRole('region', { name: 'Scores table' });
  await table.waitFor();
  const headers = await table.locator('thead th').allTextContents();
  const rows = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
  const resultIds = await page.getByRole('table', { name: 'Query results' }).locator('tbody tr td:first-child').allTextContents();
  const indexes = await page.locator('#panel-query [data-index]').allTextContents();
  return { headers, rows, resultIds, indexes };
}

test('search queries show each result\'s score and the index that served it', async () => {
  assert.equal((await rest('POST', ['dbs'], { body: { id: 'search' } })).status, 201);
  const created = await rest('POST', ['dbs', 'search', 'colls'], {
    body: {
      id: 'docs',
      partitionKey: { paths: ['/pk'], kind: 'Hash' },
      vectorEmbeddingPolicy: { vectorEmbeddings: [{ path: '/v', dataType: 'float32', dimensions: 3, distanceFunction: 'cosine' }] },
      fullTextPolicy: { defaultLanguage: 'en-US', fullTextPaths: [{ path: '/text', language: 'en-US' }] },
      indexingPolicy: {
        includedPaths: [{ path: '/*' }], excludedPaths: [{ path: '/v/*' }],
        vectorIndexes: [{ path: '/v', type: 'flat' }], fullTextIndexes: [{ path: '/text' }],
      },
    },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  for (const it of ITEMS) {
    assert.equal((await rest('POST', ['dbs', 'search', 'colls', 'docs', 'docs'], { body: it, headers: pk(it.pk) })).status, 201);
  }

  const { page, context, errors } = await newPage();
  await signIn(page);
  await openContainer(page, 'search', 'docs');
  await page.getByRole('tab', { name: 'Query' }).click();

  // ORDER BY VectorDistance: the scores are the ones the server projects
  // for the same query (as an SDK reads them), highest similarity first.
  const vq = `SELECT TOP 4 c.id FROM c ORDER BY VectorDistance(c.v, ${JSON.stringify(QVEC)})`;
  const vec = await runQuery(page, vq);
  assert.deepEqual(vec.headers, ['#', 'VectorDistance', 'id']);
  const projected = await rest('POST', ['dbs', 'search', 'colls', 'docs', 'docs'], {
    body: { query: `SELECT TOP 4 c.id, VectorDistance(c.v, ${JSON.stringify(QVEC)}) AS score FROM c ORDER BY VectorDistance(c.v, ${JSON.stringify(QVEC)})`, parameters: [] },
    headers: { 'content-type': 'application/query+json', 'x-ms-documentdb-isquery': 'True', 'x-ms-documentdb-partitionkeyrangeid': '0', 'x-ms-documentdb-query-enablecrosspartition': 'True' },
  });
  assert.equal(projected.status, 200);
  assert.deepEqual(vec.rows.map((r) => r[2]), projected.body.Documents.map((d) => d.id));
  vec.rows.forEach((r, i) => {
    assert.equal(r[0], String(i + 1));
    assert.equal(Number(r[1]), projected.body.Documents[i].score, `${r[2]}'s VectorDistance`);
    assert.ok(close9(Number(r[1]), cosine(ITEMS.find((it) => it.id === r[2]).v, QVEC)));
  });
  assert.deepEqual(vec.resultIds, vec.rows.map((r) => r[2]), 'the scores are in the order of the results');
  assert.deepEqual(vec.indexes, ['/v (flat vector index): ORDER BY VectorDistance(c.v, …)']);
  await shots(page, '30-search-vector-scores');

  // ORDER BY RANK FullTextScore: BM25 over the container's statistics.
  const ftq = "SELECT TOP 3 c.id FROM c ORDER BY RANK FullTextScore(c.text, 'comet')";
  const ft = await runQuery(page, ftq);
  assert.deepEqual(ft.headers, ['#', 'FullTextScore', 'id']);
  const want = bm25('comet');
  const best = [...want.entries()].sort((x, y) => y[1] - x[1]).slice(0, 3);
  assert.deepEqual(ft.rows.map((r) => r[2]), best.map(([id]) => id));
  ft.rows.forEach((r, i) => assert.ok(close9(Number(r[1]), best[i][1]), `${r[2]}: BM25 ${r[1]}, want ${best[i][1]}`));
  assert.deepEqual(ft.resultIds, best.map(([id]) => id));
  assert.ok(ft.indexes.some((t) => /\/text \(full-text index\)/.test(t)), `the full-text index is named: ${ft.indexes}`);

  // RRF of both: the fused score and each component's.
  const hq = `SELECT TOP 3 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'comet'), VectorDistance(c.v, ${JSON.stringify(QVEC)}))`;
  const hy = await runQuery(page, hq);
  assert.deepEqual(hy.headers, ['#', 'RRF', 'FullTextScore', 'VectorDistance', 'id']);
  const sims = new Map(ITEMS.map((it) => [it.id, cosine(it.v, QVEC)]));
  const fused = [...rrf(want, sims).entries()].sort((x, y) => y[1] - x[1]).slice(0, 3);
  assert.deepEqual(hy.rows.map((r) => r[4]), fused.map(([id]) => id));
  hy.rows.forEach((r, i) => {
    assert.ok(close9(Number(r[1]), fused[i][1]), `${r[4]}: RRF ${r[1]}, want ${fused[i][1]}`);
    assert.ok(close9(Number(r[2]), want.get(r[4])), `${r[4]}: BM25 ${r[2]}`);
    assert.ok(close9(Number(r[3]), sims.get(r[4])), `${r[4]}: similarity ${r[3]}`);
  });
  assert.deepEqual(hy.resultIds, fused.map(([id]) => id), 'the server ranks as the scores say');
  await shots(page, '31-search-hybrid-scores');

  // Scoped to one partition: the scores of its items only, the same ones.
  await page.getByRole('textbox', { name: 'Partition key value' }).fill('a');
  const inA = await runQuery(page, vq);
  const aIds = ITEMS.filter((it) => it.pk === 'a').map((it) => it.id);
  assert.deepEqual(inA.rows.map((r) => r[2]).sort(), aIds);
  assert.deepEqual(inA.resultIds, inA.rows.map((r) => r[2]));
  inA.rows.forEach((r) => assert.equal(Number(r[1]), Number(vec.rows.find((v) => v[2] === r[2])?.[1] ?? cosine(ITEMS.find((it) => it.id === r[2]).v, QVEC))));
  await page.getByRole('textbox', { name: 'Partition key value' }).fill('');

  // A query without search shows no scores.
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT c.id FROM c ORDER BY c.id');
  await page.getByRole('button', { name: 'Run query' }).click();
  await page.getByRole('table', { name: 'Query results' }).getByText('s6').waitFor();
  assert.equal(await page.getByRole('region', { name: 'Scores table' }).count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

// The same queries through the official JavaScript SDK (@azure/cosmos, the
// version compat/js pins), on a container of three partition key ranges:
// the SDK sends the plan's rewritten queries to every range and merges
// their answers itself. The explorer must rank as it does, across the
// ranges and in one partition, and show the VectorDistance values it
// returns.
// Texts of distinct lengths, but r24 and r25 repeat r04's and r05's: their
// BM25 scores tie, and RRF ranks tied rows alike (1, 2, 2, 3).
const RANKED = Array.from({ length: 26 }, (_, i) => ({
  id: `r${String(i).padStart(2, '0')}`,
  pk: ['a', 'b', 'c', 'd'][i % 4],
  text: [...Array(1 + (i % 4)).fill('comet'), ...Array(i < 24 ? i + 1 : [5, 6][i - 24]).fill('dust')].join(' '),
  v: [Math.cos(i * 0.37), Math.sin(i * 0.53), ((i * 7) % 5) / 7],
  w: [Math.cos(i * 0.61) * 2, Math.sin(i * 0.29), (i % 3) / 5],
}));

test('the explorer ranks and scores search queries as the JavaScript SDK returns them, across ranges and in one partition', async () => {
  const { CosmosClient } = await import('@azure/cosmos');
  const db = await rest('POST', ['dbs'], { body: { id: 'search' } });
  assert.ok(db.status === 201 || db.status === 409, JSON.stringify(db.body));
  const created = await rest('POST', ['dbs', 'search', 'colls'], {
    body: {
      id: 'ranked',
      partitionKey: { paths: ['/pk'], kind: 'Hash' },
      vectorEmbeddingPolicy: { vectorEmbeddings: [
        { path: '/v', dataType: 'float32', dimensions: 3, distanceFunction: 'cosine' },
        { path: '/w', dataType: 'float32', dimensions: 3, distanceFunction: 'euclidean' },
      ] },
      fullTextPolicy: { defaultLanguage: 'en-US', fullTextPaths: [{ path: '/text', language: 'en-US' }] },
      indexingPolicy: {
        includedPaths: [{ path: '/*' }], excludedPaths: [{ path: '/v/*' }, { path: '/w/*' }],
        vectorIndexes: [{ path: '/v', type: 'flat' }, { path: '/w', type: 'flat' }], fullTextIndexes: [{ path: '/text' }],
      },
    },
    headers: { 'x-ms-offer-throughput': '30000' },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const ranges = await rest('GET', ['dbs', 'search', 'colls', 'ranked', 'pkranges']);
  assert.ok(ranges.body.PartitionKeyRanges.length >= 3, `${ranges.body.PartitionKeyRanges.length} partition key ranges`);
  for (const it of RANKED) {
    assert.equal((await rest('POST', ['dbs', 'search', 'colls', 'ranked', 'docs'], { body: it, headers: pk(it.pk) })).status, 201);
  }
  const sdk = new CosmosClient({ endpoint: process.env.ORRERY_ENDPOINT, key: process.env.ORRERY_KEY }).database('search').container('ranked');

  const { page, context, errors } = await newPage();
  await signIn(page);
  await openContainer(page, 'search', 'ranked');
  await page.getByRole('tab', { name: 'Query' }).click();

  const qv = JSON.stringify([0.8, 0.4, 0.3]);
  // Each item's VectorDistance by each path, as the server projects it.
  const projected = `SELECT c.id, VectorDistance(c.v, ${qv}) AS v, VectorDistance(c.w, ${qv}) AS w FROM c`;
  const dist = new Map((await sdk.items.query(projected).fetchAll()).resources.map((d) => [d.id, d]));
  const vectorQueries = [
    `SELECT TOP 7 c.id, VectorDistance(c.v, ${qv}) AS score FROM c ORDER BY VectorDistance(c.v, ${qv})`,
    `SELECT TOP 7 c.id, VectorDistance(c.w, ${qv}) AS score FROM c ORDER BY VectorDistance(c.w, ${qv})`,
    `SELECT TOP 5 c.id, VectorDistance(c.w, ${qv}) AS score FROM c WHERE c.pk != 'c' ORDER BY VectorDistance(c.w, ${qv})`,
  ];
  const rankQueries = [
    "SELECT TOP 7 c.id FROM c ORDER BY RANK FullTextScore(c.text, 'comet')",
    "SELECT TOP 5 c.id FROM c ORDER BY RANK FullTextScore(c.text, 'dust', 'comet')",
    `SELECT TOP 7 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'comet'), VectorDistance(c.v, ${qv}))`,
    `SELECT TOP 7 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.w, ${qv}), FullTextScore(c.text, 'dust'))`,
    `SELECT TOP 6 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'comet'), VectorDistance(c.v, ${qv}), VectorDistance(c.w, ${qv}), [1, 0.5, 2])`,
    // Few results: each range's component queries return their own top
    // 12 × (skip + take) rows, fewer than the container's, and RRF ranks
    // the rows of every range's answers together.
    `SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'dust'), VectorDistance(c.v, ${qv}))`,
    `SELECT TOP 2 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.w, ${qv}), FullTextScore(c.text, 'comet'))`,
    `SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'comet'), VectorDistance(c.v, ${qv})) OFFSET 1 LIMIT 1`,
    `SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'dust'), VectorDistance(c.w, ${qv}), [1, 3])`,
    `SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.v, ${qv}), VectorDistance(c.w, ${qv}))`,
    `SELECT TOP 2 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'comet'), VectorDistance(c.w, ${qv}), [3, 1])`,
    `SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.text, 'dust'), FullTextScore(c.text, 'comet'))`,
    `SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.v, ${qv}), FullTextScore(c.text, 'dust'), [2, 1])`,
    // A negative weight ranks its component the other way round.
    `SELECT TOP 4 c.id FROM c ORDER BY RANK RRF(VectorDistance(c.w, ${qv}), FullTextScore(c.text, 'dust'), VectorDistance(c.v, ${qv}), [-1, 1, -0.5])`,
  ];
  for (const scope of [undefined, 'a', 'd']) {
    await page.getByRole('textbox', { name: 'Partition key value' }).fill(scope ?? '');
    const where = scope === undefined ? 'across the ranges' : `in partition ${scope}`;
    for (const q of [...vectorQueries, ...rankQueries]) {
      const { resources } = await sdk.items.query(q, scope === undefined ? {} : { partitionKey: scope }).fetchAll();
      assert.ok(resources.length > 0, `the SDK finds items for ${q} ${where}`);
      const shown = await runQuery(page, q);
      const idAt = shown.headers.indexOf('id');
      assert.deepEqual(shown.rows.map((r) => r[idAt]), resources.map((d) => d.id), `the explorer ranks ${q} ${where} as the SDK does; it shows ${JSON.stringify(shown.rows)}`);
      assert.deepEqual(shown.resultIds, resources.map((d) => d.id), `the explorer's results of ${q} ${where} are the SDK's`);
      if (shown.headers[1] === 'VectorDistance') {
        shown.rows.forEach((r, i) => assert.equal(Number(r[1]), resources[i].score, `${r[idAt]}'s VectorDistance for ${q} ${where}`));
      }
      if (shown.headers[1] === 'RRF') {
        // Each VectorDistance component shows the distance the function
        // gives (a euclidean one too, which RRF ranks lowest first).
        [...q.matchAll(/\b(FullTextScore|VectorDistance)\(c\.(\w+)/g)].forEach(([, fn, path], j) => {
          assert.equal(shown.headers[j + 2], fn, `component ${j + 1} of ${q}`);
          if (fn !== 'VectorDistance') return;
          for (const r of shown.rows) {
            const want = dist.get(r[idAt])[path];
            assert.ok(close9(Number(r[j + 2]), want), `${r[idAt]}'s VectorDistance(c.${path}) in ${q} ${where}: shown ${r[j + 2]}, projected ${want}`);
          }
        });
      }
    }
  }
  await page.getByRole('textbox', { name: 'Partition key value' }).fill('');
  assert.deepEqual(errors, []);
  await context.close();
});
