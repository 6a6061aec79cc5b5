// Scores of vector, full-text and hybrid search queries. The server's answer
// to such a query is its rows, not their scores (FullTextScore and RRF may
// only rank, not be selected), so the page asks for the query plan the SDKs
// ask for and runs its rewritten queries, as their pipelines do: the
// non-streaming ORDER BY's query returns each row's VectorDistance beside
// its payload; a hybrid search's global statistics query and component
// queries return each row's component scores (BM25, vector similarity),
// which RRF fuses by rank. Pure functions here; app.js sends the requests.

/** isSearchQuery reports whether a query ranks by VectorDistance, FullTextScore or RRF. */
export function isSearchQuery(query) {
  return /\bORDER\s+BY\b/i.test(query) && /\b(VectorDistance|FullTextScore|RRF)\s*\(/i.test(query);
}

/** The query features the page's pipeline handles, as the SDKs list theirs. */
export const SEARCH_FEATURES = 'NonStreamingOrderBy, HybridSearch, HybridSearchSkipOrderByRewrite';

/**
 * The first line that makes the server answer a rewritten query for the
 * whole container at partition key range 0, whatever its ranges (the
 * comment its own plans put before a query they send to one range).
 */
export const WHOLE_CONTAINER = '-- orrery: whole container\n';

/** The constant of reciprocal rank fusion: a row ranked r adds weight / (RRF_K + r). */
export const RRF_K = 60;

/**
 * fill replaces the placeholders of a plan's rewritten query: the ORDER BY
 * filter (none: the page reads every page) and the global statistics a
 * hybrid search's BM25 needs ({documentCount, fullTextStatistics:
 * [{totalWordCount, hitCounts}]}, the global statistics query's answer).
 */
export function fill(query, stats) {
  let q = query.replaceAll('{documentdb-formattableorderbyquery-filter}', 'true');
  if (stats) {
    q = q.replaceAll('{documentdb-formattablehybridsearchquery-totaldocumentcount}', String(stats.documentCount));
    (stats.fullTextStatistics || []).forEach((s, i) => {
      q = q.replaceAll(`{documentdb-formattablehybridsearchquery-totalwordcount-${i}}`, String(s.totalWordCount));
      q = q.replaceAll(`{documentdb-formattablehybridsearchquery-hitcountsarray-${i}}`, JSON.stringify(s.hitCounts));
    });
  }
  return q;
}

/**
 * mergeStats adds up the global statistics answers of several requests
 * (one per page or range).
 */
export function mergeStats(answers) {
  const out = { documentCount: 0, fullTextStatistics: [] };
  for (const a of answers) {
    out.documentCount += a.documentCount || 0;
    (a.fullTextStatistics || []).forEach((s, i) => {
      const t = out.fullTextStatistics[i] || (out.fullTextStatistics[i] = { totalWordCount: 0, hitCounts: [] });
      t.totalWordCount += s.totalWordCount || 0;
      (s.hitCounts || []).forEach((n, j) => { t.hitCounts[j] = (t.hitCounts[j] || 0) + n; });
    });
  }
  return out;
}

/**
 * fuse ranks a hybrid search's rows by RRF: rows are the component queries'
 * answers ({_rid, payload, componentScores}, each score highest best; a row
 * found by several components once), weights the plan's componentWeights
 * (1 each when empty). Each component ranks the rows by its score, as the
 * SDKs rank them: rows of equal scores share a rank, and the next score
 * has the next rank (1, 2, 2, 3); a row's RRF is the sum over the
 * components of weight / (60 + rank). It returns [{payload, rrf, scores}]
 * best first (equal RRFs in the order the rows came, or, given answer,
 * the order of their payloads in it), skip and take applied.
 *
 * answer is the server's own answer to the query, when the SDKs return it
 * as it is (a query scoped to one partition is sent as it is, not through
 * the plan): the server ranks rows of equal RRF in the order it reads them.
 */
export function fuse(rows, weights, skip, take, answer) {
  const byRid = new Map();
  for (const r of rows) if (!byRid.has(r._rid)) byRid.set(r._rid, r);
  const all = [...byRid.values()];
  const n = all[0]?.componentScores?.length || 0;
  const rrf = new Map(all.map((r) => [r._rid, 0]));
  for (let j = 0; j < n; j++) {
    const w = weights && weights.length ? weights[j] : 1;
    const order = [...all].sort((a, b) => b.componentScores[j] - a.componentScores[j]);
    let rank = 0;
    order.forEach((r, i) => {
      if (i === 0 || r.componentScores[j] !== order[i - 1].componentScores[j]) rank++;
      rrf.set(r._rid, rrf.get(r._rid) + w / (RRF_K + rank));
    });
  }
  const at = new Map();
  (answer || []).forEach((d, i) => { const k = JSON.stringify(d); if (!at.has(k)) at.set(k, i); });
  const place = (r) => at.get(JSON.stringify(r.payload)) ?? Infinity;
  const ranked = all.map((r) => ({ payload: r.payload, rrf: rrf.get(r._rid), scores: r.componentScores }))
    .sort((a, b) => (b.rrf - a.rrf) || (answer ? place(a) - place(b) || 0 : 0));
  const from = Math.max(skip || 0, 0);
  return ranked.slice(from, take == null ? undefined : from + take);
}

/**
 * negatedComponents reads which of a hybrid search's component scores its
 * plan projects negated: the newer form's component query projects every
 * score highest best, so a score ranked lowest first (a euclidean
 * VectorDistance, or a component of negative weight) comes back as
 * (-1 * score). It returns one boolean per element of the query's
 * [...] AS componentScores array (none when the query has no such array),
 * so that a page can show each score as the function gives it.
 */
export function negatedComponents(rewrittenQuery) {
  const q = rewrittenQuery || '';
  const end = q.search(/\]\s+AS\s+componentScores\b/i);
  if (end < 0) return [];
  // Walk the query up to the array's closing bracket, keeping the opening
  // brackets not yet closed and stepping over string literals.
  const open = [];
  let quote = '';
  for (let i = 0; i < end; i++) {
    const ch = q[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = '';
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '[' || ch === '(' || ch === '{') open.push(i);
    else if (ch === ']' || ch === ')' || ch === '}') open.pop();
  }
  const start = open.pop();
  if (start === undefined) return [];
  // Split the array's elements at its own commas.
  const elems = [];
  let depth = 0;
  let from = start + 1;
  quote = '';
  for (let i = start + 1; i < end; i++) {
    const ch = q[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = '';
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '[' || ch === '(' || ch === '{') depth++;
    else if (ch === ']' || ch === ')' || ch === '}') depth--;
    else if (ch === ',' && depth === 0) {
      elems.push(q.slice(from, i));
      from = i + 1;
    }
  }
  elems.push(q.slice(from, end));
  return elems.map((e) => /^\(\s*-1\s*\*/.test(e.trim()));
}

/**
 * componentNames names a hybrid search's components from its ORDER BY
 * RANK expression: the function of each argument of RRF (or the one
 * FullTextScore), in order.
 */
export function componentNames(query) {
  const m = /ORDER\s+BY\s+RANK\s+(.*)$/is.exec(query);
  if (!m) return [];
  return [...m[1].matchAll(/\b(FullTextScore|VectorDistance)\s*\(/gi)].map((x) => x[1]);
}

/**
 * indexesUsed reads the x-ms-cosmos-index-utilization header (base64 JSON)
 * into the indexes that served the query: [{index, filter}].
 */
export function indexesUsed(header) {
  if (!header) return [];
  let doc;
  try {
    // base64 of UTF-8 JSON (a filter holds "…").
    doc = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(header), (c) => c.charCodeAt(0))));
  } catch {
    try {
      doc = JSON.parse(decodeURIComponent(header));
    } catch {
      return [];
    }
  }
  return (doc.UtilizedSingleIndexes || []).map((u) => ({ index: u.IndexSpec, filter: u.FilterExpression }));
}
