// The data explorer's page: sign-in, the connection details, the database
// tree (create and delete databases and containers), and a container's tabs
// (items, query, change feed, settings, stored procedures, triggers and
// user-defined functions). All data comes from the REST API through
// cosmos.js with the user's credential.

import { Client, CosmosError, faults, partitionKeyHeader, partitionKeyValues } from './cosmos.js';
import { FAULT_TYPES, LOST_KINDS, describeCondition, describeLimits, describeResult, losesReply, ruleFromForm } from './faults.js';
import { parseQueryMetrics } from './metrics.js';
import { SYSTEM, connectionString, readChange, resultColumns, toCSV } from './format.js';
import { SEARCH_FEATURES, WHOLE_CONTAINER, componentNames, fill, fuse, indexesUsed, isSearchQuery, mergeStats, negatedComponents } from './search.js';

const STORE = 'orrery-explorer-credential';

let client = null;
let tokenScope = null; // {db, coll} when signed in with a resource token
let stopCurrent = () => {}; // stops the open container view's background work

const $ = (sel, root = document) => root.querySelector(sel);

/** h builds an element: h('button', {class: 'x', onclick}, 'text', child…). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** put replaces an element's children, skipping absent ones (null, false). */
function put(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

/** field returns a label and control pair, with the label bound to the control. */
function field(label, control, hint) {
  control.id ||= nextId('f');
  const hintEl = hint ? h('span', { class: 'hint', id: control.id + '-hint' }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintEl);
}

function describe(err) {
  return err instanceof CosmosError ? err.describe() : err.message || String(err);
}

function formatCharge(c) {
  return `${Number(c.toFixed(2))} RU`;
}

function formatTs(ts) {
  if (typeof ts !== 'number') return '';
  return new Date(ts * 1000).toISOString().replace('T', ' ').replace('.000Z', ' UTC');
}

/** cellText shows a value in a table cell: scalars as they are, the rest compactly. */
function cellText(v) {
  if (v === undefined) return '';
  if (v === null) return 'null';
  if (typeof v === 'object') {
    const s = JSON.stringify(v);
    return s.length > 80 ? s.slice(0, 77) + '…' : s;
  }
  return String(v);
}

/** parseLoose reads JSON, or takes the text as a string when it is not JSON. */
function parseLoose(text) {
  const t = text.trim();
  if (t === '') return undefined;
  try {
    return JSON.parse(t);
  } catch {
    return t;
  }
}

/**
 * partitionKeyOf reads what a user typed as a partition key value: one
 * value (JSON or plain text), or on a container with hierarchical keys a
 * JSON array of the leading values. undefined when empty.
 */
function partitionKeyOf(coll, text) {
  const v = parseLoose(text);
  if (v === undefined) return undefined;
  if ((coll.partitionKey?.paths || []).length > 1 && Array.isArray(v)) return v;
  return [v];
}

/** download saves text as a file named name, made in the browser. */
function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h('a', { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** copyText puts text on the clipboard; msg tells the user how it went. */
async function copyText(text, what, msg) {
  try {
    await navigator.clipboard.writeText(text);
    msg.className = 'editor-msg ok';
    msg.textContent = `${what} copied.`;
  } catch {
    msg.className = 'editor-msg error';
    msg.textContent = `The browser did not allow copying: select the ${what.toLowerCase()} and copy it by hand.`;
  }
}

// ---- dialog ----------------------------------------------------------------

/**
 * ask opens the modal dialog with body elements; onOk() may throw to keep
 * it open with the error shown. okEnabled(), when given, is asked after
 * every input whether the OK button may be pressed. cancel: null leaves
 * only the OK button (a dialog that only shows something). Resolves true
 * when confirmed.
 */
function ask({ title, body = [], ok = 'OK', cancel = 'Cancel', danger = false, wide = false, okEnabled, onOk = async () => {} }) {
  const dlg = $('#dialog');
  dlg.classList.toggle('wide', wide);
  $('#dialog-title').textContent = title;
  $('#dialog-body').replaceChildren(...body);
  $('#dialog-error').textContent = '';
  const okBtn = $('#dialog-ok');
  okBtn.textContent = ok;
  okBtn.className = danger ? 'danger' : 'primary';
  const cancelBtn = $('#dialog-cancel');
  cancelBtn.hidden = cancel === null;
  cancelBtn.textContent = cancel || 'Cancel';
  const form = $('#dialog-form');
  const check = () => { okBtn.disabled = okEnabled ? !okEnabled() : false; };
  check();
  return new Promise((resolve) => {
    const done = (v) => {
      form.removeEventListener('submit', submit);
      form.removeEventListener('input', check);
      cancelBtn.removeEventListener('click', onCancel);
      dlg.removeEventListener('cancel', onCancel);
      dlg.close();
      resolve(v);
    };
    const submit = async (e) => {
      e.preventDefault();
      if (okEnabled && !okEnabled()) return;
      okBtn.disabled = true;
      try {
        await onOk();
        done(true);
      } catch (err) {
        $('#dialog-error').textContent = describe(err);
        $('#dialog-error').scrollIntoView({ block: 'nearest' });
      } finally {
        check();
      }
    };
    const onCancel = (e) => {
      e.preventDefault();
      done(false);
    };
    form.addEventListener('submit', submit);
    form.addEventListener('input', check);
    cancelBtn.addEventListener('click', onCancel);
    dlg.addEventListener('cancel', onCancel);
    dlg.showModal();
    $('#dialog-body').scrollTop = 0;
    const first = $('#dialog-body input:not([type=radio]):not([readonly]), #dialog-body textarea:not([readonly]), #dialog-body select');
    (first || okBtn).focus();
  });
}

/**
 * confirmDelete asks to delete something by typing its id, as the
 * service's portal does for databases and containers, and deletes it.
 */
function confirmDelete({ kind, id, detail, remove }) {
  const typed = h('input', { autocomplete: 'off', spellcheck: 'false', class: 'mono' });
  return ask({
    title: `Delete ${kind}`, ok: `Delete ${kind}`, danger: true,
    body: [
      h('p', {}, `Delete ${kind} `, h('strong', {}, id), `? ${detail} This cannot be undone.`),
      field(`Type the ${kind} id to confirm`, typed),
    ],
    okEnabled: () => typed.value === id,
    onOk: remove,
  });
}

// ---- sign-in ---------------------------------------------------------------

function showLogin(message = '') {
  stopCurrent();
  client = null;
  tokenScope = null;
  $('#app').hidden = true;
  $('#session').hidden = true;
  $('#login').hidden = false;
  $('#content').replaceChildren();
  $('#tree').replaceChildren();
  $('#login-error').textContent = message;
  $('#secret').value = '';
  $('#secret').focus();
}

function syncKindFields() {
  const kind = $('input[name=kind]:checked').value;
  $('#secret-label').textContent = kind === 'token' ? 'Resource token' : kind === 'readonly' ? 'Read-only key' : 'Master key';
  $('#token-scope').hidden = kind !== 'token';
}

async function signIn(cred, remember) {
  const c = new Client(cred);
  if (cred.kind === 'token') {
    if (!cred.db || !cred.coll) throw new Error('A resource token reaches one container: name its database and container.');
    await c.request('GET', ['dbs', cred.db, 'colls', cred.coll]);
  } else {
    await c.request('GET', ['dbs']);
  }
  client = c;
  tokenScope = cred.kind === 'token' ? { db: cred.db, coll: cred.coll } : null;
  if (remember) sessionStorage.setItem(STORE, JSON.stringify(cred));
  else sessionStorage.removeItem(STORE);
  $('#login').hidden = true;
  $('#app').hidden = false;
  $('#session').hidden = false;
  $('#session-label').textContent = { master: 'Master key', readonly: 'Read-only key', token: 'Resource token' }[cred.kind];
  $('#new-db').hidden = cred.kind !== 'master';
  $('#show-faults').hidden = cred.kind !== 'master';
  await loadTree();
  if (tokenScope) openContainer(tokenScope.db, tokenScope.coll);
  else showHome();
}

async function onLogin(e) {
  e.preventDefault();
  const cred = {
    kind: $('input[name=kind]:checked').value,
    secret: $('#secret').value,
    db: $('#token-db').value.trim(),
    coll: $('#token-coll').value.trim(),
  };
  $('#login-error').textContent = '';
  if (!cred.secret.trim()) {
    $('#login-error').textContent = 'Enter a key or token.';
    return;
  }
  const btn = $('#connect');
  btn.disabled = true;
  btn.textContent = 'Connecting…';
  try {
    await signIn(cred, $('#remember').checked);
    $('#secret').value = '';
  } catch (err) {
    client = null;
    const refused = err instanceof CosmosError && (err.status === 401 || err.status === 403);
    $('#login-error').textContent = refused
      ? `The server refused this credential: ${err.status} ${err.code}. Check that it is this server's and copied whole.`
      : describe(err);
  } finally {
    btn.disabled = false;
    btn.textContent = 'Connect';
  }
}

// ---- home: connection details ---------------------------------------------

/** endpoint is the account endpoint the SDKs connect to: this page's origin. */
const endpoint = () => `${location.origin}/`;

/**
 * showHome shows the start page: what to do next, and how to connect an
 * SDK to this server: its endpoint, the key signed in with and the
 * connection string made of both, hidden until asked for, with copy
 * buttons.
 */
function showHome() {
  stopCurrent();
  stopCurrent = () => {};
  markOpen(null);
  const msg = h('p', { class: 'editor-msg', role: 'status' });
  const rows = [];
  const copy = (label, value) => h('button', { type: 'button', class: 'ghost small', onclick: () => copyText(value, label, msg) }, `Copy ${label.toLowerCase()}`);
  const ep = h('input', { readOnly: true, value: endpoint(), class: 'mono', spellcheck: 'false' });
  rows.push(h('div', { class: 'copy-row' }, field('Endpoint', ep), copy('Endpoint', endpoint())));
  let reveal = null;
  if (client.kind !== 'token') {
    const keyLabel = client.kind === 'master' ? 'Primary key' : 'Read-only key';
    const cs = connectionString(endpoint(), client.secret);
    const key = h('input', { type: 'password', readOnly: true, value: client.secret, class: 'mono', spellcheck: 'false' });
    const conn = h('input', { type: 'password', readOnly: true, value: cs, class: 'mono', spellcheck: 'false' });
    rows.push(h('div', { class: 'copy-row' }, field(keyLabel, key), copy(keyLabel, client.secret)));
    conn.setAttribute('aria-describedby', nextId('conn-hint'));
    rows.push(h('div', { class: 'copy-row' }, field(client.kind === 'master' ? 'Primary connection string' : 'Read-only connection string', conn), copy('Connection string', cs)));
    rows.push(h('p', { class: 'hint copy-hint', id: conn.getAttribute('aria-describedby') },
      'For SDKs and tools that take a connection string (.NET, Python, Azure Functions, Data Migration Tool).'));
    reveal = h('button', { type: 'button', class: 'ghost small', 'aria-pressed': 'false' }, 'Show keys');
    reveal.addEventListener('click', () => {
      const shown = reveal.getAttribute('aria-pressed') !== 'true';
      reveal.setAttribute('aria-pressed', String(shown));
      reveal.textContent = shown ? 'Hide keys' : 'Show keys';
      key.type = conn.type = shown ? 'text' : 'password';
    });
  } else {
    rows.push(h('p', { class: 'muted' }, 'Signed in with a resource token, which reaches one container: SDKs take it in place of a key (resourceTokens in JavaScript, resource_token in Python).'));
  }
  put($('#content'),
    h('div', { class: 'empty' },
      h('h1', {}, 'Choose a container'),
      h('p', { class: 'muted' }, 'Pick a database on the left, then one of its containers, to browse its items, query it, watch its change feed and manage its settings and scripts.')),
    h('section', { class: 'card connection', 'aria-labelledby': 'connection-title' },
      h('div', { class: 'toolbar' }, h('h2', { id: 'connection-title' }, 'Connect an application'), h('span', { class: 'spacer' }), reveal),
      h('p', { class: 'muted' }, 'The official SDKs connect to this endpoint with the same credential you signed in with.'),
      h('div', { class: 'copy-grid' }, ...rows), msg));
}

// ---- database tree ---------------------------------------------------------

async function loadTree() {
  const tree = $('#tree');
  $('#tree-error').textContent = '';
  if (tokenScope) {
    tree.replaceChildren(
      h('li', {}, h('span', { class: 'db-name' }, tokenScope.db),
        h('ul', {}, h('li', {}, containerButton(tokenScope.db, tokenScope.coll)))));
    return;
  }
  try {
    const dbs = await listAll(['dbs'], 'Databases');
    tree.replaceChildren(...dbs.sort(byId).map((db) => databaseNode(db.id)));
    if (dbs.length === 0) tree.replaceChildren(h('li', { class: 'muted pad' }, 'No databases yet.'));
  } catch (err) {
    $('#tree-error').textContent = describe(err);
  }
}

const byId = (a, b) => a.id.localeCompare(b.id);

/** listAll reads every page of a feed. */
async function listAll(segs, key) {
  const out = [];
  let continuation = null;
  do {
    const headers = continuation ? { 'x-ms-continuation': continuation } : {};
    const res = await client.request('GET', segs, { headers });
    out.push(...(res.body?.[key] || []));
    continuation = res.continuation;
  } while (continuation);
  return out;
}

/** offerOf returns the offer (provisioned throughput) of a resource's RID, or null. */
async function offerOf(rid) {
  const offers = await listAll(['offers'], 'Offers');
  return offers.find((o) => o.offerResourceId === rid) || null;
}

/** describeOffer says what an offer provisions, in the portal's words. */
function describeOffer(offer) {
  const auto = offer?.content?.offerAutopilotSettings?.maxThroughput;
  if (auto) return `Autoscale, up to ${auto} RU/s`;
  return `Manual, ${offer?.content?.offerThroughput} RU/s`;
}

const treeNode = (dbId) => [...document.querySelectorAll('#tree > li')].find((li) => li.dataset.db === dbId);

function databaseNode(dbId) {
  const list = h('ul', { hidden: true });
  const toggle = h('button', { type: 'button', class: 'db', 'aria-expanded': 'false' }, h('span', { class: 'chev', 'aria-hidden': 'true' }), dbId);
  const li = h('li', { 'data-db': dbId }, toggle, list);
  const load = async () => {
    list.replaceChildren(h('li', { class: 'muted pad' }, 'Loading…'));
    try {
      const colls = await listAll(['dbs', dbId, 'colls'], 'DocumentCollections');
      list.replaceChildren(...colls.sort(byId).map((c) => h('li', {}, containerButton(dbId, c.id))));
      if (colls.length === 0) list.prepend(h('li', { class: 'muted pad' }, 'No containers.'));
      if (client.kind === 'master') {
        list.append(h('li', { class: 'tree-actions' },
          h('button', { type: 'button', class: 'link small', 'aria-label': `New container in ${dbId}`, onclick: () => newContainer(dbId) }, '+ New container'),
          h('button', { type: 'button', class: 'link small danger-link', 'aria-label': `Delete database ${dbId}`, onclick: () => deleteDatabase(dbId) }, 'Delete database')));
      }
    } catch (err) {
      list.replaceChildren(h('li', { class: 'error pad', role: 'alert' }, describe(err)));
    }
  };
  toggle.addEventListener('click', async () => {
    const open = toggle.getAttribute('aria-expanded') === 'true';
    toggle.setAttribute('aria-expanded', String(!open));
    list.hidden = open;
    if (!open) await load();
  });
  li.reload = load;
  li.expand = async () => {
    toggle.setAttribute('aria-expanded', 'true');
    list.hidden = false;
    await load();
  };
  return li;
}

function containerButton(dbId, collId) {
  return h('button', {
    type: 'button', class: 'coll', 'data-coll': `${dbId}/${collId}`,
    onclick: () => openContainer(dbId, collId),
  }, collId);
}

/** markOpen highlights the open container in the tree (none for null). */
function markOpen(key) {
  for (const b of document.querySelectorAll('.coll')) {
    b.classList.toggle('active', b.dataset.coll === key);
    if (b.dataset.coll === key) b.setAttribute('aria-current', 'true');
    else b.removeAttribute('aria-current');
  }
}

/**
 * throughputChoice builds the throughput controls of a new database or
 * container: none (or the database's, shared), autoscale with a maximum,
 * or manual RU/s. read() returns the request headers they ask for.
 */
function throughputChoice(noneLabel, initial) {
  const name = nextId('tp');
  const radio = (value, label) => h('label', {}, h('input', { type: 'radio', name, value, checked: value === initial }), ' ', label);
  const amount = h('input', { type: 'number', inputmode: 'numeric' });
  const amountField = field('', amount);
  const set = h('fieldset', { class: 'kinds-set' },
    h('legend', {}, 'Throughput'),
    h('div', { class: 'kinds' }, noneLabel ? radio('none', noneLabel) : null, radio('autoscale', 'Autoscale'), radio('manual', 'Manual')),
    amountField);
  const mode = () => set.querySelector('input[type=radio]:checked').value;
  const sync = (reset) => {
    const m = mode();
    amountField.hidden = m === 'none';
    $('label', amountField).textContent = m === 'autoscale' ? 'Maximum RU/s' : 'RU/s';
    amount.min = m === 'autoscale' ? '1000' : '400';
    amount.step = m === 'autoscale' ? '1000' : '100';
    if (reset) amount.value = m === 'autoscale' ? '1000' : '400';
    const hint = m === 'autoscale' ? 'Scales between 10% of the maximum and the maximum; from 1000, in steps of 1000.' : 'From 400, in steps of 100.';
    let el = $('.hint', amountField);
    if (!el) {
      el = h('span', { class: 'hint', id: amount.id + '-hint' });
      amountField.append(el);
      amount.setAttribute('aria-describedby', el.id);
    }
    el.textContent = hint;
  };
  set.addEventListener('change', (e) => { if (e.target.type === 'radio') sync(true); });
  sync(true);
  return {
    el: set,
    headers() {
      const m = mode();
      if (m === 'none') return {};
      const n = Number(amount.value);
      if (!Number.isInteger(n)) throw new Error('The throughput is a whole number of RU/s.');
      return m === 'autoscale'
        ? { 'x-ms-cosmos-offer-autopilot-settings': JSON.stringify({ maxThroughput: n }) }
        : { 'x-ms-offer-throughput': String(n) };
    },
  };
}

async function newDatabase() {
  const id = h('input', { required: true, autocomplete: 'off' });
  const tp = throughputChoice('None: each container has its own', 'none');
  const ok = await ask({
    title: 'New database', ok: 'Create',
    body: [field('Database id', id), tp.el,
      h('p', { class: 'hint' }, 'Throughput given to the database is shared by the containers that have none of their own.')],
    onOk: async () => {
      if (!id.value.trim()) throw new Error('Enter an id.');
      await client.request('POST', ['dbs'], { body: { id: id.value.trim() }, headers: tp.headers() });
    },
  });
  if (ok) {
    await loadTree();
    await treeNode(id.value.trim())?.expand();
  }
}

async function deleteDatabase(dbId) {
  const ok = await confirmDelete({
    kind: 'database', id: dbId, detail: 'Its containers and all their items are deleted with it.',
    remove: () => client.request('DELETE', ['dbs', dbId]),
  });
  if (!ok) return;
  const open = $('#content [data-open]')?.dataset.open || '';
  await loadTree();
  if (open.startsWith(`${dbId}/`) || !open) showHome();
  $('#tree-error').textContent = '';
  $('#tree-status').textContent = `Deleted database ${dbId}.`;
}

const DEFAULT_INDEXING_POLICY = {
  indexingMode: 'consistent',
  automatic: true,
  includedPaths: [{ path: '/*' }],
  excludedPaths: [{ path: '/"_etag"/?' }],
};

/** ttlChoice builds the time-to-live controls for a container's defaultTtl. */
function ttlChoice(ttl, disabled) {
  const mode = h('select', { disabled },
    h('option', { value: 'off' }, 'Off: items never expire'),
    h('option', { value: 'on' }, 'On: items expire only when they set ttl'),
    h('option', { value: 'seconds' }, 'On: items expire after a default time'));
  const seconds = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric', disabled });
  const secondsField = field('Default time to live (seconds)', seconds);
  const sync = () => { secondsField.hidden = mode.value !== 'seconds'; };
  mode.addEventListener('change', () => {
    sync();
    if (mode.value === 'seconds' && !seconds.value) seconds.value = '3600';
  });
  const fill = (v) => {
    mode.value = v === undefined || v === null ? 'off' : v === -1 ? 'on' : 'seconds';
    seconds.value = v > 0 ? String(v) : '';
    sync();
  };
  fill(ttl);
  return {
    els: [field('Expiry', mode), secondsField],
    fill,
    /** value returns the defaultTtl to send, or undefined for none. */
    value() {
      if (mode.value === 'off') return undefined;
      if (mode.value === 'on') return -1;
      const n = Number(seconds.value);
      if (!Number.isInteger(n) || n < 1) throw new Error('The default time to live is a whole number of seconds, at least 1.');
      return n;
    },
  };
}

/** retentionValue reads the all-versions-and-deletes retention in minutes, or undefined. */
function retentionValue(input) {
  if (input.value.trim() === '') return undefined;
  const n = Number(input.value);
  if (!Number.isInteger(n) || n < 1) throw new Error('The change feed retention is a whole number of minutes, at least 1, or empty for none.');
  return n;
}

/** parsePolicy reads an indexing policy as JSON, saying where it is wrong. */
function parsePolicy(text) {
  let p;
  try {
    p = JSON.parse(text);
  } catch (e) {
    throw new Error(`The indexing policy is not valid JSON: ${e.message}`);
  }
  if (!p || typeof p !== 'object' || Array.isArray(p)) throw new Error('The indexing policy is a JSON object.');
  return p;
}

/**
 * newContainer asks for a container as the portal's New Container panel
 * does: id, partition key (up to three levels), throughput, unique keys,
 * time to live, the all-versions-and-deletes retention and the indexing
 * policy, and creates it with one request.
 */
async function newContainer(dbId) {
  let dbOffer = null;
  try {
    dbOffer = await offerOf((await client.request('GET', ['dbs', dbId])).body._rid);
  } catch {
    // Without the offers feed the dialog offers dedicated throughput only.
  }
  const id = h('input', { required: true, autocomplete: 'off' });
  const pkRows = h('div', { class: 'pk-rows' });
  const addLevel = h('button', { type: 'button', class: 'ghost small' }, 'Add hierarchical partition key');
  const levelNames = ['Partition key', 'Second partition key level', 'Third partition key level'];
  function syncLevels() {
    const rows = [...pkRows.children];
    rows.forEach((r, i) => { $('label', r).textContent = levelNames[i]; });
    addLevel.hidden = rows.length >= 3;
  }
  function addPkPath(value) {
    const input = h('input', { value, autocomplete: 'off', class: 'mono', spellcheck: 'false' });
    const first = pkRows.children.length === 0;
    const row = h('div', { class: 'list-row' }, field('', input, first ? 'A path such as /tenantId. Add levels for a hierarchical key (/tenantId, /userId).' : null),
      first ? null : h('button', { type: 'button', class: 'ghost small', onclick: () => { row.remove(); syncLevels(); addLevel.focus(); } }, 'Remove level'));
    pkRows.append(row);
    syncLevels();
    return input;
  }
  addPkPath('/pk');
  addLevel.addEventListener('click', () => addPkPath('/').focus());

  const tp = throughputChoice(dbOffer ? `Shared with ${dbId} (${describeOffer(dbOffer)})` : null, dbOffer ? 'none' : 'manual');

  const uniqueRows = h('div', { class: 'unique-rows' });
  const addUnique = () => {
    const input = h('input', { autocomplete: 'off', class: 'mono', spellcheck: 'false', placeholder: '/email' });
    const row = h('div', { class: 'list-row' },
      field(`Unique key ${uniqueRows.children.length + 1}`, input, 'Comma-separated paths, such as /email or /firstName,/lastName.'),
      h('button', { type: 'button', class: 'ghost small', onclick: () => { row.remove(); renumber(); } }, 'Remove unique key'));
    uniqueRows.append(row);
    input.focus();
  };
  const renumber = () => [...uniqueRows.children].forEach((r, i) => { $('label', r).textContent = `Unique key ${i + 1}`; });

  const ttl = ttlChoice(undefined, false);
  const retention = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric', placeholder: 'None' });
  const policy = h('textarea', { class: 'code', rows: 9, spellcheck: 'false' });
  policy.value = JSON.stringify(DEFAULT_INDEXING_POLICY, null, 2);

  const ok = await ask({
    title: `New container in ${dbId}`, ok: 'Create', wide: true,
    body: [
      field('Container id', id),
      h('fieldset', {}, h('legend', {}, 'Partition key'), pkRows, addLevel),
      tp.el,
      h('fieldset', {}, h('legend', {}, 'Unique keys'),
        h('p', { class: 'hint' }, 'No two items in a logical partition may have the same values at a unique key\'s paths. They cannot be changed later.'),
        uniqueRows, h('button', { type: 'button', class: 'ghost small', onclick: addUnique }, 'Add unique key')),
      h('fieldset', {}, h('legend', {}, 'Time to live'), ...ttl.els),
      h('fieldset', {}, h('legend', {}, 'Change feed'),
        field('Keep all versions and deletes for (minutes)', retention, 'Needed for the all versions and deletes mode of the change feed. Empty keeps none.')),
      field('Indexing policy (JSON)', policy, 'The default indexes every path. Set "indexingMode": "none" to index nothing.'),
    ],
    onOk: async () => {
      const collId = id.value.trim();
      if (!collId) throw new Error('Enter an id.');
      const paths = [...pkRows.querySelectorAll('input')].map((i) => i.value.trim());
      for (const p of paths) {
        if (!/^\/./.test(p)) throw new Error(`The partition key path "${p}" must start with / and name a property, such as /tenantId.`);
      }
      const uniqueKeys = [...uniqueRows.querySelectorAll('input')].map((i) => i.value.split(',').map((p) => p.trim()).filter(Boolean))
        .filter((ps) => ps.length > 0).map((ps) => ({ paths: ps }));
      const body = {
        id: collId,
        partitionKey: { paths, kind: paths.length > 1 ? 'MultiHash' : 'Hash', version: 2 },
        indexingPolicy: parsePolicy(policy.value),
        uniqueKeyPolicy: { uniqueKeys },
      };
      const t = ttl.value();
      if (t !== undefined) body.defaultTtl = t;
      const r = retentionValue(retention);
      if (r !== undefined) body.changeFeedPolicy = { retentionDuration: r };
      await client.request('POST', ['dbs', dbId, 'colls'], { body, headers: tp.headers() });
    },
  });
  if (ok) {
    await treeNode(dbId)?.reload();
    openContainer(dbId, id.value.trim());
  }
}

async function deleteContainer(ctx) {
  const ok = await confirmDelete({
    kind: 'container', id: ctx.collId, detail: 'All its items, scripts and settings are deleted with it.',
    remove: () => client.request('DELETE', ctx.segs),
  });
  if (!ok) return;
  await treeNode(ctx.dbId)?.reload();
  showHome();
  $('#tree-status').textContent = `Deleted container ${ctx.dbId} / ${ctx.collId}.`;
}

// ---- container view --------------------------------------------------------

async function openContainer(dbId, collId) {
  stopCurrent();
  stopCurrent = () => {};
  markOpen(`${dbId}/${collId}`);
  $('#tree-status').textContent = '';
  const content = $('#content');
  content.replaceChildren(h('p', { class: 'muted pad' }, 'Loading…'));
  let coll;
  try {
    coll = (await client.request('GET', ['dbs', dbId, 'colls', collId])).body;
  } catch (err) {
    content.replaceChildren(h('p', { class: 'error pad', role: 'alert' }, describe(err)));
    return;
  }
  const ctx = { dbId, collId, coll, segs: ['dbs', dbId, 'colls', collId], stops: [] };
  stopCurrent = () => ctx.stops.forEach((f) => f());

  const tabs = [
    ['items', 'Items', itemsTab],
    ['query', 'Query', queryTab],
    ['feed', 'Change feed', feedTab],
    ['settings', 'Settings', settingsTab],
    ['sprocs', 'Stored procedures', (c, p) => scriptsTab(c, p, SCRIPT_KINDS.sprocs)],
    ['triggers', 'Triggers', (c, p) => scriptsTab(c, p, SCRIPT_KINDS.triggers)],
    ['udfs', 'User-defined functions', (c, p) => scriptsTab(c, p, SCRIPT_KINDS.udfs)],
  ];
  const tablist = h('div', { role: 'tablist', class: 'tabs', 'aria-label': 'Container views' });
  const panels = h('div', {});
  const buttons = tabs.map(([key, label], i) => {
    const b = h('button', {
      type: 'button', role: 'tab', id: `tab-${key}`, 'aria-controls': `panel-${key}`,
      'aria-selected': 'false', tabindex: '-1',
    }, label);
    b.addEventListener('click', () => select(i));
    b.addEventListener('keydown', (e) => {
      const d = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (d) {
        e.preventDefault();
        select((i + d + tabs.length) % tabs.length, true);
      } else if (e.key === 'Home') select(0, true);
      else if (e.key === 'End') select(tabs.length - 1, true);
    });
    return b;
  });
  tablist.append(...buttons);
  const built = new Map();
  function select(i, focus) {
    buttons.forEach((b, j) => {
      b.setAttribute('aria-selected', String(i === j));
      b.tabIndex = i === j ? 0 : -1;
    });
    if (focus) buttons[i].focus();
    const [key, , make] = tabs[i];
    for (const p of panels.children) p.hidden = p.id !== `panel-${key}`;
    if (!built.has(key)) {
      const panel = h('section', { role: 'tabpanel', id: `panel-${key}`, 'aria-labelledby': `tab-${key}`, class: 'panel' });
      built.set(key, panel);
      panels.append(panel);
      make(ctx, panel);
    }
  }
  const pkPaths = (coll.partitionKey?.paths || []).join(', ');
  content.replaceChildren(
    h('div', { class: 'content-head', 'data-open': `${dbId}/${collId}` },
      h('h1', {}, h('span', { class: 'muted' }, `${dbId} / `), collId),
      h('span', { class: 'pill' }, `Partition key ${pkPaths || 'none'}`),
      h('span', { class: 'spacer' }),
      client.kind === 'master' ? h('button', { type: 'button', class: 'ghost small danger-ghost', onclick: () => deleteContainer(ctx) }, 'Delete container') : null),
    tablist, panels);
  select(0);
}

// ---- items -----------------------------------------------------------------

function itemsTab(ctx, panel) {
  const pageSize = h('select', {}, ...[10, 25, 50, 100].map((n) => h('option', { value: String(n), selected: n === 25 }, String(n))));
  const tbody = h('tbody');
  const status = h('p', { class: 'muted status', 'aria-live': 'polite' });
  const error = h('p', { class: 'error', role: 'alert' });
  const prev = h('button', { type: 'button', class: 'ghost', disabled: true }, 'Previous page');
  const next = h('button', { type: 'button', class: 'ghost', disabled: true }, 'Next page');
  const editor = h('div', { class: 'editor-wrap' });
  const writable = client.kind !== 'readonly';
  // pages[i] is the continuation that reads page i (null for the first).
  let pages = [null];
  let page = 0;
  // loads counts the loads begun: a load's answer is shown only when no
  // later load began meanwhile (a page size changed while the first page
  // was on its way would otherwise be overwritten by the older answer).
  let loads = 0;

  async function load() {
    const mine = ++loads;
    error.textContent = '';
    const headers = { 'x-ms-max-item-count': pageSize.value };
    if (pages[page]) headers['x-ms-continuation'] = pages[page];
    if (tokenScope) headers['x-ms-documentdb-partitionkeyrangeid'] = '0';
    try {
      const res = await client.request('GET', [...ctx.segs, 'docs'], { headers });
      if (mine !== loads) return;
      const docs = res.body?.Documents || [];
      pages = pages.slice(0, page + 1);
      if (res.continuation) pages.push(res.continuation);
      tbody.replaceChildren(...docs.map((d) => {
        const pk = partitionKeyValues(ctx.coll.partitionKey, d);
        return h('tr', {},
          h('td', {}, h('button', { type: 'button', class: 'link', onclick: () => openItem(d) }, d.id)),
          h('td', {}, pk.map(cellText).join(', ')),
          h('td', { class: 'muted' }, formatTs(d._ts)));
      }));
      if (docs.length === 0) tbody.replaceChildren(h('tr', {}, h('td', { colspan: 3, class: 'muted' }, page === 0 ? 'No items yet.' : 'No more items.')));
      status.textContent = `Page ${page + 1} · ${docs.length} item${docs.length === 1 ? '' : 's'} · ${formatCharge(res.charge)}`;
      prev.disabled = page === 0;
      next.disabled = !res.continuation;
    } catch (err) {
      if (mine === loads) error.textContent = describe(err);
    }
  }
  prev.addEventListener('click', () => { page--; load(); });
  next.addEventListener('click', () => { page++; load(); });
  pageSize.addEventListener('change', () => { pages = [null]; page = 0; load(); });
  const refresh = () => { pages = [null]; page = 0; return load(); };

  async function openItem(doc) {
    const pk = partitionKeyValues(ctx.coll.partitionKey, doc);
    try {
      const res = await client.request('GET', [...ctx.segs, 'docs', doc.id], {
        headers: { 'x-ms-documentdb-partitionkey': partitionKeyHeader(pk) },
      });
      showEditor(res.body, res.etag);
    } catch (err) {
      error.textContent = describe(err);
    }
  }

  function showEditor(doc, etag) {
    const isNew = !doc;
    const text = h('textarea', { class: 'code', rows: 18, spellcheck: 'false', readOnly: !writable });
    const template = {};
    template.id = '';
    for (const p of ctx.coll.partitionKey?.paths || []) {
      const parts = p.split('/').slice(1);
      let o = template;
      parts.forEach((part, i) => { o = o[part] = i === parts.length - 1 ? '' : o[part] || {}; });
    }
    text.value = JSON.stringify(isNew ? template : doc, null, 2);
    const msg = h('div', { class: 'editor-msg', role: 'alert' });
    const origPk = isNew ? null : partitionKeyValues(ctx.coll.partitionKey, doc);
    let currentEtag = etag;
    const etagLine = h('span', { class: 'muted mono' }, isNew ? 'New item' : `ETag ${etag}`);
    const save = h('button', { type: 'button', class: 'primary', hidden: !writable }, isNew ? 'Create item' : 'Save changes');
    const del = h('button', { type: 'button', class: 'danger', hidden: isNew || !writable }, 'Delete');
    const close = h('button', { type: 'button', class: 'ghost' }, 'Close');
    const title = isNew ? 'New item' : `Item ${doc.id}`;

    save.addEventListener('click', async () => {
      msg.replaceChildren();
      msg.className = 'editor-msg';
      let body;
      try {
        body = JSON.parse(text.value);
      } catch (e) {
        msg.className = 'editor-msg error';
        msg.textContent = `The item is not valid JSON: ${e.message}`;
        return;
      }
      if (!body || typeof body !== 'object' || Array.isArray(body)) {
        msg.className = 'editor-msg error';
        msg.textContent = 'An item is a JSON object.';
        return;
      }
      try {
        let res;
        if (isNew) {
          const pk = partitionKeyValues(ctx.coll.partitionKey, body);
          res = await client.request('POST', [...ctx.segs, 'docs'], {
            headers: { 'x-ms-documentdb-partitionkey': partitionKeyHeader(pk) }, body,
          });
        } else {
          res = await client.request('PUT', [...ctx.segs, 'docs', doc.id], {
            headers: { 'x-ms-documentdb-partitionkey': partitionKeyHeader(origPk), 'If-Match': currentEtag }, body,
          });
        }
        await refresh();
        showEditor(res.body, res.etag);
        const m = $('.editor-msg', editor);
        m.className = 'editor-msg ok';
        m.textContent = `${isNew ? 'Created' : 'Saved'} · ${formatCharge(res.charge)}`;
      } catch (err) {
        msg.className = 'editor-msg error';
        if (err instanceof CosmosError && err.status === 412) {
          msg.append(
            h('strong', {}, '412 Precondition Failed: '),
            'this item was changed by someone else after you opened it, so your save was refused. ',
            h('button', { type: 'button', class: 'ghost small', onclick: () => openItem(doc) }, 'Reload latest version'));
        } else {
          msg.textContent = describe(err);
        }
      }
    });
    del.addEventListener('click', async () => {
      const ok = await ask({
        title: 'Delete item', ok: 'Delete', danger: true,
        body: [h('p', {}, 'Delete item ', h('strong', {}, doc.id), '? This cannot be undone.')],
        onOk: () => client.request('DELETE', [...ctx.segs, 'docs', doc.id], {
          headers: { 'x-ms-documentdb-partitionkey': partitionKeyHeader(origPk), 'If-Match': currentEtag },
        }),
      });
      if (ok) {
        editor.replaceChildren();
        await refresh();
        status.textContent = `Deleted ${doc.id}. ` + status.textContent;
      }
    });
    close.addEventListener('click', () => editor.replaceChildren());
    text.addEventListener('keydown', (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === 's') {
        e.preventDefault();
        save.click();
      }
    });
    editor.replaceChildren(h('div', { class: 'card editor', role: 'region', 'aria-label': title },
      h('div', { class: 'editor-head' }, h('h2', {}, title), etagLine),
      field('Item JSON', text, writable ? 'Ctrl+S saves.' : 'Read-only: this credential cannot write.'),
      msg,
      h('div', { class: 'actions' }, close, del, save)));
    text.focus();
  }

  panel.append(
    h('div', { class: 'toolbar' },
      writable ? h('button', { type: 'button', class: 'primary', onclick: () => showEditor(null) }, 'New item') : null,
      h('button', { type: 'button', class: 'ghost', onclick: refresh }, 'Refresh'),
      h('span', { class: 'spacer' }),
      field('Items per page', pageSize)),
    error,
    h('div', { class: 'split' },
      h('div', { class: 'list' },
        h('table', { class: 'grid items-grid' },
          h('caption', { class: 'sr-only' }, 'Items'),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'id'), h('th', { scope: 'col' }, 'Partition key'), h('th', { scope: 'col' }, 'Modified'))),
          tbody),
        h('div', { class: 'pager' }, prev, status, next)),
      editor));
  load();
}

// ---- query -----------------------------------------------------------------

function queryTab(ctx, panel) {
  const text = h('textarea', { class: 'code', rows: 4, spellcheck: 'false' });
  text.value = 'SELECT * FROM c';
  const params = h('div', { class: 'params' });
  const pk = h('input', { autocomplete: 'off', placeholder: 'All partitions' });
  const run = h('button', { type: 'submit', class: 'primary' }, 'Run query');
  const error = h('p', { class: 'error', role: 'alert' });
  const stats = h('div', { class: 'stats', 'aria-live': 'polite' });
  const scores = h('section', { class: 'scores', 'aria-label': 'Scores', hidden: true });
  const results = h('div', { class: 'results' });
  const more = h('button', { type: 'button', class: 'ghost', hidden: true }, 'Next page');
  const tableBtn = h('button', { type: 'button', class: 'ghost small', 'aria-pressed': 'true' }, 'Table');
  const jsonBtn = h('button', { type: 'button', class: 'ghost small', 'aria-pressed': 'false' }, 'JSON');
  const saveJSON = h('button', { type: 'button', class: 'ghost small' }, 'Download JSON');
  const saveCSV = h('button', { type: 'button', class: 'ghost small' }, 'Download CSV');
  const resultBar = h('div', { class: 'toolbar result-bar', hidden: true },
    h('div', { role: 'group', 'aria-label': 'Show results as', class: 'segmented' }, tableBtn, jsonBtn),
    h('span', { class: 'spacer' }), saveJSON, saveCSV);
  let continuation = null;
  let spec = null;
  let pageNo = 0;
  let docs = []; // every result of the pages read so far
  let view = 'table';
  let generation = 0; // which run the pages on screen belong to
  const multiLevel = (ctx.coll.partitionKey?.paths || []).length > 1;

  function addParam(name = '@', value = '') {
    const n = h('input', { value: name, autocomplete: 'off', class: 'mono' });
    const v = h('input', { value, autocomplete: 'off', class: 'mono' });
    const row = h('div', { class: 'param' },
      field('Parameter name', n), field('Value (JSON)', v),
      h('button', { type: 'button', class: 'ghost small', 'aria-label': 'Remove parameter', onclick: () => row.remove() }, 'Remove'));
    params.append(row);
    n.focus();
  }

  function readSpec() {
    const parameters = [];
    for (const row of params.querySelectorAll('.param')) {
      const [n, v] = row.querySelectorAll('input');
      if (!n.value.trim() || n.value.trim() === '@') continue;
      let value;
      try {
        value = JSON.parse(v.value);
      } catch {
        throw new Error(`The value of ${n.value.trim()} is not JSON: write "text" in quotes, or a number, true, false, null, an array or an object.`);
      }
      parameters.push({ name: n.value.trim(), value });
    }
    return { query: text.value, parameters };
  }

  async function page() {
    const gen = generation;
    const headers = {
      'Content-Type': 'application/query+json',
      'x-ms-documentdb-isquery': 'True',
      'x-ms-documentdb-query-enablecrosspartition': 'True',
      'x-ms-documentdb-populatequerymetrics': 'True',
      'x-ms-max-item-count': '100',
    };
    const pkv = partitionKeyOf(ctx.coll, pk.value);
    if (pkv !== undefined) headers['x-ms-documentdb-partitionkey'] = partitionKeyHeader(pkv);
    else headers['x-ms-documentdb-partitionkeyrangeid'] = '0';
    if (continuation) headers['x-ms-continuation'] = continuation;
    // A search query's page says which indexes served it.
    if (isSearchQuery(spec.query)) headers['x-ms-cosmos-populateindexmetrics'] = 'True';
    // Without a partition key, range 0 answers for every range, as it does
    // for the plans the server gives SDKs on containers of several ranges.
    const body = pkv === undefined ? { ...spec, query: WHOLE_CONTAINER + spec.query } : spec;
    const res = await client.request('POST', [...ctx.segs, 'docs'], { headers, body });
    if (gen !== generation) return null; // a new run started meanwhile
    continuation = res.continuation;
    pageNo++;
    return res;
  }

  /**
   * every runs one of a query plan's rewritten queries to its last page,
   * over the whole container (whole: true, or no partition key given) or
   * the partition asked for, and returns its rows.
   */
  async function every(query, whole) {
    const pkv = whole ? undefined : partitionKeyOf(ctx.coll, pk.value);
    if (pkv !== undefined) return drain(query, { 'x-ms-documentdb-partitionkey': partitionKeyHeader(pkv) });
    return drain(WHOLE_CONTAINER + query, { 'x-ms-documentdb-partitionkeyrangeid': '0' });
  }

  /**
   * eachRange runs one of a hybrid search's component queries as the SDKs
   * do: without a partition key, on every partition key range in key order,
   * each answering for its own items (its own TOP, its own ranking), their
   * rows in that order; with one, on that partition.
   */
  async function eachRange(query) {
    const pkv = partitionKeyOf(ctx.coll, pk.value);
    if (pkv !== undefined) return every(query);
    const res = await client.request('GET', [...ctx.segs, 'pkranges']);
    const ranges = [...(res.body?.PartitionKeyRanges || [])]
      .sort((a, b) => (a.minInclusive < b.minInclusive ? -1 : a.minInclusive > b.minInclusive ? 1 : 0));
    const rows = [];
    for (const r of ranges) rows.push(...await drain(query, { 'x-ms-documentdb-partitionkeyrangeid': r.id }));
    return rows;
  }

  /** drain reads a query to its last page with the given scope headers. */
  async function drain(query, scope) {
    const rows = [];
    let cont = null;
    do {
      const headers = {
        'Content-Type': 'application/query+json',
        'x-ms-documentdb-isquery': 'True',
        'x-ms-documentdb-query-enablecrosspartition': 'True',
        'x-ms-max-item-count': '1000',
        ...scope,
      };
      if (cont) headers['x-ms-continuation'] = cont;
      const res = await client.request('POST', [...ctx.segs, 'docs'], { headers, body: { query, parameters: spec.parameters } });
      rows.push(...(res.body?.Documents || []));
      cont = res.continuation;
    } while (cont);
    return rows;
  }

  /**
   * searchScores runs a search query as the SDKs' pipelines do (see
   * search.js) and returns {columns, rows: [{scores, payload}]}, ordered as
   * they return it; null when the plan has no search to run. answer is the
   * first page of the server's own answer, which orders rows of equal RRF
   * in one partition.
   */
  async function searchScores(answer) {
    const headers = {
      'Content-Type': 'application/query+json',
      'x-ms-documentdb-isquery': 'True',
      'x-ms-cosmos-is-query-plan-request': 'True',
      'x-ms-cosmos-supported-query-features': SEARCH_FEATURES,
      'x-ms-cosmos-query-version': '1.4',
      'x-ms-documentdb-query-enablecrosspartition': 'True',
    };
    const plan = (await client.request('POST', [...ctx.segs, 'docs'], { headers, body: spec })).body || {};
    const qi = plan.queryInfo;
    if (qi?.hasNonStreamingOrderBy) {
      const rows = await every(fill(qi.rewrittenQuery));
      const skip = Math.max(qi.offset ?? 0, 0);
      let take = rows.length;
      if (qi.top != null && qi.top >= 0) take = qi.top;
      if (qi.limit != null && qi.limit >= 0) take = Math.min(take, qi.limit);
      return {
        columns: (qi.orderByExpressions || []).map((e) => (/^VectorDistance/i.test(e) ? 'VectorDistance' : e)),
        rows: rows.slice(skip, skip + take).map((r) => ({ scores: (r.orderByItems || []).map((o) => o.item), payload: r.payload })),
      };
    }
    const hi = plan.hybridSearchQueryInfo;
    if (!hi) return null;
    const stats = hi.requiresGlobalStatistics ? mergeStats(await every(hi.globalStatisticsQuery, true)) : null;
    const names = componentNames(spec.query);
    const rows = [];
    const fused = (hi.componentQueryInfos || []).length > 1;
    for (const ci of hi.componentQueryInfos || []) {
      // One component is merged by its ORDER BY, as the SDKs merge the
      // ranges' answers; several are fused from every range's own top rows.
      for (const r of await (fused ? eachRange : every)(fill(ci.rewrittenQuery, stats))) {
        // The older form nests the payload and the scores in payload.
        rows.push(r.componentScores ? r : { _rid: r._rid, payload: r.payload?.payload, componentScores: r.payload?.componentScores || [] });
      }
    }
    if ((hi.componentQueryInfos || []).length === 1) {
      // One component: its scores, in the order its query returns them.
      const skip = Math.max(hi.skip ?? 0, 0);
      const take = hi.take ?? rows.length;
      return { columns: [names[0] || 'Score'], rows: rows.slice(skip, skip + take).map((r) => ({ scores: [r.componentScores[0]], payload: r.payload })) };
    }
    // RRF ranks by the scores as projected (each highest best); each is
    // shown as its function gives it: a euclidean VectorDistance is the
    // distance, not the negated one the plan projects.
    const negated = negatedComponents(hi.componentQueryInfos[0]?.rewrittenQuery);
    const shown = (v, j) => (negated[j] && typeof v === 'number' ? -v : v);
    return {
      columns: ['RRF', ...(hi.componentQueryInfos || []).map((_, i) => names[i] || `Component ${i + 1}`)],
      rows: fuse(rows, hi.componentWeights, hi.skip, hi.take, partitionKeyOf(ctx.coll, pk.value) === undefined ? undefined : answer)
        .map((r) => ({ scores: [r.rrf, ...r.scores.map(shown)], payload: r.payload })),
    };
  }

  /** showScores fills the scores section of a search query's first page. */
  async function showScores(res) {
    const gen = generation;
    const used = indexesUsed(res.headers.get('x-ms-cosmos-index-utilization'));
    scores.hidden = false;
    put(scores,
      h('h2', {}, 'Scores'),
      h('p', { class: 'muted' }, 'Each result\'s score, ranked as the SDKs rank them (from the query plan\'s rewritten queries).'),
      used.length
        ? h('dl', { class: 'figures small', 'aria-label': 'Indexes used' },
          ...used.map((u) => h('div', {}, h('dt', {}, 'Index used'), h('dd', { 'data-index': '' }, `${u.index}: ${u.filter}`))))
        : h('p', { class: 'muted', 'data-index': '' }, 'No vector or full-text index served this query: every item of its scope was read.'),
      h('p', { class: 'muted', role: 'status' }, 'Computing scores…'));
    let found;
    try {
      found = await searchScores(res.body?.Documents || []);
    } catch (err) {
      if (gen === generation) scores.lastChild.replaceWith(h('p', { class: 'error', role: 'alert' }, `The scores could not be computed: ${describe(err)}`));
      return;
    }
    if (gen !== generation) return;
    if (!found) {
      scores.lastChild.replaceWith(h('p', { class: 'muted' }, 'The query plan has no search to score.'));
      return;
    }
    const payloads = found.rows.map((r) => r.payload);
    const cols = resultColumns(payloads);
    scores.lastChild.replaceWith(h('div', { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': 'Scores table' },
      h('table', { class: 'grid' },
        h('caption', { class: 'sr-only' }, 'Scores'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, '#'), ...found.columns.map((c) => h('th', { scope: 'col' }, c)),
          ...(cols || ['Value']).map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, ...found.rows.map((r, i) => h('tr', {},
          h('td', {}, String(i + 1)),
          ...r.scores.map((v) => h('td', { class: 'mono', 'data-score': '' }, String(v))),
          ...(cols === null ? [h('td', {}, cellText(r.payload))] : cols.map((c) => h('td', {}, cellText(r.payload?.[c]))))))))));
  }

  /** clear removes every trace of the previous run: results, stats and paging. */
  function clear() {
    generation++;
    docs = [];
    continuation = null;
    pageNo = 0;
    results.replaceChildren();
    stats.replaceChildren();
    scores.replaceChildren();
    scores.hidden = true;
    more.hidden = true;
    resultBar.hidden = true;
  }

  function showResults() {
    tableBtn.setAttribute('aria-pressed', String(view === 'table'));
    jsonBtn.setAttribute('aria-pressed', String(view === 'json'));
    resultBar.hidden = docs.length === 0;
    if (docs.length === 0) {
      results.replaceChildren(h('p', { class: 'muted' }, 'No results.'));
      return;
    }
    if (view === 'json') {
      results.replaceChildren(h('pre', { class: 'code-out json-out', 'data-json': '', tabindex: '0', 'aria-label': 'Query results as JSON' },
        JSON.stringify(docs, null, 2)));
      return;
    }
    const cols = resultColumns(docs);
    const rows = docs.map((d) => h('tr', {}, ...(cols === null ? [h('td', {}, cellText(d))] : cols.map((c) => h('td', {}, cellText(d[c]))))));
    results.replaceChildren(h('div', { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': 'Query results table' },
      h('table', { class: 'grid' },
        h('caption', { class: 'sr-only' }, 'Query results'),
        h('thead', {}, h('tr', {}, ...(cols || ['Value']).map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, ...rows))));
  }

  function render(res) {
    if (!res) return;
    docs.push(...(res.body?.Documents || []));
    showResults();
    const metrics = parseQueryMetrics(res.headers.get('x-ms-documentdb-query-metrics'));
    put(stats,
      h('dl', { class: 'figures' },
        h('div', {}, h('dt', {}, 'Results'), h('dd', { 'data-figure': 'count' }, String(docs.length))),
        h('div', {}, h('dt', {}, 'Request charge'), h('dd', { 'data-figure': 'charge' }, formatCharge(res.charge))),
        h('div', {}, h('dt', {}, 'Pages'), h('dd', {}, String(pageNo)))),
      metrics.length ? h('details', { class: 'metrics' }, h('summary', {}, 'Query metrics'),
        h('dl', { class: 'figures small' }, ...metrics.map((m) => h('div', {}, h('dt', {}, m.label), h('dd', {}, `${m.value}${m.unit ? ' ' + m.unit : ''}`))))) : null);
    more.hidden = !continuation;
    if (pageNo === 1 && isSearchQuery(spec.query)) showScores(res);
  }

  tableBtn.addEventListener('click', () => { view = 'table'; showResults(); });
  jsonBtn.addEventListener('click', () => { view = 'json'; showResults(); });
  saveJSON.addEventListener('click', () => download(`${ctx.collId}-query-results.json`, 'application/json', JSON.stringify(docs, null, 2) + '\n'));
  saveCSV.addEventListener('click', () => download(`${ctx.collId}-query-results.csv`, 'text/csv', toCSV(docs)));

  const form = h('form', { class: 'card query-form', novalidate: true },
    field('Query', text, 'Ctrl+Enter runs it.'),
    h('fieldset', { class: 'params-set' }, h('legend', {}, 'Parameters'), params,
      h('button', { type: 'button', class: 'ghost small', onclick: () => addParam() }, 'Add parameter')),
    field('Partition key value', pk, multiLevel
      ? 'Optional: one value, or a JSON array of the leading values (["contoso", "alice"]). Empty queries every partition.'
      : 'Optional: JSON ("a", 42) or plain text. Empty queries every partition.'),
    h('div', { class: 'actions' }, run));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (run.disabled) return; // Ctrl+Enter while a run is under way
    error.textContent = '';
    // A new run starts from nothing: a failure leaves no stale results.
    clear();
    try {
      spec = readSpec();
      run.disabled = true;
      render(await page());
    } catch (err) {
      clear();
      error.textContent = describe(err);
    } finally {
      run.disabled = false;
    }
  });
  text.addEventListener('keydown', (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === 'Enter') {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  more.addEventListener('click', async () => {
    error.textContent = '';
    more.disabled = true;
    const gen = generation;
    try {
      render(await page());
    } catch (err) {
      // The pages already shown are this query's: they stay, with the error.
      if (gen === generation) error.textContent = `The next page failed: ${describe(err)}`;
    } finally {
      more.disabled = false;
    }
  });
  panel.append(form, error, stats, resultBar, results, more, scores);
}

// ---- change feed -----------------------------------------------------------

const OPERATION_LABELS = { create: 'Create', replace: 'Replace', delete: 'Delete', upsert: 'Latest' };

function feedTab(ctx, panel) {
  const mode = h('select', {}, h('option', { value: 'latest' }, 'Latest version'), h('option', { value: 'all' }, 'All versions and deletes'));
  const from = h('select', {}, h('option', { value: 'beginning' }, 'The beginning'), h('option', { value: 'now' }, 'Now'));
  const toggle = h('button', { type: 'button', class: 'primary', 'aria-pressed': 'false' }, 'Start watching');
  const reset = h('button', { type: 'button', class: 'ghost' }, 'Clear list');
  const status = h('p', { class: 'muted status', role: 'status' }, 'Not watching.');
  const error = h('p', { class: 'error', role: 'alert' });
  const list = h('ol', { class: 'feed', 'aria-label': 'Changes, newest first' });
  const about = h('p', { class: 'muted' });
  const retention = ctx.coll.changeFeedPolicy?.retentionDuration;
  let running = false;
  let etag = null;
  let timer = null;
  let count = 0;
  let generation = 0;

  const syncAbout = () => {
    about.textContent = mode.value === 'all'
      ? `Every create, replace and delete appears as its own change, with the previous version where there is one. ${retention ? `This container keeps them for ${retention} minutes.` : 'This container keeps none: set its change feed retention in Settings.'}`
      : 'New and updated items appear here as they are written; the latest version of each item is shown, and deletes are not.';
  };
  mode.addEventListener('change', syncAbout);
  syncAbout();

  function row(record, feedMode) {
    const c = readChange(record, feedMode, ctx.coll.partitionKey);
    const label = OPERATION_LABELS[c.operation] || c.operation;
    // The spaces between the parts keep them apart in the button's name.
    const parts = [
      feedMode === 'all' ? h('span', { class: `op op-${c.operation}` }, label) : null,
      h('span', { class: 'id' }, c.id ?? '(unknown id)'),
      h('span', { class: 'muted' }, `partition ${c.partitionKey.map(cellText).join(', ')}`),
      h('span', { class: 'muted' }, formatTs(c.time)),
      h('span', { class: 'muted small mono' }, `lsn ${c.lsn ?? ''}`),
    ].filter(Boolean).flatMap((el, i) => (i ? [' ', el] : [el]));
    return h('li', {}, h('button', {
      type: 'button', class: `change op-${c.operation}`, title: 'Show the change',
      onclick: () => showChange(record, c, feedMode),
    }, ...parts));
  }

  function showChange(record, c, feedMode) {
    const facts = [
      ['Operation', feedMode === 'all' ? (OPERATION_LABELS[c.operation] || c.operation) + (c.expired ? ' (time to live expired)' : '') : 'Latest version'],
      ['Id', c.id ?? ''],
      ['Partition key', c.partitionKey.map(cellText).join(', ')],
      ['Time', formatTs(c.time)],
      ['LSN', String(c.lsn ?? '')],
    ];
    ask({
      title: `${feedMode === 'all' ? OPERATION_LABELS[c.operation] || 'Change' : 'Change'} · ${c.id ?? ''}`, ok: 'Close', cancel: null, wide: true,
      body: [
        h('dl', { class: 'facts' }, ...facts.map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v)))),
        h('h3', {}, feedMode === 'all' ? 'Change record' : 'Item as it was read'),
        h('pre', { class: 'code-out', 'data-change': '', tabindex: '0', 'aria-label': 'The change as JSON' }, JSON.stringify(record, null, 2)),
      ],
    });
  }

  async function poll(gen) {
    if (!running || gen !== generation) return;
    const feedMode = mode.value;
    const headers = {
      'A-IM': feedMode === 'all' ? 'Full-Fidelity Feed' : 'Incremental Feed',
      'x-ms-max-item-count': '100', 'x-ms-documentdb-partitionkeyrangeid': '0',
    };
    if (feedMode === 'all') headers['x-ms-cosmos-changefeed-wire-format-version'] = '2021-09-15';
    if (etag) headers['If-None-Match'] = etag;
    else if (from.value === 'now') headers['If-None-Match'] = '*';
    let again = 1000;
    try {
      const res = await client.request('GET', [...ctx.segs, 'docs'], { headers });
      if (gen !== generation) return;
      if (res.etag) etag = res.etag;
      const docs = res.status === 304 ? [] : res.body?.Documents || [];
      for (const d of docs) {
        count++;
        list.prepend(row(d, feedMode));
      }
      if (docs.length === 100) again = 0;
      error.textContent = '';
      status.textContent = `Watching · ${count} change${count === 1 ? '' : 's'} · last checked ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      if (gen !== generation) return;
      error.textContent = describe(err);
      // The request itself is wrong (mode, credential, container): asking
      // again would only repeat the error.
      if (err instanceof CosmosError && [400, 401, 403, 404].includes(err.status)) {
        stop();
        return;
      }
      again = 5000;
    }
    if (running && gen === generation) timer = setTimeout(() => poll(gen), again);
  }
  function stop() {
    running = false;
    generation++;
    clearTimeout(timer);
    toggle.textContent = 'Resume watching';
    toggle.setAttribute('aria-pressed', 'false');
    status.textContent = `Paused · ${count} change${count === 1 ? '' : 's'}`;
  }
  toggle.addEventListener('click', () => {
    if (running) return stop();
    running = true;
    toggle.textContent = 'Pause';
    toggle.setAttribute('aria-pressed', 'true');
    mode.disabled = from.disabled = true;
    error.textContent = '';
    poll(generation);
  });
  reset.addEventListener('click', () => {
    list.replaceChildren();
    if (running) return;
    // Paused or stopped: start over, with the mode and start chosen again.
    etag = null;
    count = 0;
    mode.disabled = from.disabled = false;
    toggle.textContent = 'Start watching';
    status.textContent = 'Not watching.';
    error.textContent = '';
  });
  ctx.stops.push(() => { running = false; generation++; clearTimeout(timer); });
  panel.append(
    h('div', { class: 'toolbar' }, field('Mode', mode), field('Start from', from), toggle, reset),
    about, status, error, list);
}

// ---- settings --------------------------------------------------------------

function settingsTab(ctx, panel) {
  const writable = client.kind === 'master';
  const policy = h('textarea', { class: 'code', rows: 16, spellcheck: 'false', readOnly: !writable });
  const ttl = ttlChoice(ctx.coll.defaultTtl, !writable);
  const retention = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric', placeholder: 'None', disabled: !writable });
  const msg = h('p', { role: 'status', class: 'editor-msg' });
  const save = h('button', { type: 'button', class: 'primary', hidden: !writable }, 'Save settings');
  const facts = h('dl', { class: 'facts' });

  function fill(coll) {
    ctx.coll = coll;
    policy.value = JSON.stringify(coll.indexingPolicy || {}, null, 2);
    ttl.fill(coll.defaultTtl);
    retention.value = coll.changeFeedPolicy?.retentionDuration > 0 ? String(coll.changeFeedPolicy.retentionDuration) : '';
    const pk = coll.partitionKey || {};
    const uniques = (coll.uniqueKeyPolicy?.uniqueKeys || []).map((u) => (u.paths || []).join(' + '));
    put(facts,
      h('div', {}, h('dt', {}, 'Partition key'), h('dd', { class: 'mono' }, `${(pk.paths || []).join(', ')} (${pk.kind || 'Hash'}, version ${pk.version || 1})`)),
      h('div', {}, h('dt', {}, 'Unique keys'), h('dd', { class: 'mono' }, uniques.length ? uniques.join('; ') : 'None')));
  }
  save.addEventListener('click', async () => {
    msg.className = 'editor-msg';
    msg.textContent = '';
    const body = {};
    for (const [k, v] of Object.entries(ctx.coll)) if (!SYSTEM.has(k) && !k.startsWith('_')) body[k] = v;
    delete body.defaultTtl;
    delete body.changeFeedPolicy;
    try {
      body.indexingPolicy = parsePolicy(policy.value);
      const t = ttl.value();
      if (t !== undefined) body.defaultTtl = t;
      const r = retentionValue(retention);
      if (r !== undefined) body.changeFeedPolicy = { retentionDuration: r };
    } catch (err) {
      msg.className = 'editor-msg error';
      msg.textContent = err.message;
      return;
    }
    try {
      const res = await client.request('PUT', ctx.segs, { body, headers: { 'If-Match': ctx.coll._etag } });
      fill(res.body);
      msg.className = 'editor-msg ok';
      msg.textContent = `Saved · ${formatCharge(res.charge)}`;
    } catch (err) {
      msg.className = 'editor-msg error';
      msg.textContent = describe(err);
    }
  });
  fill(ctx.coll);
  panel.append(
    scaleCard(ctx),
    h('div', { class: 'card' },
      h('h2', {}, 'Container'), facts,
      h('h2', {}, 'Time to live'), ...ttl.els,
      h('h2', {}, 'Change feed'),
      field('Keep all versions and deletes for (minutes)', retention, 'Needed for the all versions and deletes mode. Empty keeps none.'),
      h('h2', {}, 'Indexing policy'), field('Indexing policy (JSON)', policy),
      msg, h('div', { class: 'actions' }, save)));
}

/**
 * scaleCard shows the container's provisioned throughput (its own offer,
 * or its database's when it shares it) and lets the master key change it.
 */
function scaleCard(ctx) {
  const card = h('div', { class: 'card' }, h('h2', {}, 'Scale'), h('p', { class: 'muted' }, 'Loading…'));
  if (client.kind === 'token') {
    put(card, h('h2', {}, 'Scale'), h('p', { class: 'muted' }, 'A resource token cannot read throughput.'));
    return card;
  }
  const msg = h('p', { role: 'status', class: 'editor-msg' });
  (async () => {
    let offer;
    let shared = false;
    try {
      offer = await offerOf(ctx.coll._rid);
      if (!offer) {
        offer = await offerOf((await client.request('GET', ['dbs', ctx.dbId])).body._rid);
        shared = !!offer;
      }
    } catch (err) {
      put(card, h('h2', {}, 'Scale'), h('p', { class: 'error', role: 'alert' }, describe(err)));
      return;
    }
    if (!offer) {
      put(card, h('h2', {}, 'Scale'), h('p', { class: 'muted' }, 'No throughput is provisioned.'));
      return;
    }
    const current = h('p', { 'data-throughput': '' });
    const auto = !!offer.content?.offerAutopilotSettings;
    const amount = h('input', { type: 'number', inputmode: 'numeric', min: auto ? '1000' : '400', step: auto ? '1000' : '100', disabled: client.kind !== 'master' });
    const save = h('button', { type: 'button', class: 'primary', hidden: client.kind !== 'master' }, 'Save throughput');
    const show = (o) => {
      offer = o;
      current.textContent = `${describeOffer(o)}${shared ? `, shared with the containers of ${ctx.dbId}` : ''}.`;
      amount.value = String(auto ? o.content.offerAutopilotSettings.maxThroughput : o.content.offerThroughput);
    };
    save.addEventListener('click', async () => {
      msg.className = 'editor-msg';
      msg.textContent = '';
      const n = Number(amount.value);
      const content = auto ? { ...offer.content, offerAutopilotSettings: { ...offer.content.offerAutopilotSettings, maxThroughput: n } }
        : { ...offer.content, offerThroughput: n };
      if (auto) delete content.offerThroughput;
      try {
        const res = await client.request('PUT', ['offers', offer._rid], { body: { ...offer, content }, headers: { 'If-Match': offer._etag } });
        show(res.body);
        msg.className = 'editor-msg ok';
        msg.textContent = `Saved · ${formatCharge(res.charge)}`;
      } catch (err) {
        msg.className = 'editor-msg error';
        msg.textContent = describe(err);
      }
    });
    show(offer);
    put(card, h('h2', {}, 'Scale'), current,
      field(auto ? 'Maximum RU/s' : 'RU/s', amount, auto ? 'From 1000, in steps of 1000.' : 'From 400, in steps of 100.'),
      msg, h('div', { class: 'actions' }, save));
  })();
  return card;
}

// ---- scripts: stored procedures, triggers, user-defined functions ---------

const SCRIPT_KINDS = {
  sprocs: {
    seg: 'sprocs', feed: 'StoredProcedures', one: 'stored procedure', title: 'Stored procedure', plural: 'Procedures',
    template: `function (name) {
  var response = getContext().getResponse();
  response.setBody("Hello, " + name);
}`,
  },
  triggers: {
    seg: 'triggers', feed: 'Triggers', one: 'trigger', title: 'Trigger', plural: 'Triggers',
    template: `function () {
  // A pre-trigger: stamp the item about to be written.
  var request = getContext().getRequest();
  var item = request.getBody();
  item.stampedAt = new Date().toISOString();
  request.setBody(item);
}`,
  },
  udfs: {
    seg: 'udfs', feed: 'UserDefinedFunctions', one: 'user-defined function', title: 'User-defined function', plural: 'Functions',
    template: `function (amount) {
  return amount * 1.2;
}`,
  },
};

/**
 * scriptsTab lists a container's scripts of one kind and creates, edits and
 * deletes them; stored procedures also run, and a user-defined function
 * shows how a query calls it.
 */
function scriptsTab(ctx, panel, kind) {
  const writable = client.kind === 'master';
  const list = h('ul', { class: 'plain-list', 'aria-label': kind.plural });
  const error = h('p', { class: 'error', role: 'alert' });
  const detail = h('div', { class: 'detail' });

  async function load(select, note) {
    error.textContent = '';
    try {
      const scripts = await listAll([...ctx.segs, kind.seg], kind.feed);
      list.replaceChildren(...scripts.sort(byId).map((s) => h('li', {},
        h('button', { type: 'button', class: 'link', 'aria-current': s.id === select ? 'true' : null, onclick: () => show(s) }, s.id),
        kind.seg === 'triggers' ? h('span', { class: 'muted small' }, ` ${s.triggerType} · ${s.triggerOperation}`) : null)));
      if (scripts.length === 0) list.replaceChildren(h('li', { class: 'muted' }, `No ${kind.one}s yet.`));
      const chosen = scripts.find((s) => s.id === select);
      if (chosen) show(chosen, note);
    } catch (err) {
      error.textContent = describe(err);
    }
  }

  function show(sc, note) {
    const isNew = !sc;
    const id = h('input', { autocomplete: 'off', value: sc?.id || '', readOnly: !isNew, class: 'mono' });
    const body = h('textarea', { class: 'code', rows: 12, spellcheck: 'false', readOnly: !writable });
    body.value = sc?.body || kind.template;
    const extra = [];
    let type;
    let operation;
    if (kind.seg === 'triggers') {
      type = h('select', { disabled: !writable }, h('option', { value: 'Pre' }, 'Pre: runs before the write'), h('option', { value: 'Post' }, 'Post: runs after the write, in its transaction'));
      operation = h('select', { disabled: !writable }, ...['All', 'Create', 'Replace', 'Delete', 'Upsert'].map((o) => h('option', { value: o }, o)));
      type.value = sc?.triggerType || 'Pre';
      operation.value = sc?.triggerOperation || 'All';
      extra.push(h('div', { class: 'row2' }, field('Trigger type', type), field('Trigger operation', operation)),
        h('p', { class: 'hint' }, 'A trigger runs only on writes that name it (the SDKs\' preTriggerInclude and postTriggerInclude options).'));
    }
    const msg = h('p', { class: 'editor-msg', role: 'status' });
    if (note) {
      msg.className = 'editor-msg ok';
      msg.textContent = note;
    }
    const save = h('button', { type: 'button', class: 'primary', hidden: !writable }, isNew ? 'Create' : 'Save');
    const del = h('button', { type: 'button', class: 'danger', hidden: isNew || !writable }, `Delete ${kind.one}`);
    const props = () => {
      const p = { id: isNew ? id.value.trim() : sc.id, body: body.value };
      if (type) Object.assign(p, { triggerType: type.value, triggerOperation: operation.value });
      return p;
    };
    save.addEventListener('click', async () => {
      msg.className = 'editor-msg';
      msg.textContent = '';
      if (isNew && !id.value.trim()) {
        msg.className = 'editor-msg error';
        msg.textContent = 'Enter an id.';
        return;
      }
      try {
        const res = isNew
          ? await client.request('POST', [...ctx.segs, kind.seg], { body: props() })
          : await client.request('PUT', [...ctx.segs, kind.seg, sc.id], { body: props(), headers: { 'If-Match': sc._etag } });
        await load(res.body.id, `${isNew ? 'Created' : 'Saved'} · ${formatCharge(res.charge)}`);
      } catch (err) {
        msg.className = 'editor-msg error';
        msg.textContent = describe(err);
      }
    });
    del.addEventListener('click', async () => {
      const ok = await ask({
        title: `Delete ${kind.one}`, ok: 'Delete', danger: true,
        body: [h('p', {}, `Delete ${kind.one} `, h('strong', {}, sc.id), '? This cannot be undone.')],
        onOk: () => client.request('DELETE', [...ctx.segs, kind.seg, sc.id]),
      });
      if (!ok) return;
      detail.replaceChildren(h('p', { class: 'editor-msg ok', role: 'status' }, `Deleted ${kind.one} ${sc.id}.`));
      await load();
    });
    const parts = [h('div', { class: 'card' },
      h('h2', {}, isNew ? `New ${kind.one}` : `${kind.title} ${sc.id}`),
      field('Id', id), ...extra, field('Body (JavaScript)', body), msg, h('div', { class: 'actions' }, del, save))];
    if (!isNew && kind.seg === 'sprocs') parts.push(runForm(ctx, sc));
    if (!isNew && kind.seg === 'udfs') {
      parts.push(h('div', { class: 'card' }, h('h2', {}, 'Use'),
        h('p', {}, 'Call it in a query as ', h('code', { class: 'mono' }, `udf.${sc.id}(…)`), ', for example ',
          h('code', { class: 'mono' }, `SELECT VALUE udf.${sc.id}(c.total) FROM c`), '.')));
    }
    detail.replaceChildren(...parts);
    if (!note) (isNew ? id : body).focus();
  }

  panel.append(h('div', { class: 'split' },
    h('div', { class: 'list card' },
      h('div', { class: 'toolbar' }, h('h2', {}, kind.plural), h('span', { class: 'spacer' }),
        writable ? h('button', { type: 'button', class: 'primary small', 'aria-label': `New ${kind.one}`, onclick: () => show(null) }, 'New') : null),
      error, list),
    detail));
  load();
}

/** runForm runs a stored procedure in a partition with arguments. */
function runForm(ctx, sp) {
  const pk = h('input', { autocomplete: 'off', class: 'mono' });
  const args = h('textarea', { class: 'code', rows: 3, spellcheck: 'false' });
  args.value = '[]';
  const out = h('div', { class: 'run-out', 'aria-live': 'polite' });
  const run = h('button', { type: 'submit', class: 'primary' }, 'Run');
  const form = h('form', { class: 'card', novalidate: true },
    h('h2', {}, 'Run'),
    field('Partition key value', pk, 'JSON ("a", 42) or plain text: the partition the procedure runs in.'),
    field('Arguments (JSON array)', args),
    h('div', { class: 'actions' }, run), out);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    out.replaceChildren();
    let a;
    try {
      a = JSON.parse(args.value || '[]');
      if (!Array.isArray(a)) a = [a];
    } catch (err) {
      out.replaceChildren(h('p', { class: 'error', role: 'alert' }, `The arguments are not valid JSON: ${err.message}`));
      return;
    }
    const pkv = partitionKeyOf(ctx.coll, pk.value);
    const headers = { 'x-ms-documentdb-script-enable-logging': 'true' };
    if (pkv !== undefined) headers['x-ms-documentdb-partitionkey'] = partitionKeyHeader(pkv);
    run.disabled = true;
    try {
      const res = await client.request('POST', [...ctx.segs, 'sprocs', sp.id], { headers, body: a });
      const log = res.headers.get('x-ms-documentdb-script-log-results');
      put(out,
        h('dl', { class: 'figures' },
          h('div', {}, h('dt', {}, 'Status'), h('dd', {}, `${res.status} OK`)),
          h('div', {}, h('dt', {}, 'Request charge'), h('dd', {}, formatCharge(res.charge)))),
        h('h3', {}, 'Result'),
        h('pre', { class: 'code-out', 'data-result': '' }, res.body === null ? 'null' : typeof res.body === 'string' ? JSON.stringify(res.body) : JSON.stringify(res.body, null, 2)),
        log ? h('h3', {}, 'Log') : null,
        log ? h('pre', { class: 'code-out' }, decodeURIComponent(log)) : null);
    } catch (err) {
      out.replaceChildren(h('p', { class: 'error', role: 'alert' }, describe(err)));
    } finally {
      run.disabled = false;
    }
  });
  return form;
}

// ---- fault rules -------------------------------------------------------------

/**
 * showFaults shows the server's fault rules (/_admin/faults) in the order
 * they are tried, with the requests each has faulted so far (refreshed
 * every two seconds while the page is open), and adds and removes rules.
 * The API takes the master key only; the page is offered to it alone.
 */
function showFaults() {
  stopCurrent();
  markOpen(null);
  const msg = h('p', { class: 'editor-msg', role: 'status' });
  const err = h('p', { class: 'error', role: 'alert' });
  const list = h('div', { 'data-rules': '' }, h('p', { class: 'muted' }, 'Loading…'));
  const add = h('button', { type: 'button', class: 'primary' }, 'Add rule');
  const refresh = h('button', { type: 'button', class: 'ghost' }, 'Refresh');
  const clear = h('button', { type: 'button', class: 'danger', disabled: true }, 'Remove all');
  let shown = null;
  let stopped = false;

  function render(rules) {
    const key = JSON.stringify(rules);
    if (key === shown) return; // unchanged: keep focus and selection where they are
    shown = key;
    clear.disabled = rules.length === 0;
    if (rules.length === 0) {
      put(list, h('p', { class: 'muted', 'data-empty': '' }, 'No fault rule is installed: every request is served as usual.'));
      return;
    }
    put(list, h('div', { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': 'Fault rules table' },
      h('table', { class: 'grid faults-grid' },
        h('caption', { class: 'sr-only' }, 'Fault rules in the order they are tried, with the requests each has faulted'),
        h('thead', {}, h('tr', {},
          ...['Rule', 'Does', 'Applies to', 'Limits', 'Hits'].map((c) => h('th', { scope: 'col' }, c)),
          h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')))),
        h('tbody', {}, ...rules.map((r) => h('tr', { 'data-rule': r.id },
          h('th', { scope: 'row', class: 'mono' }, r.id),
          h('td', { 'data-label': 'Does' }, describeResult(r)),
          h('td', { 'data-label': 'Applies to' }, describeCondition(r)),
          h('td', { 'data-label': 'Limits' }, describeLimits(r)),
          h('td', { 'data-label': 'Hits' }, h('span', { 'data-hits': '', class: 'num' }, String(r.hits ?? 0))),
          h('td', { class: 'actions-cell' }, h('button', { type: 'button', class: 'ghost small', 'aria-label': `Remove rule ${r.id}`, onclick: () => remove(r.id) }, 'Remove'))))))));
  }

  async function load() {
    try {
      const res = await faults(client, 'GET');
      if (stopped) return;
      err.textContent = '';
      render(res.body?.rules || []);
    } catch (e) {
      if (!stopped) err.textContent = describe(e);
    }
  }

  async function remove(id) {
    try {
      await faults(client, 'DELETE', id);
      msg.textContent = `Rule ${id} removed.`;
    } catch (e) {
      err.textContent = describe(e);
    }
    await load();
  }

  async function removeAll() {
    const n = JSON.parse(shown || '[]').length;
    await ask({
      title: 'Remove every fault rule', ok: 'Remove all', danger: true,
      body: [h('p', {}, `Remove all ${n} fault rules? Requests are then served as usual.`)],
      onOk: async () => {
        const res = await faults(client, 'DELETE');
        msg.textContent = `${res.body?.removed ?? n} rules removed.`;
      },
    });
    await load();
  }

  async function addRule() {
    const id = h('input', { autocomplete: 'off', spellcheck: 'false', class: 'mono', placeholder: 'made up when empty' });
    const type = h('select', {}, ...FAULT_TYPES.map(([t, what]) => h('option', { value: t }, `${t}: ${what}`)));
    const lost = h('select', {}, ...LOST_KINDS.map(([k, what]) => h('option', { value: k }, what)));
    const retryAfter = h('input', { inputmode: 'numeric', autocomplete: 'off', placeholder: '100' });
    const delay = h('input', { inputmode: 'numeric', autocomplete: 'off' });
    const ops = h('input', { autocomplete: 'off', spellcheck: 'false', placeholder: 'every operation' });
    const db = h('input', { autocomplete: 'off', spellcheck: 'false' });
    const coll = h('input', { autocomplete: 'off', spellcheck: 'false' });
    const agent = h('input', { autocomplete: 'off', spellcheck: 'false' });
    const times = h('input', { inputmode: 'numeric', autocomplete: 'off', placeholder: 'no limit' });
    const percent = h('input', { inputmode: 'decimal', autocomplete: 'off', placeholder: '100' });
    const lostField = field('Reply lost as', lost);
    const retryField = field('Retry after (ms)', retryAfter, 'The x-ms-retry-after-ms the 429 carries; 100 ms when empty.');
    const sync = () => {
      lostField.hidden = !losesReply(type.value);
      retryField.hidden = type.value !== 'TooManyRequests';
    };
    type.addEventListener('change', sync);
    sync();
    await ask({
      title: 'Add a fault rule', ok: 'Add rule', wide: true,
      body: [
        h('p', { class: 'muted' }, 'The server answers the requests the rule applies to with its fault, for every SDK and tool at once. Rules are tried in order; the first that applies fires.'),
        h('div', { class: 'row2' }, field('Rule id', id), field('Does', type)),
        h('div', { class: 'row2' }, lostField, retryField, field('Delay (ms)', delay, 'Waited before the fault; for a response delay, the delay itself.')),
        h('div', { class: 'row2' },
          field('Operations', ops, 'Comma-separated, as the SDKs\' fault libraries name them: ReadItem, CreateItem, UpsertItem, ReplaceItem, PatchItem, BatchItem, QueryItem, ChangeFeedItem.'),
          field('User agent contains', agent, 'Say "azsdk-js" to hit the JavaScript SDK only, or an application id.')),
        h('div', { class: 'row2' }, field('Database', db), field('Container', coll)),
        h('div', { class: 'row2' },
          field('Times', times, 'How many requests it faults at most.'),
          field('Share of requests (%)', percent, 'Of the requests it applies to; the others are served as usual.')),
      ],
      onOk: async () => {
        const rule = ruleFromForm({
          id: id.value, type: type.value, lost: lost.value, retryAfterMs: retryAfter.value, delayMs: delay.value,
          operations: ops.value, database: db.value, container: coll.value, userAgent: agent.value,
          times: times.value, percent: percent.value,
        });
        const res = await faults(client, 'POST', undefined, rule);
        const added = res.body?.rules?.[0];
        msg.textContent = `Rule ${added?.id ?? ''} added.`;
      },
    });
    await load();
  }

  add.addEventListener('click', addRule);
  refresh.addEventListener('click', load);
  clear.addEventListener('click', removeAll);
  put($('#content'),
    h('section', { class: 'card faults', 'aria-labelledby': 'faults-title' },
      h('div', { class: 'toolbar' }, h('h1', { id: 'faults-title' }, 'Fault rules'), h('span', { class: 'spacer' }), add, refresh, clear),
      h('p', { class: 'muted' }, 'Failures this server injects on demand: 429 storms, timeouts, splits, writes that commit and whose reply is lost. Hits count the requests each rule has faulted.'),
      err, list, msg));
  const timer = setInterval(load, 2000);
  stopCurrent = () => {
    stopped = true;
    clearInterval(timer);
  };
  load();
}

// ---- start -----------------------------------------------------------------

function start() {
  for (const r of document.querySelectorAll('input[name=kind]')) r.addEventListener('change', syncKindFields);
  $('#login-form').addEventListener('submit', onLogin);
  $('#sign-out').addEventListener('click', () => {
    sessionStorage.removeItem(STORE);
    showLogin('Signed out.');
  });
  $('#show-connection').addEventListener('click', () => showHome());
  $('#show-faults').addEventListener('click', () => showFaults());
  $('#new-db').addEventListener('click', newDatabase);
  syncKindFields();
  const saved = sessionStorage.getItem(STORE);
  if (saved) {
    signIn(JSON.parse(saved), true).catch((err) => {
      sessionStorage.removeItem(STORE);
      showLogin(describe(err));
    });
  } else {
    $('#secret').focus();
  }
}

start();
