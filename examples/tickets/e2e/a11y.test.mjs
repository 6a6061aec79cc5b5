// Accessibility: axe-core (from node_modules, no network) checks every kind
// of page for WCAG A/AA violations, after the pages have content, in the
// suite's window (a desktop's or a phone's). It sells seats only on the
// storm's own show and with safe strategies, except one naive race on
// Starlight Symphony's BA-3-1, a seat the scenarios suite does not use.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { base, launch, submit, pickSeat, assertNoProblems } from "./site.mjs";

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
let context, page;
before(async () => ({ context, page } = await launch("a11y")));
after(async () => {
  await context?.close();
  assertNoProblems();
});

async function check(path) {
  await page.goto(base + path);
  await page.addScriptTag({ path: axePath });
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("; ")}`);
  });
  assert.deepEqual(found, [], `${path} has accessibility violations:\n${found.join("\n")}`);
}

test("every page passes axe's WCAG 2.1 A and AA rules", async () => {
  // Give the pages results and tickets to show.
  await page.goto(base + "/events/starlight-symphony");
  await pickSeat(page, "BA-2-2");
  await page.getByRole("radio", { name: "ETag conditional write" }).check();
  await submit(page, page.getByRole("button", { name: "Simulate race" }));
  await check(page.url().replace(base, ""));
  await pickSeat(page, "BA-2-3");
  await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
  await check(page.url().replace(base, ""));
  await page.getByLabel("Use the distributed lock (with fencing)").check();
  await submit(page, page.getByRole("button", { name: "Find best seats" }));
  await check(page.url().replace(base, ""));
  // A ticket flagged as double booked, and the race timeline of a naive race.
  await pickSeat(page, "BA-3-1");
  await page.getByRole("radio", { name: "Naive read, then write" }).check();
  await submit(page, page.getByRole("button", { name: "Simulate race" }));
  await check(page.url().replace(base, ""));
  // A storm, finished.
  await page.goto(base + "/storm");
  await page.locator("select[name=buyers]").selectOption("100");
  await submit(page, page.getByRole("button", { name: "Start the storm" }));
  await page.locator("[data-storm][data-phase=done]").waitFor({ timeout: 120_000 });
  await check("/storm");
  for (const path of ["/", "/tickets", "/messages", "/integrity", "/activity", "/activity?show=starlight-symphony&what=tickets&problems=1", "/code/best.go"]) {
    await check(path);
  }
});
