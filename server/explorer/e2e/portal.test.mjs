// Browser tests of what the explorer does as the service's portal Data
// Explorer does: results as a table, as JSON and downloaded; databases and
// containers made with every option and deleted after confirmation;
// triggers and user-defined functions managed; the change feed's all
// versions and deletes mode; the connection string; and a tab bar that fits
// a phone. Each writes only to databases and containers it makes itself,
// and checks what the page did through the REST API.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import {
  NARROW, close, endpoint, explorer, key, launch, newPage, openContainer, openOrders, pk, readOnlyKey, rest, shots, signIn,
} from './helpers.mjs';

before(launch);
after(close);

/** runQuery runs a query on the open container's Query tab and waits for its figures. */
async function runQuery(page, sql) {
  await page.getByRole('tab', { name: 'Query' }).click();
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill(sql);
  await page.getByRole('button', { name: 'Run query' }).click();
}

/** mustCreate makes a resource through the REST API, failing the test on any other answer. */
async function mustCreate(segs, body, headers) {
  const res = await rest('POST', segs, { body, headers });
  assert.equal(res.status, 201, `POST /${segs.join('/')}: ${JSON.stringify(res.body)}`);
  return res.body;
}

test('query results show as a table and as JSON, and download as JSON and CSV', async () => {
  const { page, context, errors } = await newPage();
  await signIn(page);
  await openOrders(page);
  // bob holds orders 1, 4, …, 28; the object column holds a comma and quotes.
  await runQuery(page, 'SELECT c.id, c.total, {"note": "a, \\"b\\""} AS extra FROM c WHERE c.customer = "bob" ORDER BY c.total');
  const table = page.getByRole('table', { name: 'Query results' });
  await table.waitFor();
  assert.deepEqual(await table.locator('th').allTextContents(), ['id', 'total', 'extra']);
  assert.equal(await table.locator('tbody tr').count(), 10);
  assert.equal(await page.getByRole('button', { name: 'Table', exact: true }).getAttribute('aria-pressed'), 'true');

  await page.getByRole('button', { name: 'JSON', exact: true }).click();
  const json = page.locator('[data-json]');
  await json.waitFor();
  assert.equal(await table.count(), 0, 'one view at a time');
  const shown = JSON.parse(await json.textContent());
  assert.equal(shown.length, 10);
  assert.deepEqual(shown[0], { id: 'order-01', total: 10, extra: { note: 'a, "b"' } });
  assert.deepEqual(shown.map((d) => d.total), [10, 40, 70, 100, 130, 160, 190, 220, 250, 280]);
  await shots(page, '13-query-json');

  // Downloads: the file is what the page shows, whole.
  const [jsonFile] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download JSON' }).click()]);
  assert.equal(jsonFile.suggestedFilename(), 'orders-query-results.json');
  assert.deepEqual(JSON.parse(await readFile(await jsonFile.path(), 'utf8')), shown);
  const [csvFile] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
  assert.equal(csvFile.suggestedFilename(), 'orders-query-results.csv');
  const csv = await readFile(await csvFile.path(), 'utf8');
  const lines = csv.split('\r\n');
  assert.equal(lines[0], 'id,total,extra');
  assert.equal(lines[1], 'order-01,10,"{""note"":""a, \\""b\\""""}"');
  assert.equal(lines.length, 12, 'a header, 10 rows and the final line end');
  assert.equal(lines[11], '');

  // Back to the table; a new run keeps the chosen view.
  await page.getByRole('button', { name: 'Table', exact: true }).click();
  await table.waitFor();
  await shots(page, '13b-query-table');
  assert.deepEqual(errors, []);
  await context.close();
});

test('databases and containers are made with every option the portal offers, and deleted after typing their id', async () => {
  const { page, context, calls, errors } = await newPage();
  await signIn(page);
  await page.getByRole('heading', { name: 'Choose a container' }).waitFor();

  // A database with shared autoscale throughput.
  await page.getByRole('button', { name: 'New database' }).click();
  let dialog = page.getByRole('dialog', { name: 'New database' });
  await dialog.getByRole('textbox', { name: 'Database id' }).fill('lab');
  await dialog.getByRole('radio', { name: 'Autoscale' }).check();
  await dialog.getByRole('spinbutton', { name: 'Maximum RU/s' }).fill('2000');
  await shots(page, '14-new-database');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await dialog.waitFor({ state: 'hidden' });
  const lab = await rest('GET', ['dbs', 'lab']);
  assert.equal(lab.status, 200);
  const labOffer = (await rest('GET', ['offers'])).body.Offers.find((o) => o.offerResourceId === lab.body._rid);
  assert.equal(labOffer.content.offerAutopilotSettings.maxThroughput, 2000);

  // A container with a three-level key, its own manual throughput, a unique
  // key, a default TTL, a change feed retention and its own indexing policy.
  await page.getByRole('button', { name: 'New container in lab' }).click();
  dialog = page.getByRole('dialog', { name: 'New container in lab' });
  await dialog.getByRole('textbox', { name: 'Container id' }).fill('tenants');
  await dialog.getByRole('textbox', { name: 'Partition key', exact: true }).fill('/tenantId');
  await dialog.getByRole('button', { name: 'Add hierarchical partition key' }).click();
  await dialog.getByRole('textbox', { name: 'Second partition key level' }).fill('/userId');
  await dialog.getByRole('button', { name: 'Add hierarchical partition key' }).click();
  await dialog.getByRole('textbox', { name: 'Third partition key level' }).fill('/sessionId');
  assert.ok(await dialog.getByRole('button', { name: 'Add hierarchical partition key' }).isHidden(), 'three levels at most');
  await dialog.getByRole('button', { name: 'Remove level' }).last().click();
  assert.equal(await dialog.getByRole('textbox', { name: 'Third partition key level' }).count(), 0);
  assert.ok(await dialog.getByRole('radio', { name: /^Shared with lab \(Autoscale, up to 2000 RU\/s\)/ }).isChecked(), 'a container shares its database\'s throughput unless told otherwise');
  await dialog.getByRole('radio', { name: 'Manual' }).check();
  await dialog.getByRole('spinbutton', { name: 'RU/s', exact: true }).fill('450');
  await dialog.getByRole('button', { name: 'Add unique key' }).click();
  await dialog.getByRole('textbox', { name: 'Unique key 1' }).fill('/email');
  await dialog.getByRole('button', { name: 'Add unique key' }).click();
  await dialog.getByRole('textbox', { name: 'Unique key 2' }).fill('/firstName, /lastName');
  await dialog.getByLabel('Expiry').selectOption('seconds');
  await dialog.getByLabel('Default time to live (seconds)').fill('86400');
  await dialog.getByRole('spinbutton', { name: 'Keep all versions and deletes for (minutes)' }).fill('60');
  const policy = dialog.getByRole('textbox', { name: 'Indexing policy (JSON)' });
  const defaults = JSON.parse(await policy.inputValue());
  assert.equal(defaults.indexingMode, 'consistent');
  await policy.fill(JSON.stringify({ ...defaults, excludedPaths: [...defaults.excludedPaths, { path: '/blob/*' }] }, null, 2));
  await dialog.evaluate((d) => { d.scrollTop = 0; });
  await shots(page, '15-new-container');

  // 450 RU/s is not a step of 100: the service's own words, and the dialog stays.
  await dialog.getByRole('button', { name: 'Create' }).click();
  await dialog.getByRole('alert').filter({ hasText: '400 BadRequest: The offer should have valid throughput values between 400 and 1000000 inclusive in increments of 100.' }).waitFor();
  assert.equal((await rest('GET', ['dbs', 'lab', 'colls', 'tenants'])).status, 404, 'nothing was made');
  await shots(page, '15b-new-container-refused');
  await dialog.getByRole('spinbutton', { name: 'RU/s', exact: true }).fill('500');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await page.getByRole('heading', { name: 'lab / tenants' }).waitFor();
  assert.ok(calls.some((c) => c.method === 'POST' && c.path === '/dbs/lab/colls' && c.status === 201));

  const made = (await rest('GET', ['dbs', 'lab', 'colls', 'tenants'])).body;
  assert.deepEqual(made.partitionKey, { paths: ['/tenantId', '/userId'], kind: 'MultiHash', version: 2 });
  assert.deepEqual(made.uniqueKeyPolicy.uniqueKeys, [{ paths: ['/email'] }, { paths: ['/firstName', '/lastName'] }]);
  assert.equal(made.defaultTtl, 86400);
  assert.equal(made.changeFeedPolicy.retentionDuration, 60);
  assert.ok(made.indexingPolicy.excludedPaths.some((p) => p.path === '/blob/*'));
  const offer = (await rest('GET', ['offers'])).body.Offers.find((o) => o.offerResourceId === made._rid);
  assert.equal(offer.content.offerThroughput, 500);
  assert.equal(offer.content.offerAutopilotSettings, undefined);

  // The settings tab reads it all back.
  await page.getByRole('tab', { name: 'Settings' }).click();
  await page.locator('[data-throughput]').filter({ hasText: 'Manual, 500 RU/s.' }).waitFor();
  await page.getByText('/tenantId, /userId (MultiHash, version 2)').waitFor();
  await page.getByText('/email; /firstName + /lastName').waitFor();
  assert.equal(await page.getByRole('spinbutton', { name: 'Keep all versions and deletes for (minutes)' }).inputValue(), '60');
  // Scale: replace the offer, checked through the API.
  await page.getByRole('spinbutton', { name: 'RU/s', exact: true }).fill('700');
  await page.getByRole('button', { name: 'Save throughput' }).click();
  await page.locator('[data-throughput]').filter({ hasText: 'Manual, 700 RU/s.' }).waitFor();
  assert.equal((await rest('GET', ['offers', offer._rid])).body.content.offerThroughput, 700);
  await shots(page, '16-settings-scale');

  // Items in a hierarchical container, and the unique key refusing a twin.
  await page.getByRole('tab', { name: 'Items' }).click();
  for (const [i, email] of [[1, 'ann@example.org'], [2, 'ann@example.org']]) {
    await page.getByRole('button', { name: 'New item' }).click();
    const editor = page.getByRole('textbox', { name: 'Item JSON' });
    const template = JSON.parse(await editor.inputValue());
    assert.deepEqual(template, { id: '', tenantId: '', userId: '' }, 'the new item names every level of the key');
    await editor.fill(JSON.stringify({ id: `u-${i}`, tenantId: 'contoso', userId: 'ann', email }));
    await page.getByRole('button', { name: 'Create item' }).click();
    if (i === 1) await page.getByText(/^Created · /).waitFor();
  }
  await page.locator('.editor-msg.error').filter({ hasText: /^409 Conflict: / }).waitFor();
  assert.equal((await rest('GET', ['dbs', 'lab', 'colls', 'tenants', 'docs', 'u-1'], { headers: pk('contoso', 'ann') })).status, 200);
  assert.equal((await rest('GET', ['dbs', 'lab', 'colls', 'tenants', 'docs', 'u-2'], { headers: pk('contoso', 'ann') })).status, 404);
  // A query scoped by a prefix of the key.
  await page.getByRole('tab', { name: 'Query' }).click();
  await page.getByRole('textbox', { name: 'Partition key value' }).fill('["contoso"]');
  await page.getByRole('textbox', { name: 'Query', exact: true }).fill('SELECT VALUE c.id FROM c');
  await page.getByRole('button', { name: 'Run query' }).click();
  await page.getByRole('table', { name: 'Query results' }).getByText('u-1').waitFor();

  // Deleting the container asks for its id, typed.
  await page.getByRole('button', { name: 'Delete container' }).click();
  dialog = page.getByRole('dialog', { name: 'Delete container' });
  const confirm = dialog.getByRole('button', { name: 'Delete container' });
  assert.ok(await confirm.isDisabled(), 'nothing is deleted before the id is typed');
  await dialog.getByRole('textbox', { name: 'Type the container id to confirm' }).fill('tenant');
  assert.ok(await confirm.isDisabled(), 'a near miss does not delete');
  await dialog.getByRole('textbox', { name: 'Type the container id to confirm' }).fill('tenants');
  await shots(page, '17-delete-container');
  await confirm.click();
  await page.getByRole('status').filter({ hasText: 'Deleted container lab / tenants.' }).waitFor();
  await page.getByRole('heading', { name: 'Choose a container' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'tenants', exact: true }).count(), 0);
  assert.equal((await rest('GET', ['dbs', 'lab', 'colls', 'tenants'])).status, 404);

  // And the database, with what is left in it.
  await mustCreate(['dbs', 'lab', 'colls'], { id: 'leftover', partitionKey: { paths: ['/pk'], kind: 'Hash', version: 2 } });
  await page.getByRole('button', { name: 'lab', exact: true }).click();
  await page.getByRole('button', { name: 'lab', exact: true }).click();
  await page.getByRole('button', { name: 'leftover', exact: true }).waitFor();
  await page.getByRole('button', { name: 'Delete database lab' }).click();
  dialog = page.getByRole('dialog', { name: 'Delete database' });
  await dialog.getByText('Its containers and all their items are deleted with it.').waitFor();
  await dialog.getByRole('textbox', { name: 'Type the database id to confirm' }).fill('lab');
  await shots(page, '18-delete-database');
  await dialog.getByRole('button', { name: 'Delete database' }).click();
  await page.getByRole('status').filter({ hasText: 'Deleted database lab.' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'lab', exact: true }).count(), 0);
  assert.equal((await rest('GET', ['dbs', 'lab'])).status, 404);
  assert.equal((await rest('GET', ['dbs', 'lab', 'colls', 'leftover'])).status, 404);
  assert.ok(calls.some((c) => c.method === 'DELETE' && c.path === '/dbs/lab' && c.status === 204));

  // Deleting what someone else already deleted is the service's 404, in its words.
  await mustCreate(['dbs'], { id: 'gone' });
  await page.reload();
  await signIn(page);
  await page.getByRole('button', { name: 'gone', exact: true }).click();
  await page.getByRole('button', { name: 'Delete database gone' }).waitFor();
  assert.equal((await rest('DELETE', ['dbs', 'gone'])).status, 204);
  await page.getByRole('button', { name: 'Delete database gone' }).click();
  dialog = page.getByRole('dialog', { name: 'Delete database' });
  await dialog.getByRole('textbox', { name: 'Type the database id to confirm' }).fill('gone');
  await dialog.getByRole('button', { name: 'Delete database' }).click();
  await dialog.getByRole('alert').filter({ hasText: /^404 NotFound: / }).waitFor();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert.deepEqual(errors, []);
  await context.close();
});

test('triggers and user-defined functions are created, edited, used and deleted; so are stored procedures', async () => {
  await mustCreate(['dbs'], { id: 'scripts' });
  await mustCreate(['dbs', 'scripts', 'colls'], { id: 'bench', partitionKey: { paths: ['/pk'], kind: 'Hash', version: 2 } });
  for (const [id, n] of [['a', 10], ['b', 25]]) await mustCreate(['dbs', 'scripts', 'colls', 'bench', 'docs'], { id, pk: 'p', amount: n }, pk('p'));
  const bench = ['dbs', 'scripts', 'colls', 'bench'];
  const { page, context, errors } = await newPage();
  await signIn(page);
  await openContainer(page, 'scripts', 'bench');

  // A pre-trigger on creates.
  await page.getByRole('tab', { name: 'Triggers' }).click();
  await page.getByText('No triggers yet.').waitFor();
  await page.getByRole('button', { name: 'New trigger' }).click();
  await page.getByRole('textbox', { name: 'Id', exact: true }).fill('stamp');
  await page.getByLabel('Trigger type').selectOption('Pre');
  await page.getByLabel('Trigger operation').selectOption('Create');
  await page.getByRole('textbox', { name: 'Body (JavaScript)' }).fill(`function () {
  var request = getContext().getRequest();
  var item = request.getBody();
  item.stampedBy = 'explorer';
  request.setBody(item);
}`);
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByText(/^Created · /).waitFor();
  await page.getByRole('heading', { name: 'Trigger stamp' }).waitFor();
  await page.getByText('Pre · Create').waitFor();
  await shots(page, '19-trigger');
  // A write that names it runs it.
  const writeWith = async (id) => rest('POST', [...bench, 'docs'], {
    body: { id, pk: 'p', amount: 1 }, headers: { ...pk('p'), 'x-ms-documentdb-pre-trigger-include': 'stamp' },
  });
  let res = await writeWith('t-1');
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.equal(res.body.stampedBy, 'explorer');

  // Edited: the next write runs the new body.
  const body = page.getByRole('textbox', { name: 'Body (JavaScript)' });
  await body.fill((await body.inputValue()).replace("'explorer'", "'explorer, edited'"));
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByText(/^Saved · /).waitFor();
  res = await writeWith('t-2');
  assert.equal(res.body.stampedBy, 'explorer, edited');

  // A trigger whose body does not compile is kept as sent, as the service
  // keeps it; a write that names it is refused in the service's words.
  await page.getByRole('button', { name: 'New trigger' }).click();
  await page.getByRole('textbox', { name: 'Id', exact: true }).fill('broken');
  await page.getByRole('textbox', { name: 'Body (JavaScript)' }).fill('function ( {');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByRole('heading', { name: 'Trigger broken' }).waitFor();
  assert.equal((await rest('GET', [...bench, 'triggers', 'broken'])).body.body, 'function ( {');
  res = await rest('POST', [...bench, 'docs'], {
    body: { id: 't-broken', pk: 'p', amount: 1 }, headers: { ...pk('p'), 'x-ms-documentdb-pre-trigger-include': 'broken' },
  });
  assert.equal(res.status, 400, JSON.stringify(res.body));
  await page.getByRole('button', { name: 'Delete trigger' }).click();
  const brokenDialog = page.getByRole('dialog', { name: 'Delete trigger' });
  await brokenDialog.getByRole('button', { name: 'Delete' }).click();
  await page.getByText('Deleted trigger broken.').waitFor();
  assert.equal((await rest('GET', [...bench, 'triggers', 'broken'])).status, 404);

  // Deleted after confirmation: writes naming it are refused from then on.
  await page.getByRole('button', { name: 'stamp', exact: true }).click();
  await page.getByRole('button', { name: 'Delete trigger' }).click();
  let dialog = page.getByRole('dialog', { name: 'Delete trigger' });
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await page.getByText('Deleted trigger stamp.').waitFor();
  await page.getByText('No triggers yet.').waitFor();
  assert.equal((await rest('GET', [...bench, 'triggers', 'stamp'])).status, 404);
  assert.notEqual((await writeWith('t-3')).status, 201);

  // A user-defined function, called from the Query tab.
  await page.getByRole('tab', { name: 'User-defined functions' }).click();
  await page.getByRole('button', { name: 'New user-defined function' }).click();
  await page.getByRole('textbox', { name: 'Id', exact: true }).fill('withTax');
  await page.getByRole('textbox', { name: 'Body (JavaScript)' }).fill('function (amount) { return amount * 2; }');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  await page.getByRole('heading', { name: 'User-defined function withTax' }).waitFor();
  await page.getByText('SELECT VALUE udf.withTax(c.total) FROM c').waitFor();
  await shots(page, '20-udf');
  await runQuery(page, 'SELECT VALUE udf.withTax(c.amount) FROM c WHERE c.id = "b"');
  const results = page.getByRole('table', { name: 'Query results' });
  await results.locator('td', { hasText: '50' }).waitFor();

  await page.getByRole('tab', { name: 'User-defined functions' }).click();
  const udfBody = page.locator('#panel-udfs').getByRole('textbox', { name: 'Body (JavaScript)' });
  await udfBody.fill('function (amount) { return amount * 3; }');
  await page.locator('#panel-udfs').getByRole('button', { name: 'Save', exact: true }).click();
  await page.locator('#panel-udfs').getByText(/^Saved · /).waitFor();
  await runQuery(page, 'SELECT VALUE udf.withTax(c.amount) FROM c WHERE c.id = "b"');
  await results.locator('td', { hasText: '75' }).waitFor();

  await page.getByRole('tab', { name: 'User-defined functions' }).click();
  await page.getByRole('button', { name: 'Delete user-defined function' }).click();
  dialog = page.getByRole('dialog', { name: 'Delete user-defined function' });
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await page.getByText('No user-defined functions yet.').waitFor();
  await runQuery(page, 'SELECT VALUE udf.withTax(c.amount) FROM c WHERE c.id = "b"');
  await page.locator('#panel-query p.error').filter({ hasText: /^400 BadRequest: / }).waitFor();
  assert.equal(await results.count(), 0);

  // Stored procedures are deleted the same way.
  await mustCreate([...bench, 'sprocs'], { id: 'hello', body: 'function () { getContext().getResponse().setBody(1); }' });
  await page.getByRole('tab', { name: 'Stored procedures' }).click();
  await page.getByRole('button', { name: 'hello', exact: true }).click();
  await page.getByRole('button', { name: 'Delete stored procedure' }).click();
  dialog = page.getByRole('dialog', { name: 'Delete stored procedure' });
  await shots(page, '21-delete-sproc');
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await page.getByText('No stored procedures yet.').waitFor();
  assert.equal((await rest('GET', [...bench, 'sprocs', 'hello'])).status, 404);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the change feed in all versions and deletes mode shows creates, replaces and deletes, and each opens', async () => {
  await mustCreate(['dbs', 'shop', 'colls'], {
    id: 'events', partitionKey: { paths: ['/customer'], kind: 'Hash', version: 2 }, changeFeedPolicy: { retentionDuration: 10 },
  });
  const events = ['dbs', 'shop', 'colls', 'events'];
  const { page, context, errors } = await newPage();
  await signIn(page);

  // On a container that keeps no versions the service says why, once.
  await openOrders(page);
  await page.getByRole('tab', { name: 'Change feed' }).click();
  await page.getByLabel('Mode').selectOption('all');
  await page.getByText('This container keeps none').waitFor();
  await page.getByRole('button', { name: 'Start watching' }).click();
  await page.locator('#panel-feed p.error').filter({ hasText: /^400 BadRequest: The all versions and deletes change feed mode requires/ }).waitFor();
  await page.getByRole('status').filter({ hasText: 'Paused' }).waitFor();

  await openContainer(page, 'shop', 'events');
  await page.getByRole('tab', { name: 'Change feed' }).click();
  await page.getByLabel('Mode').selectOption('all');
  await page.getByText('This container keeps them for 10 minutes.').waitFor();
  await page.getByLabel('Start from').selectOption('now');
  await page.getByRole('button', { name: 'Start watching' }).click();
  await page.getByRole('status').filter({ hasText: 'Watching · 0 changes' }).waitFor();

  await mustCreate([...events, 'docs'], { id: 'e-1', customer: 'gina', state: 'new' }, pk('gina'));
  const replaced = await rest('PUT', [...events, 'docs', 'e-1'], { body: { id: 'e-1', customer: 'gina', state: 'paid' }, headers: pk('gina') });
  assert.equal(replaced.status, 200);
  assert.equal((await rest('DELETE', [...events, 'docs', 'e-1'], { headers: pk('gina') })).status, 204);

  const feed = page.getByRole('list', { name: 'Changes, newest first' });
  await page.getByRole('status').filter({ hasText: 'Watching · 3 changes' }).waitFor();
  assert.deepEqual(await feed.locator('.op').allTextContents(), ['Delete', 'Replace', 'Create']);
  assert.deepEqual(await feed.locator('.id').allTextContents(), ['e-1', 'e-1', 'e-1']);
  await shots(page, '22-change-feed-all-versions');

  // Each row opens: the delete names the item and its previous version.
  await feed.getByRole('button', { name: /^Delete e-1/ }).click();
  let dialog = page.getByRole('dialog', { name: 'Delete · e-1' });
  const del = JSON.parse(await dialog.locator('[data-change]').textContent());
  assert.equal(del.metadata.operationType, 'delete');
  assert.deepEqual(del.current, {});
  assert.equal(del.previous.state, 'paid');
  assert.equal(del.metadata.timeToLiveExpired, false);
  await dialog.getByText('gina', { exact: true }).waitFor();
  await shots(page, '23-change-opened');
  await dialog.getByRole('button', { name: 'Close' }).click();
  await dialog.waitFor({ state: 'hidden' });
  await feed.getByRole('button', { name: /^Replace e-1/ }).click();
  dialog = page.getByRole('dialog', { name: 'Replace · e-1' });
  const rep = JSON.parse(await dialog.locator('[data-change]').textContent());
  assert.equal(rep.metadata.operationType, 'replace');
  assert.equal(rep.current.state, 'paid');
  assert.ok(rep.metadata.previousImageLSN > 0);
  await dialog.getByRole('button', { name: 'Close' }).click();

  // Pausing, clearing and switching to the latest-version mode starts over:
  // the deleted item is not there, as that mode does not report deletes.
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByRole('button', { name: 'Clear list' }).click();
  await page.getByLabel('Mode').selectOption('latest');
  await page.getByLabel('Start from').selectOption('beginning');
  await mustCreate([...events, 'docs'], { id: 'e-2', customer: 'gina' }, pk('gina'));
  await page.getByRole('button', { name: 'Start watching' }).click();
  await page.getByRole('status').filter({ hasText: 'Watching · 1 change' }).waitFor();
  assert.deepEqual(await feed.locator('.id').allTextContents(), ['e-2']);
  assert.equal(await feed.locator('.op').count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the connection string is shown, hidden until asked for, copies, and connects', async () => {
  const { page, context, errors } = await newPage();
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(explorer).origin });
  await signIn(page);
  await page.getByRole('heading', { name: 'Connect an application' }).waitFor();
  const origin = new URL(explorer).origin;
  assert.equal(await page.getByRole('textbox', { name: 'Endpoint' }).inputValue(), `${origin}/`);
  const conn = page.getByLabel('Primary connection string');
  assert.equal(await conn.getAttribute('type'), 'password', 'hidden until asked for');
  await shots(page, '24-connection');
  await page.getByRole('button', { name: 'Show keys' }).click();
  assert.equal(await conn.getAttribute('type'), 'text');
  const cs = await conn.inputValue();
  assert.equal(cs, `AccountEndpoint=${origin}/;AccountKey=${key};`);
  await page.getByRole('button', { name: 'Copy connection string' }).click();
  await page.getByRole('status').filter({ hasText: 'Connection string copied.' }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), cs);

  // The string works: its endpoint and key, parsed as an SDK parses them,
  // sign a request the server accepts.
  const parts = Object.fromEntries(cs.split(';').filter(Boolean).map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
  const dbs = await rest('GET', ['dbs'], { signWith: parts.AccountKey, base: parts.AccountEndpoint });
  assert.equal(dbs.status, 200);
  assert.ok(dbs.body.Databases.some((d) => d.id === 'shop'));
  assert.equal(new URL(parts.AccountEndpoint).href, new URL('/', endpoint).href);

  // The read-only key gets the read-only connection string.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await signIn(page, 'Read-only key', readOnlyKey);
  await page.getByRole('button', { name: 'Show keys' }).click();
  assert.equal(await page.getByLabel('Read-only connection string').inputValue(), `AccountEndpoint=${origin}/;AccountKey=${readOnlyKey};`);
  // From a container, the top bar's Connection button brings it back.
  await openOrders(page);
  await page.getByRole('button', { name: 'Connection', exact: true }).click();
  await page.getByRole('heading', { name: 'Connect an application' }).waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

test('on a phone the tab bar wraps within the screen and nothing scrolls sideways', async () => {
  const { page, context, errors } = await newPage({ viewport: NARROW });
  await signIn(page);
  await openOrders(page);
  const tabs = page.getByRole('tab');
  assert.equal(await tabs.count(), 7);
  for (const box of await tabs.evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON()))) {
    assert.ok(box.left >= 0 && box.right <= 390, `a tab at ${box.left}–${box.right} leaves the 390 px screen`);
  }
  // Every tab is reachable by a tap, each showing its panel.
  for (const name of ['Query', 'Change feed', 'Settings', 'Stored procedures', 'Triggers', 'User-defined functions', 'Items']) {
    await page.getByRole('tab', { name }).click();
    await page.getByRole('tab', { name, selected: true }).waitFor();
  }
  await shots(page, '25-phone-tabs');
  assert.deepEqual(errors, []);
  await context.close();
});
