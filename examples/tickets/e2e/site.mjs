// What the browser tests share: one headless Chromium (Debian's,
// driven by playwright-core) for the whole suite, and the moves a person
// makes on the site.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import path from "node:path";

export const base = process.env.TICKETS_URL;
const shots = process.env.SCREENSHOTS;

/** The window the suite runs in (VIEWPORT=390x844 for a phone; a desktop
 * by default). */
export const viewport = (() => {
  const [width, height] = (process.env.VIEWPORT || "1280x900").split("x").map(Number);
  return { width, height };
})();
/** Whether the suite runs at a phone's width. */
export const phone = viewport.width < 600;

/** Everything that went wrong in the browser without failing a step: console
 * errors (a 404 for a favicon shows up here), failed requests, responses of
 * 400 and more, uncaught exceptions. Each suite asserts it is empty. */
export const problems = [];

/** Launches Chromium with a fresh profile (a directory of its own per
 * suite file) and returns the page. */
export async function launch(name = "scenarios") {
  const context = await chromium.launchPersistentContext(path.join(process.env.PROFILE_DIR, name), {
    executablePath: process.env.CHROMIUM,
    headless: true,
    viewport,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  context.setDefaultTimeout(60_000);
  context.setDefaultNavigationTimeout(60_000);
  context.on("console", (m) => { if (m.type() === "error") problems.push(`console error on ${m.page()?.url()}: ${m.text()}`); });
  context.on("weberror", (e) => problems.push(`uncaught ${e.error()}`));
  context.on("response", (r) => { if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`); });
  context.on("requestfailed", (r) => {
    // A page left while its event stream is open cancels the stream: that is not a failure.
    if (!/\/stream\b/.test(r.url())) problems.push(`request failed: ${r.url()} (${r.failure()?.errorText})`);
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return { context, page };
}

/** Fails if anything went wrong in the browser (see problems). */
export function assertNoProblems() {
  assert.deepEqual(problems, [], `the browser reported:\n${problems.join("\n")}`);
}

/** Saves a full-page screenshot as name.png. */
export async function shot(page, name) {
  await page.screenshot({ path: path.join(shots, name + ".png"), fullPage: true });
}

/** Clicks something that submits a form, and waits for the next page. */
export async function submit(page, locator) {
  await Promise.all([page.waitForNavigation(), locator.click()]);
}

/** Switches the signed-in sample user with the header's picker and its
 * Switch button. */
export async function signInAs(page, name) {
  const picker = page.getByLabel("Signed in as");
  if ((await picker.locator("option:checked").textContent()) === name) return;
  await picker.selectOption({ label: name });
  await submit(page, page.getByRole("button", { name: "Switch" }));
  assert.equal(await page.getByLabel("Signed in as").locator("option:checked").textContent(), name);
}

/** Opens an event's page. */
export async function openEvent(page, name) {
  await page.goto(base + "/");
  await submit(page, page.getByRole("link", { name, exact: true }));
  await page.getByRole("heading", { level: 1, name }).waitFor();
}

/** Picks a seat on the map by clicking it. */
export async function pickSeat(page, code) {
  await page.locator(`label[for="seat-${code}"]`).click();
  assert.ok(await page.locator(`#seat-${code}`).isChecked(), `seat ${code} is selected`);
}

/** Turns a failure switch on or off. */
export async function setSwitch(page, label, on) {
  const sw = page.getByRole("switch", { name: label });
  if ((await sw.getAttribute("aria-checked")) !== String(on)) {
    await submit(page, sw);
  }
  assert.equal(await page.getByRole("switch", { name: label }).getAttribute("aria-checked"), String(on));
}

/** The text of each row of a result table, as arrays of cell texts. */
export async function rows(section) {
  return section.locator("tbody tr").evaluateAll((trs) =>
    trs.map((tr) => Array.from(tr.querySelectorAll("th, td")).map((c) => c.textContent.trim())));
}

/** Resets a show to all seats available. */
export async function resetShow(page) {
  await submit(page, page.getByRole("button", { name: "Reset this show" }));
}
