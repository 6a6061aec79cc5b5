// Unit tests of the explorer's pure helpers (assets/format.js): result
// columns, CSV, the connection string, and change feed records of both
// modes in the service's wire format.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectionString, readChange, resultColumns, toCSV } from '../assets/format.js';

test('result columns: every property but the system ones, id first; scalars have none', () => {
  assert.deepEqual(resultColumns([{ total: 1, id: 'a', _rid: 'x', _ts: 1 }, { id: 'b', extra: true, _etag: '"e"' }]), ['id', 'total', 'extra']);
  assert.equal(resultColumns([1, 2]), null);
  assert.equal(resultColumns([{ a: 1 }, null]), null);
  assert.equal(resultColumns([[1], [2]]), null);
  assert.deepEqual(resultColumns([]), []);
});

test('CSV is RFC 4180: quoted when it must be, objects as JSON, CRLF line ends', () => {
  const csv = toCSV([
    { id: 'a', n: 1, note: 'plain' },
    { id: 'b', note: 'with, comma', obj: { k: 'v"q' } },
    { id: 'c', note: 'two\nlines', n: null },
  ]);
  assert.equal(csv, [
    'id,n,note,obj',
    'a,1,plain,',
    'b,,"with, comma","{""k"":""v\\""q""}"',
    'c,null,"two\nlines",',
    '',
  ].join('\r\n'));
  assert.equal(toCSV([3, 'x', null]), 'Value\r\n3\r\nx\r\nnull\r\n');
  assert.equal(toCSV([]), '\r\n');
});

test('CSV text a spreadsheet would run as a formula is defused; numbers are not touched', () => {
  const csv = toCSV([{ id: '=HYPERLINK("x")', n: -5, s: '-5', t: '+1', u: '@SUM(A1)' }]);
  assert.equal(csv.split('\r\n')[1], `"'=HYPERLINK(""x"")",-5,'-5,'+1,'@SUM(A1)`);
});

test('the connection string is the one the SDKs parse', () => {
  assert.equal(connectionString('http://localhost:8081/', 'a2V5PT0='), 'AccountEndpoint=http://localhost:8081/;AccountKey=a2V5PT0=;');
  assert.equal(connectionString('http://localhost:8081', ' a2V5PT0=\n'), 'AccountEndpoint=http://localhost:8081/;AccountKey=a2V5PT0=;');
});

test('a latest-version record is the item', () => {
  const c = readChange({ id: 'o-1', customer: { name: 'ann' }, _ts: 100, _lsn: 7 }, 'latest', { paths: ['/customer/name'] });
  assert.deepEqual(c, { operation: 'upsert', id: 'o-1', time: 100, lsn: 7, partitionKey: ['ann'] });
});

test('all-versions-and-deletes records: a create, a replace and a delete that names its item in metadata', () => {
  const def = { paths: ['/tenant', '/user'], kind: 'MultiHash' };
  const create = readChange({ current: { id: 'x', tenant: 't', user: 'u' }, metadata: { operationType: 'create', lsn: 5, crts: 90 } }, 'all', def);
  assert.deepEqual(create, { operation: 'create', id: 'x', time: 90, lsn: 5, partitionKey: ['t', 'u'], expired: false });
  const replace = readChange({ current: { id: 'x', tenant: 't', user: 'u' }, previous: { id: 'x' }, metadata: { operationType: 'replace', lsn: 6, crts: 91, previousImageLSN: 5 } }, 'all', def);
  assert.equal(replace.operation, 'replace');
  // A delete without its previous image: the id and key come from metadata.
  const del = readChange({ current: {}, metadata: { operationType: 'delete', lsn: 8, crts: 92, id: 'x', partitionKey: { tenant: 't', user: 'u' }, timeToLiveExpired: true } }, 'all', def);
  assert.deepEqual(del, { operation: 'delete', id: 'x', time: 92, lsn: 8, partitionKey: ['t', 'u'], expired: true });
  // With one, it is read from the previous version.
  const withPrev = readChange({ current: {}, previous: { id: 'y', tenant: 't2', user: 'u2' }, metadata: { operationType: 'delete', lsn: 9, crts: 93 } }, 'all', def);
  assert.deepEqual([withPrev.id, withPrev.partitionKey], ['y', ['t2', 'u2']]);
});
