// Unit tests of the explorer's search functions (assets/search.js): which
// queries are searches, the plan's placeholders, the global statistics of
// several answers, RRF's fusion by rank, and the index utilization header.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { componentNames, fill, fuse, indexesUsed, isSearchQuery, mergeStats, negatedComponents } from '../assets/search.js';

test('search queries are those ranking by VectorDistance, FullTextScore or RRF', () => {
  assert.ok(isSearchQuery('SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, [1, 2])'));
  assert.ok(isSearchQuery("select top 3 c.id from c order by rank fulltextscore(c.t, 'x')"));
  assert.ok(!isSearchQuery("SELECT c.id FROM c WHERE FullTextContains(c.t, 'x')"));
  assert.ok(!isSearchQuery('SELECT c.id FROM c ORDER BY c.id'));
  assert.deepEqual(componentNames("SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'a'), VectorDistance(c.v, [1]), FullTextScore(c.u, 'b'))"),
    ['FullTextScore', 'VectorDistance', 'FullTextScore']);
});

test('fill puts the filter and the global statistics in place of the placeholders', () => {
  const q = 'SELECT c._rid FROM c WHERE ({documentdb-formattableorderbyquery-filter}) ORDER BY _FullTextScore(c.t, ["a", "b"], '
    + '{documentdb-formattablehybridsearchquery-totaldocumentcount}, {documentdb-formattablehybridsearchquery-totalwordcount-0}, '
    + '{documentdb-formattablehybridsearchquery-hitcountsarray-0})';
  const stats = mergeStats([
    { documentCount: 3, fullTextStatistics: [{ totalWordCount: 10, hitCounts: [1, 0] }] },
    { documentCount: 2, fullTextStatistics: [{ totalWordCount: 7, hitCounts: [1, 2] }] },
  ]);
  assert.deepEqual(stats, { documentCount: 5, fullTextStatistics: [{ totalWordCount: 17, hitCounts: [2, 2] }] });
  assert.equal(fill(q, stats), 'SELECT c._rid FROM c WHERE (true) ORDER BY _FullTextScore(c.t, ["a", "b"], 5, 17, [2,2])');
});

test('RRF sums weight / (60 + rank) over the components, a row found twice counted once', () => {
  const rows = [
    { _rid: 'a', payload: { id: 'a' }, componentScores: [3, 0.1] },
    { _rid: 'b', payload: { id: 'b' }, componentScores: [2, 0.9] },
    { _rid: 'c', payload: { id: 'c' }, componentScores: [1, 0.5] },
    { _rid: 'a', payload: { id: 'a' }, componentScores: [3, 0.1] },
  ];
  const out = fuse(rows, [1, 2], 0, 2);
  // a ranks 1st and 3rd, b 2nd and 1st, c 3rd and 2nd.
  assert.deepEqual(out.map((r) => r.payload.id), ['b', 'a']);
  assert.equal(out[0].rrf, 1 / 62 + 2 / 61);
  assert.equal(out[1].rrf, 1 / 61 + 2 / 63);
  assert.deepEqual(fuse(rows, [], 1, 1).map((r) => r.payload.id), ['a']);
});

test('RRF ranks rows of equal scores alike, the next score one rank lower, as the SDKs do', () => {
  const rows = [
    { _rid: 'a', payload: { id: 'a' }, componentScores: [5, 0.1] },
    { _rid: 'b', payload: { id: 'b' }, componentScores: [4, 0.3] },
    { _rid: 'c', payload: { id: 'c' }, componentScores: [4, 0.2] },
    { _rid: 'd', payload: { id: 'd' }, componentScores: [1, 0.4] },
  ];
  const out = fuse(rows, [], 0, 4);
  // Ranks by the first score: a 1, b and c 2, d 3 (not 4); by the second: d, b, c, a.
  const want = { a: 1 / 61 + 1 / 64, b: 1 / 62 + 1 / 62, c: 1 / 62 + 1 / 63, d: 1 / 63 + 1 / 61 };
  assert.deepEqual(out.map((r) => r.payload.id), ['d', 'b', 'a', 'c']);
  out.forEach((r) => assert.equal(r.rrf, want[r.payload.id], r.payload.id));
});

test('rows of equal RRF keep the order they came in, or the server\'s answer\'s order when given', () => {
  const rows = [
    { _rid: 'a', payload: { id: 'a' }, componentScores: [2, 1] },
    { _rid: 'b', payload: { id: 'b' }, componentScores: [1, 2] },
  ];
  assert.deepEqual(fuse(rows, [], 0, 2).map((r) => r.payload.id), ['a', 'b']);
  assert.deepEqual(fuse(rows, [], 0, 2, [{ id: 'b' }, { id: 'a' }]).map((r) => r.payload.id), ['b', 'a']);
  assert.deepEqual(fuse(rows, [], 0, 2, [{ id: 'b' }]).map((r) => r.payload.id), ['b', 'a']);
  assert.deepEqual(fuse(rows, [], 0, 2, []).map((r) => r.payload.id), ['a', 'b']);
});

test('the component scores a plan projects negated are read from its component query', () => {
  // As the server's newer plan form writes them: a euclidean distance
  // (ranked lowest first) negated, a cosine similarity and a BM25 as they are.
  const q = 'SELECT TOP 12 c._rid, {"id": c.id, "t": "a, [b]"} AS payload, '
    + '[(_FullTextScore(c.t, ["x, y"], 5, 17, [2,2]) ?? -1.7976931348623157e+308), '
    + '(-1 * (_VectorScore(c.w, [0.5, -1, 2]) ?? 1.7976931348623157e+308)), '
    + '(_VectorScore(c.v, [1, 2, 3]) ?? -1.7976931348623157e+308)] AS componentScores\nFROM c\nORDER BY _VectorScore(c.w, [0.5, -1, 2])';
  assert.deepEqual(negatedComponents(q), [false, true, false]);
  assert.deepEqual(negatedComponents('SELECT c._rid FROM c ORDER BY _VectorScore(c.v, [1])'), []);
  assert.deepEqual(negatedComponents(undefined), []);
});

test('the index utilization header reads as the indexes used, in UTF-8', () => {
  const doc = { UtilizedSingleIndexes: [{ FilterExpression: 'ORDER BY VectorDistance(c.v, …)', IndexSpec: '/v (flat vector index)' }], PotentialSingleIndexes: [] };
  const b64 = Buffer.from(JSON.stringify(doc)).toString('base64');
  assert.deepEqual(indexesUsed(b64), [{ index: '/v (flat vector index)', filter: 'ORDER BY VectorDistance(c.v, …)' }]);
  assert.deepEqual(indexesUsed(encodeURIComponent(JSON.stringify(doc))), indexesUsed(b64));
  assert.deepEqual(indexesUsed(null), []);
});
