// Browser test of the explorer's Fault rules page: the server's fault rules
// (/_admin/faults) listed with their hits, added through the form, removed
// one by one and all at once; offered to the master key only, as the API
// answers the master key only. Against the server at ORRERY_ENDPOINT
// (explorer_test.go seeds "shop" / "orders"); screenshots at 1280 and 390 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { close, launch, newPage, readOnlyKey, rest, shots, signIn } from './helpers.mjs';

before(launch);
after(close);

/** admin calls /_admin/faults[/id] signed as the API wants: resource type "faults". */
const admin = (method, id, opts = {}) => {
  const segs = id ? ['faults', id] : ['faults'];
  return rest(method, ['_admin', ...segs], { signAs: segs, ...opts });
};

/** probe reads the orders' feed as a client whose user agent the rule names. */
const probe = () => rest('GET', ['dbs', 'shop', 'colls', 'orders', 'docs'], { headers: { 'user-agent': 'explorer-e2e-probe' } });

/** addRule fills the Add rule dialog and submits it. */
async function addRule(page, fields) {
  await page.getByRole('button', { name: 'Add rule' }).click();
  const dlg = page.getByRole('dialog', { name: 'Add a fault rule' });
  await dlg.waitFor();
  await dlg.getByLabel('Does', { exact: true }).selectOption(fields.type);
  for (const [label, value] of Object.entries(fields)) {
    if (label === 'type') continue;
    if (label === 'Reply lost as') await dlg.getByLabel(label, { exact: true }).selectOption(value);
    else await dlg.getByLabel(label, { exact: true }).fill(value);
  }
  return dlg;
}

test('fault rules are listed with their hits, added, and removed', async () => {
  assert.equal((await admin('DELETE')).status, 200);
  const { page, context, errors } = await newPage();
  await signIn(page);
  await page.getByRole('button', { name: 'Fault rules' }).click();
  await page.getByRole('heading', { name: 'Fault rules', level: 1 }).waitFor();
  await page.getByText('No fault rule is installed').waitFor();
  await shots(page, '40-fault-rules-empty');

  // A 429 storm for one client: two requests of its user agent, on the
  // orders' feed, at most.
  const dlg = await addRule(page, {
    type: 'TooManyRequests', 'Rule id': 'probe-429', 'Retry after (ms)': '20', Operations: 'ReadAllItems',
    Container: 'orders', 'User agent contains': 'explorer-e2e-probe', Times: '2',
  });
  assert.ok(await dlg.getByLabel('Reply lost as').isHidden(), 'a 429 loses no reply');
  await shots(page, '41-fault-rule-add');
  await page.locator('#dialog-ok').click();
  await dlg.waitFor({ state: 'hidden' });
  const row = page.locator('tr[data-rule="probe-429"]');
  await row.waitFor();
  assert.match(await row.textContent(), /TooManyRequests, retry after 20 ms/);
  assert.match(await row.textContent(), /ReadAllItems; container orders; user agent contains “explorer-e2e-probe”/);
  assert.match(await row.textContent(), /2 times at most/);
  assert.equal(await row.locator('[data-hits]').textContent(), '0');
  await page.getByRole('status').filter({ hasText: 'Rule probe-429 added.' }).waitFor();

  // The rule faults that client's requests, twice, and the page counts them.
  assert.deepEqual([(await probe()).status, (await probe()).status, (await probe()).status], [429, 429, 200]);
  assert.equal((await rest('GET', ['dbs', 'shop', 'colls', 'orders', 'docs'])).status, 200, 'another client is served');
  await row.locator('[data-hits]', { hasText: /^2$/ }).waitFor();

  // A write whose reply is lost after it commits, for one request in four.
  const lost = await addRule(page, {
    type: 'AppliedThenLost', 'Rule id': 'lost-reply', 'Reply lost as': 'ServiceUnavailable', Operations: 'CreateItem, BatchItem',
    'Share of requests (%)': '25',
  });
  assert.ok(await lost.getByLabel('Retry after (ms)').isHidden());
  await page.locator('#dialog-ok').click();
  await page.locator('tr[data-rule="lost-reply"]', { hasText: 'AppliedThenLost, lost as 503' }).waitFor();
  assert.match(await page.locator('tr[data-rule="lost-reply"]').textContent(), /CreateItem, BatchItem.*25% of matching requests/);
  // Rules are listed in the order they are tried.
  assert.deepEqual(await page.locator('tbody tr').evaluateAll((rs) => rs.map((r) => r.dataset.rule)), ['probe-429', 'lost-reply']);
  await shots(page, '42-fault-rules');

  // A wrong field, and an id in use, are refused in the dialog.
  const bad = await addRule(page, { type: 'Timeout', 'Share of requests (%)': '150' });
  await page.locator('#dialog-ok').click();
  await bad.getByRole('alert').filter({ hasText: 'Share of requests (%) must be a number from 0.01 to 100' }).waitFor();
  await bad.getByLabel('Share of requests (%)', { exact: true }).fill('');
  await bad.getByLabel('Rule id', { exact: true }).fill('probe-429');
  await page.locator('#dialog-ok').click();
  await bad.getByRole('alert').filter({ hasText: /400 BadRequest: .*probe-429.*installed already/ }).waitFor();
  await page.locator('#dialog-cancel').click();
  await bad.waitFor({ state: 'hidden' });

  // Removing one rule, then the rest.
  await page.getByRole('button', { name: 'Remove rule lost-reply' }).click();
  await page.locator('tr[data-rule="lost-reply"]').waitFor({ state: 'detached' });
  await page.getByRole('status').filter({ hasText: 'Rule lost-reply removed.' }).waitFor();
  assert.deepEqual((await admin('GET')).body.rules.map((r) => [r.id, r.hits]), [['probe-429', 2]]);
  await page.getByRole('button', { name: 'Remove all' }).click();
  const confirm = page.getByRole('dialog', { name: 'Remove every fault rule' });
  await confirm.getByText('Remove all 1 fault rules?').waitFor();
  await page.locator('#dialog-ok').click();
  await page.getByText('No fault rule is installed').waitFor();
  assert.deepEqual((await admin('GET')).body.rules, []);
  assert.equal((await probe()).status, 200);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the fault rules are the master key\'s alone', async () => {
  assert.ok(readOnlyKey, 'ORRERY_READONLY_KEY must be set');
  const { page, context, errors } = await newPage();
  await signIn(page, 'Read-only key', readOnlyKey);
  await page.locator('#session-label', { hasText: 'Read-only key' }).waitFor();
  assert.ok(await page.getByRole('button', { name: 'Fault rules' }).isHidden(), 'the page is not offered');
  // The API it would call refuses the read-only key.
  assert.equal((await admin('GET', undefined, { signWith: readOnlyKey })).status, 403);
  assert.deepEqual(errors, []);
  await context.close();
});
