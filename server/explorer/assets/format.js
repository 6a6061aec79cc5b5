// Pure helpers of the explorer's views, kept apart from the page so that
// node can test them: result columns, CSV, the connection string, and the
// reading of a change feed record in either mode.

/** SYSTEM names the properties the service adds to every resource. */
export const SYSTEM = new Set(['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn']);

/**
 * resultColumns returns the columns a table of query results shows: "Value"
 * alone when any result is not an object, else every property but the
 * system ones, in the order first seen, id first.
 */
export function resultColumns(docs) {
  if (docs.some((d) => d === null || typeof d !== 'object' || Array.isArray(d))) return null;
  const set = new Set();
  for (const d of docs) for (const k of Object.keys(d)) if (!SYSTEM.has(k)) set.add(k);
  const cols = [...set];
  return cols.includes('id') ? ['id', ...cols.filter((c) => c !== 'id')] : cols;
}

// A cell a spreadsheet would take for a formula starts with one of these;
// such text gets a leading apostrophe, as OWASP advises for CSV exports.
const FORMULA = /^[=+\-@\t\r]/;

function csvCell(v) {
  if (v === undefined) return '';
  let s = v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (typeof v === 'string' && FORMULA.test(s)) s = "'" + s;
  return /[",\r\n]/.test(s) || s !== s.trim() ? `"${s.replaceAll('"', '""')}"` : s;
}

/**
 * toCSV renders query results as RFC 4180 CSV (CRLF line ends): one
 * column per property of resultColumns, or one "Value" column for scalar
 * results. Objects and arrays are written as JSON; absent values are empty.
 */
export function toCSV(docs) {
  const cols = resultColumns(docs);
  const lines = [];
  if (cols === null) {
    lines.push('Value', ...docs.map((d) => csvCell(d === null ? null : d)));
  } else {
    lines.push(cols.map(csvCell).join(','), ...docs.map((d) => cols.map((c) => csvCell(d[c])).join(',')));
  }
  return lines.join('\r\n') + '\r\n';
}

/**
 * connectionString is the account's connection string as the SDKs and the
 * service's portal write it: AccountEndpoint=<endpoint>;AccountKey=<key>;
 */
export function connectionString(endpoint, key) {
  const e = endpoint.endsWith('/') ? endpoint : endpoint + '/';
  return `AccountEndpoint=${e};AccountKey=${key.trim()};`;
}

/** valueAt reads the value at a partition key path such as /a/b or /"c d". */
function valueAt(item, path) {
  let v = item;
  for (const part of path.split('/').slice(1)) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[part.replace(/^"(.*)"$/, '$1')];
  }
  return v;
}

/**
 * readChange describes one change feed record: in the latest-version mode
 * the record is the item; in the all-versions-and-deletes mode it is
 * {current, previous, metadata} and a delete names its item in metadata
 * (id and partitionKey) with no current version.
 * Returns {operation, id, partitionKey: [values], time (epoch seconds), lsn}.
 */
export function readChange(record, mode, pkDef) {
  const paths = pkDef?.paths || [];
  if (mode !== 'all') {
    return {
      operation: 'upsert', id: record?.id, time: record?._ts, lsn: record?._lsn,
      partitionKey: paths.map((p) => valueAt(record, p)),
    };
  }
  const meta = record?.metadata || {};
  const current = record?.current && Object.keys(record.current).length ? record.current : null;
  const image = current || record?.previous || null;
  let partitionKey;
  if (image) partitionKey = paths.map((p) => valueAt(image, p));
  else if (meta.partitionKey && typeof meta.partitionKey === 'object') {
    // The service names a delete's partition key as {path: value}.
    partitionKey = paths.map((p) => meta.partitionKey[p.split('/').slice(1).join('/')] ?? meta.partitionKey[p]);
  } else partitionKey = paths.map(() => undefined);
  return {
    operation: String(meta.operationType || 'unknown').toLowerCase(),
    id: image?.id ?? meta.id,
    time: meta.crts,
    lsn: meta.lsn,
    partitionKey,
    expired: meta.timeToLiveExpired === true,
  };
}
