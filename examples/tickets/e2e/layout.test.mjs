// Layout: every kind of page fits the window, with no sideways scrolling,
// and on the event page every seat of the map is on screen, big enough and
// covered by nothing. On a phone (VIEWPORT=390x844) the pages are checked at
// 360, 390 and 414 px wide.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { base, launch, shot, submit, pickSeat, viewport, phone, problems, assertNoProblems } from "./site.mjs";

let context, page;
before(async () => ({ context, page } = await launch("layout")));
after(async () => {
  await context?.close();
  assertNoProblems();
});

const widths = phone ? [360, 390, 414] : [viewport.width];

/** What does not fit in the window: sideways scrolling, and cards or
 * controls that reach past its right edge. */
async function overflow() {
  return page.evaluate(() => {
    const out = [];
    const vw = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > vw) {
      out.push(`the page scrolls sideways: ${document.documentElement.scrollWidth}px wide in a ${vw}px window`);
    }
    for (const el of document.querySelectorAll(".card, .btn, button, select, input:not(.seat-input), table, h1, h2, figure")) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && (r.left < -0.5 || r.right > vw + 0.5)) {
        out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} spans ${Math.round(r.left)}–${Math.round(r.right)}px of ${vw}`);
      }
    }
    return out.slice(0, 10);
  });
}

/** Every seat of the map that is off screen, too small, or covered by
 * something else at its centre or any corner; and the number checked. */
async function seatProblems() {
  return page.evaluate(async () => {
    const out = [];
    const vw = document.documentElement.clientWidth;
    const seats = [...document.querySelectorAll("label.seat[for^='seat-']")];
    for (const label of seats) {
      label.scrollIntoView({ block: "center", inline: "nearest" });
      const r = label.getBoundingClientRect();
      const name = label.htmlFor.replace("seat-", "");
      if (r.width < 14 || r.height < 14) out.push(`${name} is ${r.width.toFixed(1)}×${r.height.toFixed(1)}px`);
      if (r.left < 0 || r.right > vw) out.push(`${name} is off screen (${Math.round(r.left)}–${Math.round(r.right)}px of ${vw})`);
      const points = [[r.left + r.width / 2, r.top + r.height / 2], [r.left + 2, r.top + 2], [r.right - 2, r.top + 2],
        [r.left + 2, r.bottom - 2], [r.right - 2, r.bottom - 2]];
      for (const [x, y] of points) {
        const hit = document.elementFromPoint(x, y);
        if (!hit || !label.contains(hit)) {
          out.push(`${name} is covered at (${Math.round(x)}, ${Math.round(y)}) by ${hit ? hit.outerHTML.slice(0, 60) : "nothing"}`);
          break;
        }
      }
    }
    window.scrollTo(0, 0);
    return { checked: seats.length, sections: [...document.querySelectorAll(".section legend")].map((l) => {
      const r = l.getBoundingClientRect();
      return { name: l.textContent.trim().split(" $")[0], left: r.left, right: r.right };
    }), out };
  });
}

async function check(path, name) {
  for (const w of widths) {
    await page.setViewportSize({ width: w, height: viewport.height });
    await page.goto(base + path);
    assert.deepEqual(await overflow(), [], `${path} at ${w}px`);
    if (w === viewport.width) await shot(page, name);
  }
}

test("every page fits the window", async () => {
  // Content for the pages: a race with its timeline, a saga, a ticket.
  await page.goto(base + "/events/nebula-nights");
  await pickSeat(page, "FC-1-1");
  await page.getByRole("radio", { name: "ETag conditional write" }).check();
  await page.locator('select[name="buyers"]').selectOption("6");
  await submit(page, page.getByRole("button", { name: "Simulate race" }));
  const raced = page.url().replace(base, "");
  await pickSeat(page, "BA-2-14");
  await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
  const saga = page.url().replace(base, "");

  await check("/", "layout-home");
  await check(raced, "layout-race-timeline");
  await check(saga, "layout-saga");
  await check("/tickets", "layout-tickets");
  await check("/messages", "layout-messages");
  await check("/integrity", "layout-integrity");
  await check("/activity", "layout-activity");
  await check("/activity?show=nebula-nights&what=tickets", "layout-activity-filtered");
  await check("/storm", "layout-storm");
  await check("/code/buy.go", "layout-code");
  await check("/events/no-such-show", "layout-error");
  // That page's 404 is the point of it.
  for (let i = problems.length - 1; i >= 0; i--) {
    if (problems[i].includes("/events/no-such-show")) problems.splice(i, 1);
  }
});

test("every seat of the map is on screen, big enough and uncovered; the Balcony is whole", async () => {
  for (const w of widths) {
    await page.setViewportSize({ width: w, height: viewport.height });
    await page.goto(base + "/events/cosmic-drift");
    const { checked, sections, out } = await seatProblems();
    assert.equal(checked, 130, "the map has 130 seats");
    assert.deepEqual(out, [], `seats at ${w}px`);
    assert.deepEqual(sections.map((s) => s.name), ["Floor Left", "Floor Center", "Floor Right", "Balcony"]);
    for (const s of sections) assert.ok(s.left >= 0 && s.right <= w, `${s.name}'s label is on screen at ${w}px: ${s.left}–${s.right}`);
    assert.deepEqual(await overflow(), [], `the event page at ${w}px`);
    await page.locator(".seatmap").screenshot({ path: `${process.env.SCREENSHOTS}/layout-seatmap-${w}.png` });
  }
  // A seat is chosen by clicking where it is drawn, and the choice is said
  // next to the button that buys it.
  await page.setViewportSize(viewport);
  await page.goto(base + "/events/cosmic-drift");
  await pickSeat(page, "BA-3-14");
  await page.getByText("Chosen: Balcony, row 3, seat 14 · $55").waitFor();
});
