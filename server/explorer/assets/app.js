// The data explorer's page: sign-in, the database tree, and a container's
// tabs (items, query, change feed, settings, stored procedures). All data
// comes from the REST API through cosmos.js with the user's credential.

import { Client, CosmosError, partitionKeyHeader, partitionKeyValues } from './cosmos.js';
import { parseQueryMetrics } from './metrics.js';

const STORE = 'orrery-explorer-credential';
const SYSTEM = new Set(['_rid', '_self', '_etag', '_attachments', '_ts', '_lsn']);

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

// ---- dialog ----------------------------------------------------------------

/**
 * ask opens the modal dialog with body elements; onOk(values) may throw to
 * keep it open with the error shown. Resolves true when confirmed.
 */
function ask({ title, body = [], ok = 'OK', danger = false, onOk = async () => {} }) {
  const dlg = $('#dialog');
  $('#dialog-title').textContent = title;
  $('#dialog-body').replaceChildren(...body);
  $('#dialog-error').textContent = '';
  const okBtn = $('#dialog-ok');
  okBtn.textContent = ok;
  okBtn.className = danger ? 'danger' : 'primary';
  return new Promise((resolve) => {
    const form = $('#dialog-form');
    const cancel = $('#dialog-cancel');
    const done = (v) => {
      form.removeEventListener('submit', submit);
      cancel.removeEventListener('click', onCancel);
      dlg.removeEventListener('cancel', onCancel);
      dlg.close();
      resolve(v);
    };
    const submit = async (e) => {
      e.preventDefault();
      okBtn.disabled = true;
      try {
        await onOk();
        done(true);
      } catch (err) {
        $('#dialog-error').textContent = describe(err);
      } finally {
        okBtn.disabled = false;
      }
    };
    const onCancel = (e) => {
      e.preventDefault();
      done(false);
    };
    form.addEventListener('submit', submit);
    cancel.addEventListener('click', onCancel);
    dlg.addEventListener('cancel', onCancel);
    dlg.showModal();
    const first = $('#dialog-body input, #dialog-body textarea, #dialog-body select');
    (first || okBtn).focus();
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
  await loadTree();
  if (tokenScope) openContainer(tokenScope.db, tokenScope.coll);
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

function databaseNode(dbId) {
  const list = h('ul', { hidden: true });
  const toggle = h('button', { type: 'button', class: 'db', 'aria-expanded': 'false' }, h('span', { class: 'chev', 'aria-hidden': 'true' }), dbId);
  const li = h('li', { 'data-db': dbId }, toggle, list);
  const load = async () => {
    list.replaceChildren(h('li', { class: 'muted pad' }, 'Loading…'));
    try {
      const colls = await listAll(['dbs', dbId, 'colls'], 'DocumentCollections');
      list.replaceChildren(...colls.sort(byId).map((c) => h('li', {}, containerButton(dbId, c.id))));
      if (client.kind === 'master') {
        list.append(h('li', {}, h('button', { type: 'button', class: 'link small', onclick: () => newContainer(dbId) }, '+ New container')));
      }
      if (colls.length === 0) list.prepend(h('li', { class: 'muted pad' }, 'No containers.'));
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
  return li;
}

function containerButton(dbId, collId) {
  return h('button', {
    type: 'button', class: 'coll', 'data-coll': `${dbId}/${collId}`,
    onclick: () => openContainer(dbId, collId),
  }, collId);
}

async function newDatabase() {
  const id = h('input', { required: true, autocomplete: 'off' });
  await ask({
    title: 'New database', ok: 'Create', body: [field('Database id', id)],
    onOk: async () => {
      if (!id.value.trim()) throw new Error('Enter an id.');
      await client.request('POST', ['dbs'], { body: { id: id.value.trim() } });
    },
  }) && loadTree();
}

async function newContainer(dbId) {
  const id = h('input', { required: true, autocomplete: 'off' });
  const pk = h('input', { value: '/pk', autocomplete: 'off' });
  const ok = await ask({
    title: `New container in ${dbId}`, ok: 'Create',
    body: [field('Container id', id), field('Partition key path', pk, 'For example /tenantId')],
    onOk: async () => {
      if (!id.value.trim()) throw new Error('Enter an id.');
      await client.request('POST', ['dbs', dbId, 'colls'], {
        body: { id: id.value.trim(), partitionKey: { paths: [pk.value.trim()], kind: 'Hash', version: 2 } },
      });
    },
  });
  if (ok) {
    const node = [...document.querySelectorAll('#tree > li')].find((li) => li.dataset.db === dbId);
    await node?.reload();
    openContainer(dbId, id.value.trim());
  }
}

// ---- container view --------------------------------------------------------

async function openContainer(dbId, collId) {
  stopCurrent();
  stopCurrent = () => {};
  for (const b of document.querySelectorAll('.coll')) {
    b.classList.toggle('active', b.dataset.coll === `${dbId}/${collId}`);
    if (b.dataset.coll === `${dbId}/${collId}`) b.setAttribute('aria-current', 'true');
    else b.removeAttribute('aria-current');
  }
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
    ['sprocs', 'Stored procedures', sprocsTab],
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
    h('div', { class: 'content-head' },
      h('h1', {}, h('span', { class: 'muted' }, `${dbId} / `), collId),
      h('span', { class: 'pill' }, `Partition key ${pkPaths || 'none'}`)),
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

  async function load() {
    error.textContent = '';
    const headers = { 'x-ms-max-item-count': pageSize.value };
    if (pages[page]) headers['x-ms-continuation'] = pages[page];
    if (tokenScope) headers['x-ms-documentdb-partitionkeyrangeid'] = '0';
    try {
      const res = await client.request('GET', [...ctx.segs, 'docs'], { headers });
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
      error.textContent = describe(err);
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
        h('table', { class: 'grid' },
          h('caption', { class: 'sr-only' }, 'Items'),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'id'), h('th', { scope: 'col' }, 'Partition key'), h('th', { scope: 'col' }, 'Modified'))),
          tbody),
        h('div', { class: 'pager' }, prev, status, next)),
      editor));
  load();
}

// ---- query -----------------------------------------------------------------

function queryTab(ctx, panel) {
  const text = h('textarea', { class: 'code', rows: 4, spellcheck: 'false' }, );
  text.value = 'SELECT * FROM c';
  const params = h('div', { class: 'params' });
  const pk = h('input', { autocomplete: 'off', placeholder: 'All partitions' });
  const run = h('button', { type: 'submit', class: 'primary' }, 'Run query');
  const error = h('p', { class: 'error', role: 'alert' });
  const stats = h('div', { class: 'stats', 'aria-live': 'polite' });
  const results = h('div', { class: 'results' });
  const more = h('button', { type: 'button', class: 'ghost', hidden: true }, 'Next page');
  let continuation = null;
  let spec = null;
  let pageNo = 0;

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
    const headers = {
      'Content-Type': 'application/query+json',
      'x-ms-documentdb-isquery': 'True',
      'x-ms-documentdb-query-enablecrosspartition': 'True',
      'x-ms-documentdb-populatequerymetrics': 'True',
      'x-ms-max-item-count': '100',
    };
    const pkv = parseLoose(pk.value);
    if (pkv !== undefined) headers['x-ms-documentdb-partitionkey'] = partitionKeyHeader([pkv]);
    else headers['x-ms-documentdb-partitionkeyrangeid'] = '0';
    if (continuation) headers['x-ms-continuation'] = continuation;
    const res = await client.request('POST', [...ctx.segs, 'docs'], { headers, body: spec });
    continuation = res.continuation;
    pageNo++;
    return res;
  }

  function render(res, append) {
    const docs = res.body?.Documents || [];
    const scalar = docs.some((d) => d === null || typeof d !== 'object' || Array.isArray(d));
    let cols;
    if (scalar) cols = ['Value'];
    else {
      const set = new Set();
      for (const d of docs) for (const k of Object.keys(d)) if (!SYSTEM.has(k)) set.add(k);
      cols = [...set];
      if (cols.includes('id')) cols = ['id', ...cols.filter((c) => c !== 'id')];
    }
    const rows = docs.map((d) => h('tr', {}, ...(scalar ? [h('td', {}, cellText(d))] : cols.map((c) => h('td', {}, cellText(d[c]))))));
    let table = $('table', results);
    if (!append || !table) {
      table = h('table', { class: 'grid' },
        h('caption', { class: 'sr-only' }, 'Query results'),
        h('thead', {}, h('tr', {}, ...cols.map((c) => h('th', { scope: 'col' }, c)))), h('tbody'));
      results.replaceChildren(table);
    }
    $('tbody', table).append(...rows);
    const total = $('tbody', table).children.length;
    if (total === 0) results.replaceChildren(h('p', { class: 'muted' }, 'No results.'));
    const metrics = parseQueryMetrics(res.headers.get('x-ms-documentdb-query-metrics'));
    put(stats,
      h('dl', { class: 'figures' },
        h('div', {}, h('dt', {}, 'Results'), h('dd', { 'data-figure': 'count' }, String(total))),
        h('div', {}, h('dt', {}, 'Request charge'), h('dd', { 'data-figure': 'charge' }, formatCharge(res.charge))),
        h('div', {}, h('dt', {}, 'Pages'), h('dd', {}, String(pageNo)))),
      metrics.length ? h('details', { class: 'metrics' }, h('summary', {}, 'Query metrics'),
        h('dl', { class: 'figures small' }, ...metrics.map((m) => h('div', {}, h('dt', {}, m.label), h('dd', {}, `${m.value}${m.unit ? ' ' + m.unit : ''}`))))) : null);
    more.hidden = !continuation;
  }

  const form = h('form', { class: 'card query-form', novalidate: true },
    field('Query', text, 'Ctrl+Enter runs it.'),
    h('fieldset', { class: 'params-set' }, h('legend', {}, 'Parameters'), params,
      h('button', { type: 'button', class: 'ghost small', onclick: () => addParam() }, 'Add parameter')),
    field('Partition key value', pk, 'Optional: JSON ("a", 42) or plain text. Empty queries every partition.'),
    h('div', { class: 'actions' }, run));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    try {
      spec = readSpec();
      continuation = null;
      pageNo = 0;
      run.disabled = true;
      render(await page(), false);
    } catch (err) {
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
    try {
      render(await page(), true);
    } catch (err) {
      error.textContent = describe(err);
    }
  });
  panel.append(form, error, stats, results, more);
}

// ---- change feed -----------------------------------------------------------

function feedTab(ctx, panel) {
  const from = h('select', {}, h('option', { value: 'beginning' }, 'The beginning'), h('option', { value: 'now' }, 'Now'));
  const toggle = h('button', { type: 'button', class: 'primary', 'aria-pressed': 'false' }, 'Start watching');
  const status = h('p', { class: 'muted status', role: 'status' }, 'Not watching.');
  const error = h('p', { class: 'error', role: 'alert' });
  const list = h('ol', { class: 'feed', 'aria-label': 'Changes, newest first' });
  let running = false;
  let etag = null;
  let timer = null;
  let count = 0;
  let generation = 0;

  async function poll(gen) {
    if (!running || gen !== generation) return;
    const headers = { 'A-IM': 'Incremental Feed', 'x-ms-max-item-count': '100', 'x-ms-documentdb-partitionkeyrangeid': '0' };
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
        const pk = partitionKeyValues(ctx.coll.partitionKey, d);
        list.prepend(h('li', { class: 'change' },
          h('span', { class: 'id' }, d.id),
          h('span', { class: 'muted' }, `partition ${pk.map(cellText).join(', ')}`),
          h('span', { class: 'muted' }, formatTs(d._ts)),
          h('span', { class: 'muted small mono' }, `lsn ${d._lsn ?? ''}`)));
      }
      if (docs.length === 100) again = 0;
      error.textContent = '';
      status.textContent = `Watching · ${count} change${count === 1 ? '' : 's'} · last checked ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      error.textContent = describe(err);
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
    from.disabled = true;
    poll(generation);
  });
  ctx.stops.push(() => { running = false; generation++; clearTimeout(timer); });
  panel.append(
    h('div', { class: 'toolbar' }, field('Start from', from), toggle,
      h('button', { type: 'button', class: 'ghost', onclick: () => { list.replaceChildren(); } }, 'Clear list')),
    h('p', { class: 'muted' }, 'New and updated items appear here as they are written; the latest version of each item is shown.'),
    status, error, list);
}

// ---- settings --------------------------------------------------------------

function settingsTab(ctx, panel) {
  const writable = client.kind === 'master';
  const policy = h('textarea', { class: 'code', rows: 16, spellcheck: 'false', readOnly: !writable });
  const ttlMode = h('select', {},
    h('option', { value: 'off' }, 'Off: items never expire'),
    h('option', { value: 'on' }, 'On: items expire only when they set ttl'),
    h('option', { value: 'seconds' }, 'On: items expire after a default time'));
  const ttlSeconds = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric' });
  const secondsField = field('Default time to live (seconds)', ttlSeconds);
  const msg = h('p', { role: 'status', class: 'editor-msg' });
  const save = h('button', { type: 'button', class: 'primary', hidden: !writable }, 'Save settings');

  function fill(coll) {
    ctx.coll = coll;
    policy.value = JSON.stringify(coll.indexingPolicy || {}, null, 2);
    const ttl = coll.defaultTtl;
    ttlMode.value = ttl === undefined || ttl === null ? 'off' : ttl === -1 ? 'on' : 'seconds';
    ttlSeconds.value = ttl > 0 ? String(ttl) : '';
    secondsField.hidden = ttlMode.value !== 'seconds';
  }
  ttlMode.addEventListener('change', () => {
    secondsField.hidden = ttlMode.value !== 'seconds';
    if (ttlMode.value === 'seconds' && !ttlSeconds.value) ttlSeconds.value = '3600';
  });
  ttlMode.disabled = !writable;
  ttlSeconds.disabled = !writable;
  save.addEventListener('click', async () => {
    msg.className = 'editor-msg';
    msg.textContent = '';
    let indexingPolicy;
    try {
      indexingPolicy = JSON.parse(policy.value);
    } catch (e) {
      msg.className = 'editor-msg error';
      msg.textContent = `The indexing policy is not valid JSON: ${e.message}`;
      return;
    }
    const body = {};
    for (const [k, v] of Object.entries(ctx.coll)) if (!SYSTEM.has(k) && !k.startsWith('_')) body[k] = v;
    body.indexingPolicy = indexingPolicy;
    delete body.defaultTtl;
    if (ttlMode.value === 'on') body.defaultTtl = -1;
    if (ttlMode.value === 'seconds') {
      const n = Number(ttlSeconds.value);
      if (!Number.isInteger(n) || n < 1) {
        msg.className = 'editor-msg error';
        msg.textContent = 'The default time to live is a whole number of seconds, at least 1.';
        return;
      }
      body.defaultTtl = n;
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
  panel.append(h('div', { class: 'card' },
    h('h2', {}, 'Time to live'), field('Expiry', ttlMode), secondsField,
    h('h2', {}, 'Indexing policy'), field('Indexing policy (JSON)', policy),
    msg, h('div', { class: 'actions' }, save)));
}

// ---- stored procedures -----------------------------------------------------

const SPROC_TEMPLATE = `function (name) {
  var response = getContext().getResponse();
  response.setBody("Hello, " + name);
}`;

function sprocsTab(ctx, panel) {
  const writable = client.kind === 'master';
  const list = h('ul', { class: 'plain-list', 'aria-label': 'Stored procedures' });
  const error = h('p', { class: 'error', role: 'alert' });
  const detail = h('div', { class: 'detail' });

  async function load(select) {
    try {
      const sprocs = await listAll([...ctx.segs, 'sprocs'], 'StoredProcedures');
      list.replaceChildren(...sprocs.sort(byId).map((s) => h('li', {},
        h('button', { type: 'button', class: 'link', 'aria-current': s.id === select ? 'true' : null, onclick: () => show(s) }, s.id))));
      if (sprocs.length === 0) list.replaceChildren(h('li', { class: 'muted' }, 'None yet.'));
      const chosen = sprocs.find((s) => s.id === select);
      if (chosen) show(chosen);
    } catch (err) {
      error.textContent = describe(err);
    }
  }

  function show(sp) {
    const isNew = !sp;
    const id = h('input', { autocomplete: 'off', value: sp?.id || '', readOnly: !isNew, class: 'mono' });
    const body = h('textarea', { class: 'code', rows: 12, spellcheck: 'false', readOnly: !writable });
    body.value = sp?.body || SPROC_TEMPLATE;
    const msg = h('p', { class: 'editor-msg', role: 'status' });
    const save = h('button', { type: 'button', class: 'primary', hidden: !writable }, isNew ? 'Create' : 'Save');
    save.addEventListener('click', async () => {
      msg.className = 'editor-msg';
      msg.textContent = '';
      try {
        const res = isNew
          ? await client.request('POST', [...ctx.segs, 'sprocs'], { body: { id: id.value.trim(), body: body.value } })
          : await client.request('PUT', [...ctx.segs, 'sprocs', sp.id], { body: { id: sp.id, body: body.value } });
        await load(res.body.id);
        const m = $('.detail .editor-msg', panel);
        m.className = 'editor-msg ok';
        m.textContent = `${isNew ? 'Created' : 'Saved'} · ${formatCharge(res.charge)}`;
      } catch (err) {
        msg.className = 'editor-msg error';
        msg.textContent = describe(err);
      }
    });
    const parts = [h('div', { class: 'card' },
      h('h2', {}, isNew ? 'New stored procedure' : `Stored procedure ${sp.id}`),
      field('Id', id), field('Body (JavaScript)', body), msg, h('div', { class: 'actions' }, save))];
    if (!isNew) {
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
        const pkv = parseLoose(pk.value);
        const headers = { 'x-ms-documentdb-script-enable-logging': 'true' };
        if (pkv !== undefined) headers['x-ms-documentdb-partitionkey'] = partitionKeyHeader([pkv]);
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
      parts.push(form);
    }
    detail.replaceChildren(...parts);
    (isNew ? id : body).focus();
  }

  panel.append(h('div', { class: 'split' },
    h('div', { class: 'list card' },
      h('div', { class: 'toolbar' }, h('h2', {}, 'Procedures'), h('span', { class: 'spacer' }),
        writable ? h('button', { type: 'button', class: 'primary small', onclick: () => show(null) }, 'New') : null),
      error, list),
    detail));
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
