// Accessibility: axe-core (from node_modules, no network) checks every kind
// of page for WCAG A/AA violations, after the pages have content. It only
// uses safe strategies, so the scenarios suite finds every show reconciled
// except where it breaks one itself.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { base, launch, submit, pickSeat } from "./site.mjs";

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
let context, page;
before(async () => ({ context, page } = await launch("a11y")));
after(async () => context?.close());

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
  for (const path of ["/", "/tickets", "/messages", "/integrity", "/activity", "/code/best.go"]) {
    await check(path);
  }
});
