// Every scenario of Cosmic Ticks, clicked through as a person would, in
// order: the tests share one browser and build on each other's purchases.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { base, launch, shot, submit, signInAs, openEvent, pickSeat, setSwitch, rows, resetShow, assertNoProblems } from "./site.mjs";

let context, page;
before(async () => ({ context, page } = await launch("scenarios")));
after(async () => {
  await context?.close();
  assertNoProblems();
});

/** Each lane of the race's timeline: the buyer and what became of its write. */
async function lanes(result) {
  return result.locator(".tl-notes li").evaluateAll((lis) => lis.map((li) => [li.querySelector("strong").textContent, li.dataset.result, li.textContent]));
}

async function race(strategyLabel, seat, buyers) {
  await pickSeat(page, seat);
  await page.getByRole("radio", { name: strategyLabel }).check();
  await page.locator('select[name="buyers"]').selectOption(String(buyers));
  await submit(page, page.getByRole("button", { name: "Simulate race" }));
  return page.locator("section.result");
}

test("the home page lists the shows and the scenarios", async () => {
  await page.goto(base + "/");
  await page.getByRole("heading", { name: "On sale now" }).waitFor();
  for (const show of ["Nebula Nights", "Cosmic Drift Live", "Starlight Symphony"]) {
    await page.getByRole("link", { name: show, exact: true }).waitFor();
  }
  await shot(page, "01-home");
});

test("naive race: both buyers get the same seat, and both hold a ticket", async () => {
  await signInAs(page, "Alice");
  await openEvent(page, "Nebula Nights");
  await shot(page, "02-seat-map");
  const result = await race("Naive read, then write", "FC-3-7", 2);
  assert.equal(await result.getAttribute("data-verdict"), "double");
  await result.getByText("Double booked.").waitFor();
  const r = await rows(result);
  assert.deepEqual(r.map((x) => [x[0], x[1]]), [["Alice", "Got the seat"], ["Bob", "Got the seat"]]);
  await result.getByText("the last write silently won").waitFor();
  // The timeline: both writes accepted, the last one is what the seat shows.
  const l = await lanes(result);
  assert.deepEqual(l.map((x) => [x[0], x[1]]), [["Alice", "won"], ["Bob", "won"]]);
  assert.equal(l.filter((x) => /as the last write it is what the seat shows/.test(x[2])).length, 1);
  assert.equal(await result.locator(".tl-lane .tl-write-ok").count(), 2);
  await shot(page, "03-race-naive");

  for (const [who, other] of [["Alice", "Bob"], ["Bob", "Alice"]]) {
    await signInAs(page, who);
    await page.goto(base + "/tickets");
    const ticket = page.locator("li.ticket", { hasText: "Floor Center, row 3, seat 7" });
    await ticket.getByText(`Double booked: ${other} also holds a ticket for this seat.`).waitFor();
  }
  await shot(page, "04-bob-also-has-the-ticket");
  await signInAs(page, "Alice");

  await page.goto(base + "/integrity");
  const card = page.locator("section.check", { has: page.getByRole("heading", { name: /Nebula Nights/ }) });
  await card.getByText("Does not reconcile").waitFor();
  await card.getByText("Floor Center, row 3, seat 7: tickets held by Alice, Bob").waitFor();
  await shot(page, "05-integrity-broken");
});

test("ETag race: exactly one of three buyers wins, the others get 412", async () => {
  await openEvent(page, "Cosmic Drift Live");
  const result = await race("ETag conditional write", "FC-1-5", 3);
  assert.equal(await result.getAttribute("data-verdict"), "one");
  await result.getByText("Exactly one winner.").waitFor();
  const r = await rows(result);
  assert.equal(r.filter((x) => x[1] === "Got the seat").length, 1);
  assert.equal(r.filter((x) => x[1] === "Turned away").length, 2);
  for (const x of r.filter((x) => x[1] === "Turned away")) assert.match(x[2], /412 Precondition Failed/);
  // The timeline: one write committed, the two others visibly refused, each
  // having sent the ETag every buyer read (E1) after the winner changed it.
  const l = await lanes(result);
  assert.equal(l.filter((x) => x[1] === "won").length, 1);
  assert.equal(l.filter((x) => x[1] === "refused").length, 2);
  for (const x of l.filter((x) => x[1] === "refused")) assert.match(x[2], /with If-Match E1; refused at [0-9.]+ ms with 412 Precondition Failed, because the seat's ETag was E2 by then/);
  assert.equal(await result.locator(".tl-lane .tl-write-refused .tl-mark").count(), 2);
  await result.locator("figure.timeline").screenshot({ path: `${process.env.SCREENSHOTS}/06b-race-etag-timeline.png` });
  await shot(page, "06-race-etag");
  // The strategy and the buyers chosen are still chosen for the next race.
  assert.ok(await page.getByRole("radio", { name: "ETag conditional write" }).isChecked());
  assert.equal(await page.locator('select[name="buyers"]').inputValue(), "3");
});

test("batch race: exactly one of four buyers wins, the others get 409", async () => {
  await openEvent(page, "Cosmic Drift Live");
  const result = await race("Create-only seat id in a transactional batch", "FC-1-6", 4);
  assert.equal(await result.getAttribute("data-verdict"), "one");
  const r = await rows(result);
  assert.equal(r.filter((x) => x[1] === "Got the seat").length, 1);
  assert.equal(r.filter((x) => x[1] === "Turned away").length, 3);
  for (const x of r.filter((x) => x[1] === "Turned away")) assert.match(x[2], /409 Conflict/);
  const l = await lanes(result);
  assert.deepEqual(l.map((x) => x[1]).sort(), ["refused", "refused", "refused", "won"]);
  assert.equal(await result.locator(".tl-lane .tl-read").count(), 0, "the batch strategy reads nothing");
  await shot(page, "07-race-batch");
  assert.ok(await page.getByRole("radio", { name: "Create-only seat id in a transactional batch" }).isChecked());
  // A sold seat cannot be picked any more.
  assert.ok(await page.locator("#seat-FC-1-6").isDisabled());

  await page.goto(base + "/integrity");
  const card = page.locator("section.check", { has: page.getByRole("heading", { name: /Cosmic Drift Live/ }) });
  await card.getByText("Reconciled").waitFor();
});

test("best available: overlap without the lock, none with it", async () => {
  await openEvent(page, "Starlight Symphony");
  await page.locator('select[name="count"]').selectOption("2");
  await page.locator('select[name="best-buyers"]').selectOption("3");
  await submit(page, page.getByRole("button", { name: "Find best seats" }));
  let result = page.locator("section.result");
  assert.equal(await result.getAttribute("data-verdict"), "overlap");
  await result.getByText("Overlap.").waitFor();
  await shot(page, "08-best-no-lock");

  await resetShow(page);
  await page.locator('select[name="count"]').selectOption("2");
  await page.locator('select[name="best-buyers"]').selectOption("3");
  await page.getByLabel("Use the distributed lock (with fencing)").check();
  await submit(page, page.getByRole("button", { name: "Find best seats" }));
  result = page.locator("section.result");
  assert.equal(await result.getAttribute("data-verdict"), "disjoint");
  await result.getByText("No overlap.").waitFor();
  await result.getByRole("columnheader", { name: "Fencing token" }).waitFor();
  const r = await rows(result);
  assert.equal(r.length, 3);
  const seats = r.flatMap((x) => x[1].split(/(?=Floor|Balcony)/));
  assert.equal(new Set(seats).size, 6, `six different seats: ${seats}`);
  const tokens = r.map((x) => Number(x[2]));
  assert.equal(new Set(tokens).size, 3, `three different fencing tokens: ${tokens}`);
  await shot(page, "09-best-with-lock");

  // A lock holder that stalls past its lease is fenced out when it wakes.
  await submit(page, page.getByRole("button", { name: "Stall a lock holder" }));
  result = page.locator("section.result");
  assert.equal(await result.getAttribute("data-verdict"), "fenced");
  await result.getByText("Fenced out.").waitFor();
  const [alice, bob] = await rows(result);
  assert.equal(alice[0], "Alice");
  assert.equal(alice[1], "none");
  assert.match(alice[3], /refused/);
  assert.equal(bob[0], "Bob");
  assert.ok(Number(bob[2]) > Number(alice[2]), `Bob's token ${bob[2]} is newer than Alice's ${alice[2]}`);
  await shot(page, "09b-best-stalled-holder");
  await page.goto(base + "/integrity");
  await page.locator("section.check", { has: page.getByRole("heading", { name: /Starlight Symphony/ }) }).getByText("Reconciled").waitFor();
});

test("purchase saga: completes, each failure rolls it back saying what each undo did, messaging down keeps the purchase", async () => {
  await openEvent(page, "Cosmic Drift Live");
  await pickSeat(page, "BA-1-1");
  await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
  let result = page.locator("section.result");
  assert.equal(await result.getAttribute("data-verdict"), "completed");
  await result.getByText("Purchase complete.").waitFor();
  assert.equal(await result.locator("[data-confirmation]").getAttribute("data-confirmation"), "queued");
  await shot(page, "10-saga-completed");

  const cases = [
    ["Payment provider declines cards", "Charge card failed", [
      ["Refund card", "The card had been declined, so nothing had been charged: the refund was a no-op."],
      ["Release seats", "Released Balcony, row 1, seat 2: back on sale."]]],
    ["Ticketing system is down", "Issue tickets failed", [
      ["Revoke tickets", "No ticket had been issued, so the revoke recorded the order as cancelled: a late issue is refused."],
      ["Refund card", "Refunded $55 to Alice's card."],
      ["Release seats", "Released Balcony, row 1, seat 2: back on sale."]]],
  ];
  for (const [i, [label, failed, undone]] of cases.entries()) {
    await setSwitch(page, label, true);
    await pickSeat(page, "BA-1-2");
    await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
    result = page.locator("section.result");
    assert.equal(await result.getAttribute("data-verdict"), "compensated");
    await result.getByText("Purchase rolled back.").waitFor();
    await result.getByText(failed).waitFor();
    const comps = await result.getByRole("list", { name: "Compensations" }).locator("li").evaluateAll((lis) =>
      lis.map((li) => [li.querySelector(".badge").textContent.trim(), li.querySelector(".said").textContent.trim()]));
    assert.deepEqual(comps, undone);
    // The seat is back on sale.
    assert.ok(await page.locator("#seat-BA-1-2").isEnabled());
    await shot(page, `1${i + 1}-saga-${label.split(" ")[0].toLowerCase()}`);
    await setSwitch(page, label, false);
  }

  // Messaging down is no reason to refund: the purchase completes, and the
  // confirmation waits in the outbox, committed with the order.
  await setSwitch(page, "Messaging is down", true);
  await pickSeat(page, "BA-1-3");
  await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
  result = page.locator("section.result");
  assert.equal(await result.getAttribute("data-verdict"), "completed");
  await result.getByText("Purchase complete.").waitFor();
  assert.equal(await result.locator("[data-confirmation]").getAttribute("data-confirmation"), "waiting");
  await result.getByText("messaging is down, so the confirmation waits in the outbox.").waitFor();
  assert.equal(await result.getByRole("list", { name: "Compensations" }).count(), 0);
  assert.ok(await page.locator("#seat-BA-1-3").isDisabled(), "the seat is sold");
  await shot(page, "13-saga-messaging-down");
  await page.goto(base + "/tickets");
  await page.locator("li.ticket", { hasText: "Cosmic Drift Live" }).filter({ hasText: "Balcony, row 1, seat 3" }).waitFor();
  await page.goto(base + "/messages");
  assert.ok(Number(await page.locator("[data-unsent]").getAttribute("data-unsent")) >= 1, "the confirmation waits in the outbox");
  assert.equal(await page.getByText("Balcony, row 1, seat 3, $55").count(), 0, "and is not delivered while messaging is down");
  await shot(page, "13b-saga-confirmation-in-outbox");
  await page.goto(base + "/integrity");
  await page.locator("section.check", { has: page.getByRole("heading", { name: /Cosmic Drift Live/ }) }).getByText("Reconciled").waitFor();
  await page.goto(base + "/messages");
  await setSwitch(page, "Messaging is down", false);
  for (let i = 0; ; i++) {
    await page.goto(base + "/messages");
    if ((await page.locator("[data-unsent]").getAttribute("data-unsent")) === "0" &&
        (await page.getByText("Your tickets for Cosmic Drift Live are confirmed: Balcony, row 1, seat 3, $55.").count()) === 1) break;
    assert.ok(i < 300, "the confirmation went out within a minute of messaging coming back");
    await page.waitForTimeout(200);
  }

  // The compensations reached the show's live log through the change feed.
  await openEvent(page, "Cosmic Drift Live");
  const log = page.locator("[data-activity]").first();
  await log.getByText("Alice was refunded $55.").first().waitFor();
  await log.getByText("Balcony, row 1, seat 2 released, back on sale.").first().waitFor();
  await shot(page, "14-saga-activity-log");
});

test("transfer through the outbox: held while messaging is down, delivered after", async () => {
  await page.goto(base + "/messages");
  await setSwitch(page, "Messaging is down", true);
  await page.goto(base + "/tickets");
  const ticket = page.locator("li.ticket", { hasText: "Cosmic Drift Live" }).filter({ hasText: "Balcony, row 1, seat 1" });
  await ticket.getByLabel(/Send the .* ticket to/).selectOption({ label: "Bob" });
  await submit(page, ticket.getByRole("button", { name: "Transfer", exact: true }));
  await page.getByRole("heading", { name: "Ticket sent to Bob" }).waitFor();
  await page.getByText("waiting in the outbox").waitFor();
  assert.equal(await page.locator("li.ticket", { hasText: "Balcony, row 1, seat 1" }).count(), 0);
  await shot(page, "15-transfer-queued");

  await page.goto(base + "/messages");
  assert.equal(await page.locator("[data-unsent]").getAttribute("data-unsent"), "2");
  assert.equal(await page.getByText(/sent your Cosmic Drift Live ticket/).count(), 0);
  await shot(page, "16-outbox-waiting");

  await setSwitch(page, "Messaging is down", false);
  for (let i = 0; ; i++) {
    await page.goto(base + "/messages");
    if ((await page.locator("[data-unsent]").getAttribute("data-unsent")) === "0" &&
        (await page.getByText(/You sent your Cosmic Drift Live ticket \(Balcony, row 1, seat 1\) to Bob/).count()) === 1) break;
    assert.ok(i < 300, "the outbox drained within a minute of messaging coming back");
    await page.waitForTimeout(200);
  }
  await shot(page, "17-outbox-drained");

  await signInAs(page, "Bob");
  await page.goto(base + "/messages");
  await page.getByText("Alice sent you a ticket for Cosmic Drift Live: Balcony, row 1, seat 1.").waitFor();
  await page.goto(base + "/tickets");
  await page.locator("li.ticket", { hasText: "Cosmic Drift Live" }).filter({ hasText: "Balcony, row 1, seat 1" }).waitFor();
  await shot(page, "18-bob-received");

  // The contrast: Bob sends it back without the outbox while messaging is
  // down; the transfer stands and both notifications are lost.
  await page.goto(base + "/messages");
  await setSwitch(page, "Messaging is down", true);
  await page.goto(base + "/tickets");
  const back = page.locator("li.ticket", { hasText: "Cosmic Drift Live" }).filter({ hasText: "Balcony, row 1, seat 1" });
  await back.getByLabel(/Send the .* ticket to/).selectOption({ label: "Alice" });
  await submit(page, back.getByRole("button", { name: "Transfer without outbox" }));
  await page.getByText("2 notifications were lost").waitFor();
  await shot(page, "18b-direct-transfer-lost");
  await page.goto(base + "/messages");
  assert.equal(await page.locator("[data-unsent]").getAttribute("data-unsent"), "0");
  await setSwitch(page, "Messaging is down", false);
  await signInAs(page, "Alice");
});

test("the activity log: filtered by show, topic and person, live", async () => {
  await page.goto(base + "/activity");
  await page.getByLabel("Show").selectOption({ label: "Cosmic Drift Live" });
  await page.getByLabel("About").selectOption({ label: "Payments" });
  await submit(page, page.getByRole("button", { name: "Apply" }));
  const lines = await page.locator("[data-activity] li").allTextContents();
  assert.ok(lines.length >= 4, `payment lines of Cosmic Drift Live: ${lines}`);
  for (const l of lines) assert.match(l, /Cosmic Drift Live: .*(card was charged|card was declined|refunded)/);
  await shot(page, "19a-activity-filtered");

  // Live: a ticket bought on another show does not appear, one on this show does.
  await page.goto(base + "/activity?show=nebula-nights&what=tickets");
  const other = await context.newPage();
  await other.goto(base + "/events/cosmic-drift");
  await other.locator('label[for="seat-BA-3-13"]').click();
  await Promise.all([other.waitForNavigation(), other.getByRole("button", { name: "Buy seat" }).click()]);
  await other.getByText("You bought it").waitFor();
  await other.goto(base + "/events/nebula-nights");
  await other.locator('label[for="seat-BA-3-14"]').click();
  await Promise.all([other.waitForNavigation(), other.getByRole("button", { name: "Buy seat" }).click()]);
  await other.getByText("You bought it").waitFor();
  await other.close();
  await page.getByText("Nebula Nights: ticket for Balcony, row 3, seat 14 now held by Alice.").waitFor();
  assert.equal(await page.getByText("Balcony, row 3, seat 13").count(), 0, "a Cosmic Drift line got through the filter");
  await page.getByRole("link", { name: "Show everything" }).click();
  await page.getByText("Cosmic Drift Live: ticket for Balcony, row 3, seat 13 now held by Alice.").waitFor();
  await shot(page, "19-activity");
});

test("the activity log and the code links", async () => {
  await page.goto(base + "/activity");
  await page.getByText(/Alice paid \$120 for Floor Center, row 3, seat 7/).first().waitFor();

  await page.goto(base + "/events/nebula-nights");
  await pickSeat(page, "FC-4-1");
  await page.getByRole("radio", { name: "ETag conditional write" }).check();
  await submit(page, page.getByRole("button", { name: "Simulate race" }));
  await submit(page, page.locator("section.result").getByRole("link", { name: "See the code" }));
  assert.match(page.url(), /\/code\/buy\.go#buyETag$/);
  await page.getByText("func (a *attempt) buyETag(ctx context.Context) Outcome {").waitFor();
  await shot(page, "20-code");
});

test("keyboard: arrowing through the user picker switches nobody; its button does", async () => {
  await page.goto(base + "/tickets");
  const picker = page.getByLabel("Signed in as");
  await picker.focus();
  const before = page.url();
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowDown");
  assert.equal(await picker.inputValue(), "carol", "the arrows move through the names");
  await page.waitForTimeout(500); // a submit on change would be navigating by now
  assert.equal(page.url(), before);
  await page.reload();
  assert.equal(await page.getByLabel("Signed in as").locator("option:checked").textContent(), "Alice", "still Alice");
  await page.getByLabel("Signed in as").focus();
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Tab");
  await Promise.all([page.waitForNavigation(), page.keyboard.press("Enter")]);
  assert.equal(await page.getByLabel("Signed in as").locator("option:checked").textContent(), "Bob");
  await page.getByRole("heading", { name: "My tickets" }).waitFor();
  await signInAs(page, "Alice");
});

test("storm: 1,000 buyers started from the browser, counted live", async () => {
  await page.goto(base + "/storm");
  await page.getByRole("radio", { name: "Create-only seat id in a transactional batch" }).check();
  await page.locator("select[name=buyers]").selectOption("1000");
  await submit(page, page.getByRole("button", { name: "Start the storm" }));
  const storm = page.locator("[data-storm]");
  // Watch the counts from the page itself: they must fill in without a
  // reload, and never go back.
  await page.evaluate(() => {
    window.stormSeen = [];
    const read = () => {
      const f = (n) => Number(document.querySelector(`[data-field="${n}"]`).textContent.replace(/,/g, ""));
      window.stormSeen.push([f("won"), f("taken"), f("failed")]);
    };
    new MutationObserver(read).observe(document.querySelector("[data-storm]"), { subtree: true, childList: true, characterData: true });
    read();
  });
  let midShot = false;
  for (let i = 0; (await storm.getAttribute("data-phase")) !== "done"; i++) {
    assert.ok(i < 1200, "the storm finished within two minutes");
    if (!midShot && (await storm.getAttribute("data-phase")) === "buying" &&
        Number((await storm.locator("[data-field=taken]").textContent()).replace(/,/g, "")) > 0) {
      await shot(page, "21-storm-running");
      midShot = true;
    }
    await page.waitForTimeout(100);
  }
  const seen = await page.evaluate(() => window.stormSeen);
  for (let i = 1; i < seen.length; i++) {
    for (let k = 0; k < 3; k++) assert.ok(seen[i][k] >= seen[i - 1][k], `counts went back: ${seen[i - 1]} then ${seen[i]}`);
  }
  assert.deepEqual(seen.at(-1), [100, 900, 0], "100 sold, 900 turned away, no errors");
  assert.match(await storm.locator("[data-field=verdict]").textContent(), /^Every seat sold exactly once, every buyer answered/);
  const hist = await storm.locator(".histogram [data-field=count]").allTextContents();
  assert.equal(hist.reduce((a, b) => a + Number(b), 0), 1000, `the histogram holds every answer: ${hist}`);
  assert.ok(await page.getByRole("button", { name: "Start the storm" }).isEnabled(), "another storm can start");
  await shot(page, "22-storm-done");
});
