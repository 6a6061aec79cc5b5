// The network faults switch: the database loses buyers' replies after their
// writes commit and sends them 429 storms. Under the ETag and batch
// strategies every lost reply is settled by reading back, so the storm's
// show reconciles; the naive strategy, with one buyer per seat and no race
// at all, sells seats twice. The switch is off again at the end, for the
// suites after this one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { base, launch, shot, submit, setSwitch, assertNoProblems } from "./site.mjs";

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

const SWITCH = "Lose buyers' replies and send them 429 storms";
let context, page;
before(async () => ({ context, page } = await launch("network")));
after(async () => {
  if (page) {
    await page.goto(base + "/integrity");
    await setSwitch(page, SWITCH, false);
  }
  await context?.close();
  assertNoProblems();
});

/** Checks the page as it is with axe-core's WCAG 2.1 A and AA rules. */
async function axe(what) {
  await page.addScriptTag({ path: axePath });
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("; ")}`);
  });
  assert.deepEqual(found, [], `${what} has accessibility violations:\n${found.join("\n")}`);
}

/** Runs a storm of 100 buyers (one per seat) under a strategy and returns its verdict. */
async function storm(strategy) {
  await page.goto(base + "/storm");
  await page.getByRole("radio", { name: strategy }).check();
  await page.locator("select[name=buyers]").selectOption("100");
  await submit(page, page.getByRole("button", { name: "Start the storm" }));
  const live = page.locator("[data-storm]");
  await page.locator("[data-storm][data-phase=done]").waitFor({ timeout: 120_000 });
  return {
    verdict: await live.locator("[data-field=verdict]").textContent(),
    good: await live.locator(".verdict-good").count() === 1,
    status: await live.locator("[data-field=status]").textContent(),
  };
}

test("network faults: the safe strategies settle lost replies and reconcile, the naive one sells seats twice", async () => {
  await page.goto(base + "/storm");
  const card = page.locator("section.network");
  assert.equal(await card.getAttribute("data-network"), "off");
  await setSwitch(page, SWITCH, true);
  assert.equal(await page.locator("section.network").getAttribute("data-network"), "on");
  await page.locator("section.network summary").click();
  await page.getByText("The safe strategies choose their order id once").waitFor();
  await shot(page, "30-network-faults-on");
  await axe("the storm page with network faults on and explained");

  for (const [strategy, name] of [["ETag conditional write", "etag"], ["Create-only seat id in a transactional batch", "batch"]]) {
    const r = await storm(strategy);
    assert.match(r.verdict, /^Every seat sold exactly once, every buyer answered, and the storm's show reconciles: 100 seats, 100 paid orders, 100 tickets\./, `${strategy}: ${r.status}`);
    assert.ok(r.good);
    assert.match(r.status, /replies were lost after the write was sent; each buyer read back/, `${strategy}: lost replies happened and were settled`);
    await shot(page, `31-network-faults-storm-${name}`);
  }

  const naive = await storm("Naive read, then write");
  assert.ok(!naive.good, `one naive buyer per seat under network faults: ${naive.verdict}`);
  assert.doesNotMatch(naive.verdict, /^Every seat sold exactly once/);
  await shot(page, "32-network-faults-storm-naive");
  await axe("the naive storm's result under network faults");

  // The integrity page says the switch is on; switching off says so too.
  await page.goto(base + "/integrity");
  await page.locator("[data-network-note]").waitFor();
  await shot(page, "33-network-faults-integrity");
  await axe("the integrity page with network faults on");
  await setSwitch(page, SWITCH, false);
  assert.equal(await page.locator("[data-network-note]").count(), 0);
});
