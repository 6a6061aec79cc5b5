// Browser tests of the data explorer: headless Chromium driven through
// Playwright clicks through every feature as a person would, against the
// server at ORRERY_ENDPOINT (started and seeded by explorer_test.go: a
// database "shop" with containers "orders", 30 items, and "private").
// Screenshots go to ORRERY_SCREENSHOTS, each at 1280 and 390 px wide.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { close, key, launch, newPage, openOrders, readOnlyKey, shots, signIn, token } from './helpers.mjs';

before(launch);
after(close);

const itemRows = (page) => page.locator('#panel-items tbody tr');

test('without a credential the page shows nothing and the API refuses', async () => {
  const { page, context, calls, errors } = await newPage();
  await page.getByRole('heading', { name: 'Connect to this server' }).waitFor();
  assert.equal(await page.getByText('orders').count(), 0, 'no data before signing in');
  assert.equal(calls.length, 0, 'the page calls no API before a credential is given');
  // The same API the page uses answers 401 to an unsigned request.
  const res = await page.evaluate(async () => {
    const r = await fetch('/dbs', { headers: { 'x-ms-version': '2020-07-15' } });
    return { status: r.status, body: await r.text() };
  });
  assert.equal(res.status, 401);
  assert.doesNotMatch(res.body, /shop/);
  await shots(page, '01-sign-in');
  assert.deepEqual(errors.filter((e) => !/status of 401/.test(e.message)), []);
  await context.close();
});

test('a wrong key is refused and reveals nothing', async () => {
  const { page, context, calls } = await newPage();
  await signIn(page, 'Master key', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==');
  await page.getByRole('alert').filter({ hasText: 'refused' }).waitFor();
  assert.match(await page.locator('#login-error').textContent(), /401 Unauthorized/);
  assert.ok(await page.locator('#app').isHidden());
  assert.deepEqual(calls.map((c) => c.status), [401]);
  assert.equal(await page.getByText('orders').count(), 0);
  await shots(page, '02-wrong-key');
  // Not base64 at all: refused in the page, nothing sent.
  await signIn(page, 'Master key', 'not a key!');
  await page.locator('#login-error').filter({ hasText: 'base64' }).waitFor();
  assert.equal(calls.length, 1);
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'nothing kept');
  await context.close();
});

test('browse, page, create, edit, delete items', async () => {
  const { page, context, calls, errors } = await newPage();
  await signIn(page);
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'the key is not stored unless asked');
  await openOrders(page);

  // Paging with continuation tokens: 30 items, 10 a page.
  await page.getByLabel('Items per page').selectOption('10');
  await page.getByText('Page 1 · 10 items').waitFor();
  assert.equal(await itemRows(page).count(), 10);
  const firstPage = await itemRows(page).locator('td:first-child').allTextContents();
  await page.getByRole('button', { name: 'Next page' }).click();
  await page.getByText('Page 2 · 10 items').waitFor();
  const secondPage = await itemRows(page).locator('td:first-child').allTextContents();
  assert.equal(new Set([...firstPage, ...secondPage]).size, 20, 'pages do not overlap');
  await page.getByRole('button', { name: 'Next page' }).click();
  await page.getByText('Page 3 · 10 items').waitFor();
  const thirdPage = await itemRows(page).locator('td:first-child').allTextContents();
  assert.equal(new Set([...firstPage, ...secondPage, ...thirdPage]).size, 30, 'three pages hold all 30 items');
  assert.ok(await page.getByRole('button', { name: 'Next page' }).isDisabled(), 'no page after the last');
  await page.getByRole('button', { name: 'Previous page' }).click();
  await page.getByText('Page 2 · 10 items').waitFor();
  assert.deepEqual(await itemRows(page).locator('td:first-child').allTextContents(), secondPage);
  await shots(page, '03-items-paged');

  // Create.
  await page.getByRole('button', { name: 'New item' }).click();
  await page.getByRole('textbox', { name: 'Item JSON' }).fill(JSON.stringify({ id: 'order-new', customer: 'erin', total: 99, status: 'open' }, null, 2));
  await page.getByRole('button', { name: 'Create item' }).click();
  await page.getByText(/^Created · /).waitFor();
  await page.getByRole('region', { name: 'Item order-new' }).waitFor();
  assert.ok(calls.some((c) => c.method === 'POST' && c.path === '/dbs/shop/colls/orders/docs' && c.status === 201));

  // Edit.
  const editor = page.getByRole('textbox', { name: 'Item JSON' });
  const created = JSON.parse(await editor.inputValue());
  assert.equal(created.total, 99);
  assert.ok(created._etag);
  await editor.fill(JSON.stringify({ ...created, total: 120 }, null, 2));
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText(/^Saved · /).waitFor();
  const saved = JSON.parse(await editor.inputValue());
  assert.equal(saved.total, 120);
  assert.notEqual(saved._etag, created._etag);
  await shots(page, '04-item-saved');

  // A concurrent edit: someone else saves the item in another tab first;
  // this tab's save is the 412 it is, and reload brings their version.
  const other = await newPage();
  await signIn(other.page);
  await openOrders(other.page);
  await other.page.getByLabel('Items per page').selectOption('100');
  await other.page.getByRole('button', { name: 'order-new' }).click();
  const otherEditor = other.page.getByRole('textbox', { name: 'Item JSON' });
  const theirs = JSON.parse(await otherEditor.inputValue());
  await otherEditor.fill(JSON.stringify({ ...theirs, status: 'shipped' }, null, 2));
  await other.page.getByRole('button', { name: 'Save changes' }).click();
  await other.page.getByText(/^Saved · /).waitFor();
  await other.context.close();

  await editor.fill(JSON.stringify({ ...saved, total: 130 }, null, 2));
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('412 Precondition Failed').waitFor();
  assert.ok(calls.some((c) => c.method === 'PUT' && c.status === 412));
  await shots(page, '05-item-conflict-412');
  await page.getByRole('button', { name: 'Reload latest version' }).click();
  await page.getByRole('region', { name: 'Item order-new' }).getByText(/ETag/).waitFor();
  await page.waitForFunction(() => document.querySelector('textarea')?.value.includes('shipped'));
  const reloaded = JSON.parse(await editor.inputValue());
  assert.equal(reloaded.status, 'shipped');
  assert.equal(reloaded.total, 120, 'the refused edit was not written');

  // Delete, through the confirmation dialog.
  await page.getByRole('button', { name: 'Delete', exact: true }).click();
  const dialog = page.getByRole('dialog', { name: 'Delete item' });
  await dialog.waitFor();
  await shots(page, '06-delete-confirm');
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await page.getByText(/^Deleted order-new/).waitFor();
  assert.ok(calls.some((c) => c.method === 'DELETE' && c.path === '/dbs/shop/colls/orders/docs/order-new' && c.status === 204));
  await page.getByLabel('Items per page').selectOption('100');
  await page.getByText('Page 1 · 30 items').waitFor();
  assert.equal(await page.getByRole('button', { name: 'order-new' }).count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('an answer to an earlier page request never replaces a later one', async () => {
  const { page, context, errors } = await newPage();
  // The first page's answer (25 a page, asked as the container opens) is
  // held until the page size changed to 100 has been answered and shown.
  let release;
  const held = new Promise((r) => { release = r; });
  const first = (r) => r.url().endsWith('/dbs/shop/colls/orders/docs') && r.method() === 'GET' && r.headers()['x-ms-max-item-count'] === '25';
  await page.route('**/dbs/shop/colls/orders/docs', async (route) => {
    if (first(route.request())) await held;
    await route.continue();
  });
  await signIn(page);
  await openOrders(page);
  await page.getByLabel('Items per page').selectOption('100');
  await page.getByText(/^Page 1 · 30 items/).waitFor();
  const landed = page.waitForResponse((r) => first(r.request()));
  release();
  await (await landed).finished();
  // The page has handled the older answer once its handlers ran: let them.
  await page.waitForTimeout(500);
  assert.equal(await itemRows(page).count(), 30, 'the 100-a-page answer is still shown');
  await page.getByText(/^Page 1 · 30 items/).waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

test('query with parameters shows results and the request charge', async () => {
  const { page, context, errors } = await newPage();
  await signIn(page);
  await openOrders(page);
  // The tabs follow the ARIA tabs pattern: arrow keys move between them.
  await page.getByRole('tab', { name: 'Items' }).focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.getByRole('tab', { name: 'Query' }).getAttribute('aria-selected'), 'true');
  assert.ok(await page.getByRole('tab', { name: 'Query' }).evaluate((el) => el === document.activeElement));
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT c.id, c.customer, c.total FROM c WHERE c.customer = @who AND c.total >= @min ORDER BY c.total DESC');
  await page.getByRole('button', { name: 'Add parameter' }).click();
  await page.getByRole('textbox', { name: 'Parameter name' }).nth(0).fill('@who');
  await page.getByRole('textbox', { name: 'Value (JSON)' }).nth(0).fill('"alice"');
  await page.getByRole('button', { name: 'Add parameter' }).click();
  await page.getByRole('textbox', { name: 'Parameter name' }).nth(1).fill('@min');
  await page.getByRole('textbox', { name: 'Value (JSON)' }).nth(1).fill('150');
  await page.getByRole('button', { name: 'Run query' }).click();
  const results = page.getByRole('table', { name: 'Query results' });
  await results.waitFor();
  // alice holds orders 3, 6, …, 30 (total 10×i); those ≥ 150: 15, 18, …, 30.
  const ids = await results.locator('tbody tr td:first-child').allTextContents();
  assert.deepEqual(ids, ['order-30', 'order-27', 'order-24', 'order-21', 'order-18', 'order-15']);
  assert.deepEqual(await results.locator('th').allTextContents(), ['id', 'customer', 'total']);
  assert.equal(await page.locator('[data-figure=count]').textContent(), '6');
  assert.match(await page.locator('[data-figure=charge]').textContent(), /^\d+(\.\d+)? RU$/);
  // The server's x-ms-documentdb-query-metrics, measured: the page's 6
  // results, and at least as many documents loaded to find them.
  assert.equal(await page.getByText('Query metrics').count(), 1);
  const figure = (label) => page.locator('details.metrics div').filter({ hasText: label }).locator('dd').textContent();
  assert.equal(await figure('Output documents'), '6');
  assert.ok(Number(await figure('Retrieved documents')) >= 6);
  assert.doesNotMatch(await page.locator('#panel-query .stats').textContent(), /null|undefined/);
  await shots(page, '07-query');

  // A scalar query, scoped to one partition, with Ctrl+Enter.
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT VALUE COUNT(1) FROM c');
  await page.getByRole('button', { name: 'Remove parameter' }).first().click();
  await page.getByRole('button', { name: 'Remove parameter' }).first().click();
  await page.getByRole('textbox', { name: 'Partition key value' }).fill('bob');
  await page.getByRole('textbox', { name: 'Query', exact: true }).press('Control+Enter');
  await page.locator('[data-figure=count]').filter({ hasText: '1' }).waitFor();
  await results.locator('th', { hasText: 'Value' }).waitFor();
  assert.equal(await results.locator('tbody td').textContent(), '10');

  // A bad query shows the server's error in its words, and nothing of the
  // run before it: no results, no figures, no metrics, no next page.
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT FROM WHERE');
  await page.getByRole('button', { name: 'Run query' }).click();
  const failure = page.locator('#panel-query p.error[role=alert]');
  await failure.filter({ hasText: /^400 BadRequest: / }).waitFor();
  assert.equal(await results.count(), 0, 'the previous results are gone');
  assert.equal(await page.locator('#panel-query [data-figure]').count(), 0, 'the previous figures are gone');
  assert.equal(await page.getByText('Query metrics').count(), 0);
  assert.ok(await page.getByRole('button', { name: 'Next page' }).isHidden());
  assert.ok(await page.getByRole('group', { name: 'Show results as' }).isHidden());
  await shots(page, '07b-query-failed');
  // The next good run clears the error.
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT VALUE COUNT(1) FROM c');
  await page.getByRole('button', { name: 'Run query' }).click();
  await results.waitFor();
  assert.equal(await failure.textContent(), '');
  assert.deepEqual(errors, []);
  await context.close();
});

test('the change feed shows new changes as they come', async () => {
  const { page, context, errors } = await newPage();
  await signIn(page);
  await openOrders(page);
  await page.getByRole('tab', { name: 'Change feed' }).click();
  await page.getByLabel('Start from').selectOption('now');
  await page.getByRole('button', { name: 'Start watching' }).click();
  await page.getByRole('status').filter({ hasText: 'Watching · 0 changes' }).waitFor();

  // Someone writes in another tab; the change appears here without a click.
  const other = await newPage();
  await signIn(other.page);
  await openOrders(other.page);
  for (const id of ['feed-1', 'feed-2']) {
    await other.page.getByRole('button', { name: 'New item' }).click();
    await other.page.getByRole('textbox', { name: 'Item JSON' }).fill(JSON.stringify({ id, customer: 'frank', total: 5 }));
    await other.page.getByRole('button', { name: 'Create item' }).click();
    await other.page.getByText(/^Created · /).waitFor();
  }
  await other.context.close();

  const feed = page.getByRole('list', { name: 'Changes, newest first' });
  await feed.getByText('feed-2').waitFor();
  await page.getByRole('status').filter({ hasText: 'Watching · 2 changes' }).waitFor();
  assert.deepEqual(await feed.locator('.id').allTextContents(), ['feed-2', 'feed-1'], 'newest first, nothing from before "now"');
  await shots(page, '08-change-feed');
  // A row opens: the item as the feed gave it.
  await feed.getByRole('button', { name: /feed-1/ }).click();
  const change = page.getByRole('dialog', { name: 'Change · feed-1' });
  await change.waitFor();
  const shown = JSON.parse(await change.locator('[data-change]').textContent());
  assert.equal(shown.id, 'feed-1');
  assert.equal(shown.customer, 'frank');
  assert.ok(shown._lsn > 0 && shown._etag);
  await shots(page, '08b-change-opened');
  await change.getByRole('button', { name: 'Close' }).click();
  await change.waitFor({ state: 'hidden' });
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByRole('status').filter({ hasText: 'Paused' }).waitFor();

  // From the beginning: every item's latest version, the seeded ones first.
  // Reopening the container starts its views afresh.
  await page.getByRole('button', { name: 'orders', exact: true }).click();
  await page.getByRole('tab', { name: 'Items', selected: true }).waitFor();
  await page.getByRole('tab', { name: 'Change feed' }).click();
  assert.equal(await feed.locator('.id').count(), 0);
  await page.getByLabel('Start from').selectOption('beginning');
  await page.getByRole('button', { name: 'Start watching' }).click();
  await page.getByRole('status').filter({ hasText: /Watching · \d+ changes/ }).waitFor();
  const ids = await feed.locator('.id').allTextContents();
  assert.ok(ids.length >= 32, `all items from the beginning, got ${ids.length}`);
  assert.equal(ids.at(-1), 'order-01', 'the oldest change last');
  assert.equal(ids[0], 'feed-2', 'the newest change first');
  assert.deepEqual(errors, []);
  await context.close();
});

test('indexing policy and TTL are viewed and replaced', async () => {
  const { page, context, calls, errors } = await newPage();
  await signIn(page);
  await openOrders(page);
  await page.getByRole('tab', { name: 'Settings' }).click();
  const policy = page.getByRole('textbox', { name: 'Indexing policy (JSON)' });
  const current = JSON.parse(await policy.inputValue());
  assert.equal(current.indexingMode, 'consistent');
  assert.equal(await page.getByLabel('Expiry').inputValue(), 'off');
  await page.getByLabel('Expiry').selectOption('seconds');
  await page.getByLabel('Default time to live (seconds)').fill('86400');
  const next = { ...current, excludedPaths: [...(current.excludedPaths || []).filter((p) => p.path !== '/notes/*'), { path: '/notes/*' }] };
  await policy.fill(JSON.stringify(next, null, 2));
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText(/^Saved · /).waitFor();
  assert.ok(calls.some((c) => c.method === 'PUT' && c.path === '/dbs/shop/colls/orders' && c.status === 200));
  await shots(page, '09-settings');

  // A fresh page reads back what was saved.
  await page.reload();
  await signIn(page);
  await openOrders(page);
  await page.getByRole('tab', { name: 'Settings' }).click();
  assert.equal(await page.getByLabel('Expiry').inputValue(), 'seconds');
  assert.equal(await page.getByLabel('Default time to live (seconds)').inputValue(), '86400');
  const after = JSON.parse(await page.getByRole('textbox', { name: 'Indexing policy (JSON)' }).inputValue());
  assert.ok(after.excludedPaths.some((p) => p.path === '/notes/*'));

  // Back to no expiry.
  await page.getByLabel('Expiry').selectOption('off');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText(/^Saved · /).waitFor();
  assert.ok(await page.getByLabel('Default time to live (seconds)').isHidden());
  assert.deepEqual(errors, []);
  await context.close();
});

test('stored procedures are created, edited and run with arguments', async () => {
  const { page, context, errors } = await newPage();
  await signIn(page);
  await openOrders(page);
  await page.getByRole('tab', { name: 'Stored procedures' }).click();
  await page.getByText('No stored procedures yet.').waitFor();
  await page.getByRole('button', { name: 'New stored procedure' }).click();
  await page.getByRole('textbox', { name: 'Id', exact: true }).fill('countFor');
  await page.getByRole('textbox', { name: 'Body (JavaScript)' }).fill(`function (prefix) {
  var ctx = getContext();
  console.log('counting for ' + prefix);
  var accepted = ctx.getCollection().queryDocuments(ctx.getCollection().getSelfLink(),
    'SELECT VALUE COUNT(1) FROM c', {}, function (err, docs) {
      if (err) throw err;
      ctx.getResponse().setBody(prefix + docs[0]);
    });
  if (!accepted) throw new Error('not accepted');
}`);
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByText(/^Created · /).waitFor();
  await page.getByRole('heading', { name: 'Stored procedure countFor' }).waitFor();

  await page.getByRole('textbox', { name: 'Partition key value' }).fill('carol');
  await page.getByRole('textbox', { name: 'Arguments (JSON array)' }).fill('["carol has "]');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.locator('[data-result]').waitFor();
  assert.equal(await page.locator('[data-result]').textContent(), '"carol has 10"');
  await page.getByText(/^\d+(\.\d+)? RU$/).first().waitFor();
  await page.getByRole('heading', { name: 'Log' }).waitFor();
  assert.match(await page.locator('.run-out pre').last().textContent(), /counting for carol has/);
  assert.doesNotMatch(await page.locator('.run-out').textContent(), /null/);
  await shots(page, '10-sproc-run');

  // Edit and run again: the new body answers.
  const body = page.getByRole('textbox', { name: 'Body (JavaScript)' });
  await body.fill((await body.inputValue()).replace("prefix + docs[0]", "prefix + (docs[0] * 2)"));
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByText(/^Saved · /).waitFor();
  await page.getByRole('textbox', { name: 'Partition key value' }).fill('"carol"');
  await page.getByRole('textbox', { name: 'Arguments (JSON array)' }).fill('["twice: "]');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.locator('[data-result]', { hasText: 'twice: 20' }).waitFor();

  // A script error is shown as the server's error.
  await page.getByRole('textbox', { name: 'Arguments (JSON array)' }).fill('not json');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.getByRole('alert').filter({ hasText: 'not valid JSON' }).waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

test('the read-only key browses and queries, and offers no writes', async () => {
  assert.ok(readOnlyKey, 'ORRERY_READONLY_KEY must be set');
  const { page, context, calls, errors } = await newPage();
  await signIn(page, 'Read-only key', readOnlyKey);
  await page.locator('#session-label', { hasText: 'Read-only key' }).waitFor();
  assert.ok(await page.getByRole('button', { name: 'New database' }).isHidden());
  await openOrders(page);
  await page.getByRole('button', { name: 'order-01' }).click();
  const editor = page.getByRole('textbox', { name: 'Item JSON' });
  assert.equal(JSON.parse(await editor.inputValue()).id, 'order-01');
  assert.ok(!(await editor.isEditable()), 'the item is shown read-only');
  assert.equal(await page.getByRole('button', { name: 'New item' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'Save changes' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: /^Delete/ }).count(), 0);
  await page.getByRole('tab', { name: 'Query' }).click();
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT VALUE c.id FROM c WHERE c.total = 100');
  await page.getByRole('button', { name: 'Run query' }).click();
  await page.getByRole('table', { name: 'Query results' }).getByText('order-10').waitFor();
  await page.getByRole('tab', { name: 'Settings' }).click();
  assert.equal(await page.getByRole('button', { name: 'Save settings' }).count(), 0);
  await shots(page, '12-read-only');
  assert.ok(calls.every((c) => c.method === 'GET' || (c.method === 'POST' && c.path.endsWith('/docs'))), 'only reads and queries were sent');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a resource token reaches its container only, read-only', async () => {
  assert.ok(token, 'ORRERY_TOKEN must be set');
  const { page, context, calls } = await newPage();
  await page.getByRole('radio', { name: 'Resource token' }).check();
  await page.locator('#secret').fill(token);
  await page.getByRole('textbox', { name: 'Database', exact: true }).fill('shop');
  await page.getByRole('textbox', { name: 'Container', exact: true }).fill('private');
  await page.getByLabel('Stay signed in for this browser tab').check();
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.getByRole('heading', { name: 'shop / private' }).waitFor();
  await page.getByRole('button', { name: 'note-1' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'New item' }).count(), 1, 'a token may be able to write: the server decides');
  assert.equal(await page.getByText('orders').count(), 0, 'other containers are not listed');
  await shots(page, '11-resource-token');

  // The server refuses the write this Read permission does not allow.
  await page.getByRole('button', { name: 'note-1' }).click();
  const editor = page.getByRole('textbox', { name: 'Item JSON' });
  const note = JSON.parse(await editor.inputValue());
  await editor.fill(JSON.stringify({ ...note, text: 'changed' }));
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('.editor-msg.error').filter({ hasText: '403' }).waitFor();
  assert.ok(calls.some((c) => c.method === 'PUT' && c.status === 403));

  // Kept for the tab when asked, and forgotten on sign-out.
  await page.reload();
  await page.getByRole('heading', { name: 'shop / private' }).waitFor();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Connect to this server' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  await context.close();
});
