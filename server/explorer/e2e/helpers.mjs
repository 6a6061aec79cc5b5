// What the browser suites share: the browser, a fresh page with its API
// calls and errors recorded, screenshots at a desktop and a phone width
// (each checked for sideways scrolling and by axe-core), signing in, and a
// REST client of the server's own API for setting up and checking what the
// page did, signed with the master key as the SDKs sign.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const endpoint = process.env.ORRERY_ENDPOINT;
export const key = process.env.ORRERY_KEY;
export const token = process.env.ORRERY_TOKEN;
export const readOnlyKey = process.env.ORRERY_READONLY_KEY;
const shotsDir = process.env.ORRERY_SCREENSHOTS;
export const explorer = new URL('/_explorer/', endpoint).href;
// Generous: the machine running this may be very busy.
export const TIMEOUT = 30_000;
/** The widths every screenshot is taken at: a laptop's and a phone's. */
export const WIDE = { width: 1280, height: 860 };
export const NARROW = { width: 390, height: 844 };

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let browser;

/** launch starts headless Chromium; call it from the suite's before hook. */
export async function launch() {
  assert.ok(endpoint && key && shotsDir, 'ORRERY_ENDPOINT, ORRERY_KEY and ORRERY_SCREENSHOTS must be set');
  // Playwright starts the browser with a fresh --user-data-dir of its own
  // (a temporary profile it removes on close) and refuses one passed here.
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** close stops the browser; call it from the suite's after hook. */
export async function close() {
  await browser?.close();
}

/** newPage opens the explorer in a fresh context and records the API calls it makes. */
export async function newPage(options = {}) {
  const context = await browser.newContext({ viewport: WIDE, acceptDownloads: true, ...options });
  context.setDefaultTimeout(TIMEOUT);
  const page = await context.newPage();
  const calls = [];
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.protocol.startsWith('http') && !u.pathname.startsWith('/_explorer/')) {
      calls.push({ method: r.request().method(), path: u.pathname, status: r.status() });
    }
  });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  // Works offline: nothing is fetched from anywhere but this server.
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith('data:') && !u.startsWith('blob:') && new URL(u).origin !== new URL(explorer).origin) errors.push(new Error(`request to another origin: ${u}`));
  });
  page.on('console', (m) => { if (m.type() === 'error' && !/status of 40[0-9]|status of 412/.test(m.text())) errors.push(new Error(m.text())); });
  await page.goto(explorer);
  return { page, context, calls, errors };
}

/** axe runs axe-core's WCAG 2.1 A and AA rules and best practices on the page as it is. */
async function axe(page, what) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource);
  const res = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
    resultTypes: ['violations'],
  }));
  const found = res.violations.map((v) => `${v.id} (${v.impact}): ${v.help}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  assert.deepEqual(found, [], `axe-core finds no violations on ${what}`);
}

/** noSidewaysScroll checks that the page is no wider than the window. */
async function noSidewaysScroll(page, what) {
  const over = await page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= w) return null;
    // Name the widest elements, to say what to fix.
    return [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > w + 0.5)
      .slice(0, 5)
      .map((el) => `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}.${el.className} right=${Math.round(el.getBoundingClientRect().right)}`)
      .join('; ') || `scrollWidth ${document.documentElement.scrollWidth} > ${w}`;
  });
  assert.equal(over, null, `${what} scrolls sideways`);
}

/**
 * shots takes full-page screenshots of the page as it is at 1280 and 390 px
 * wide (name-1280.png, name-390.png), checks at each width that nothing
 * makes the page scroll sideways and that axe-core finds no violations, and
 * returns the page to 1280 px.
 */
export async function shots(page, name) {
  for (const size of [WIDE, NARROW]) {
    await page.setViewportSize(size);
    await noSidewaysScroll(page, `${name} at ${size.width} px`);
    await page.screenshot({ path: join(shotsDir, `${name}-${size.width}.png`), fullPage: true });
    await axe(page, `${name} at ${size.width} px`);
  }
  await page.setViewportSize(WIDE);
}

export async function signIn(page, kind = 'Master key', secret = key) {
  await page.getByRole('radio', { name: kind, exact: true }).check();
  await page.locator('#secret').fill(secret);
  await page.getByRole('button', { name: 'Connect' }).click();
}

/** openContainer opens a container from the tree, expanding its database. */
export async function openContainer(page, db, coll) {
  const toggle = page.getByRole('button', { name: db, exact: true });
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
  await page.getByRole('button', { name: coll, exact: true }).click();
  await page.getByRole('heading', { name: `${db} / ${coll}` }).waitFor();
}

export const openOrders = (page) => openContainer(page, 'shop', 'orders');

/** scope is the resource type and link a request is signed over. */
function scope(segs) {
  if (segs.length === 0) return ['', ''];
  if (segs[0] === 'offers') return ['offers', (segs[1] || '').toLowerCase()];
  if (segs.length % 2 === 1) return [segs[segs.length - 1], segs.slice(0, -1).join('/')];
  return [segs[segs.length - 2], segs.join('/')];
}

/**
 * rest sends one request to the server's REST API signed with a key (the
 * master key unless given), and returns its status, headers and parsed body.
 * signAs are the segments it is signed over when not its path's (the
 * server's /_admin/ calls).
 */
export async function rest(method, segs, { body, headers = {}, signWith = key, base = endpoint, signAs } = {}) {
  const [type, link] = scope(signAs || segs);
  const date = new Date().toUTCString();
  const payload = `${method.toLowerCase()}\n${type.toLowerCase()}\n${link}\n${date.toLowerCase()}\n\n`;
  const sig = createHmac('sha256', Buffer.from(signWith, 'base64')).update(payload).digest('base64');
  const res = await fetch(new URL(segs.map(encodeURIComponent).join('/'), base), {
    method,
    headers: {
      'x-ms-date': date, 'x-ms-version': '2020-07-15',
      authorization: encodeURIComponent(`type=master&ver=1.0&sig=${sig}`),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

/** pk is the x-ms-documentdb-partitionkey header of partition key values. */
export const pk = (...values) => ({ 'x-ms-documentdb-partitionkey': JSON.stringify(values) });
