// Every scenario of Cosmic Ticks, clicked through as a person would, in
// order: the tests share one browser and build on each other's purchases.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { base, launch, shot, submit, signInAs, openEvent, pickSeat, setSwitch, rows, resetShow } from "./site.mjs";

let context, page;
before(async () => ({ context, page } = await launch("scenarios")));
after(async () => context?.close());

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
  await shot(page, "03-race-naive");

  for (const who of ["Alice", "Bob"]) {
    await signInAs(page, who);
    await page.goto(base + "/tickets");
    await page.getByText("Floor Center, row 3, seat 7").first().waitFor();
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
  await shot(page, "06-race-etag");
});

test("batch race: exactly one of four buyers wins, the others get 409", async () => {
  await openEvent(page, "Cosmic Drift Live");
  const result = await race("Create-only seat id in a transactional batch", "FC-1-6", 4);
  assert.equal(await result.getAttribute("data-verdict"), "one");
  const r = await rows(result);
  assert.equal(r.filter((x) => x[1] === "Got the seat").length, 1);
  assert.equal(r.filter((x) => x[1] === "Turned away").length, 3);
  for (const x of r.filter((x) => x[1] === "Turned away")) assert.match(x[2], /409 Conflict/);
  await shot(page, "07-race-batch");
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

test("purchase saga: completes, then each failure switch rolls it back in reverse", async () => {
  await openEvent(page, "Cosmic Drift Live");
  await pickSeat(page, "BA-1-1");
  await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
  let result = page.locator("section.result");
  assert.equal(await result.getAttribute("data-verdict"), "completed");
  await result.getByText("Purchase complete.").waitFor();
  await shot(page, "10-saga-completed");

  const cases = [
    ["Payment provider declines cards", "Charge card failed", ["Refund card", "Release seats"]],
    ["Ticketing system is down", "Issue tickets failed", ["Revoke tickets", "Refund card", "Release seats"]],
    ["Messaging is down", "Send confirmation failed", ["Revoke tickets", "Refund card", "Release seats"]],
  ];
  for (const [i, [label, failed, undone]] of cases.entries()) {
    await setSwitch(page, label, true);
    await pickSeat(page, "BA-1-2");
    await submit(page, page.getByRole("button", { name: "Buy with the saga" }));
    result = page.locator("section.result");
    assert.equal(await result.getAttribute("data-verdict"), "compensated");
    await result.getByText("Purchase rolled back.").waitFor();
    await result.getByText(failed).waitFor();
    const comps = await result.getByRole("list", { name: "Compensations" }).locator("li").allTextContents();
    assert.deepEqual(comps.map((c) => c.replace("Undone", "").trim()), undone);
    // The seat is back on sale.
    assert.ok(await page.locator("#seat-BA-1-2").isEnabled());
    await shot(page, `1${i + 1}-saga-${label.split(" ")[0].toLowerCase()}`);
    await setSwitch(page, label, false);
  }
  // The compensations reached the live log through the change feed.
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

test("the activity log and the code links", async () => {
  await page.goto(base + "/activity");
  await page.getByText(/Alice paid \$120 for Floor Center, row 3, seat 7/).first().waitFor();
  // A purchase made now appears live, without reloading.
  const other = await context.newPage();
  await other.goto(base + "/events/nebula-nights");
  await other.locator('label[for="seat-BA-3-14"]').click();
  await Promise.all([other.waitForNavigation(), other.getByRole("button", { name: "Buy seat" }).click()]);
  await other.getByText("You bought it").waitFor();
  await other.close();
  await page.getByText("ticket for Balcony, row 3, seat 14 now held by Alice.").waitFor();
  await shot(page, "19-activity");

  await page.goto(base + "/events/nebula-nights");
  await pickSeat(page, "FC-4-1");
  await page.getByRole("radio", { name: "ETag conditional write" }).check();
  await submit(page, page.getByRole("button", { name: "Simulate race" }));
  await submit(page, page.locator("section.result").getByRole("link", { name: "See the code" }));
  assert.match(page.url(), /\/code\/buy\.go#buyETag$/);
  await page.getByText("func (a *attempt) buyETag(ctx context.Context) Outcome {").waitFor();
  await shot(page, "20-code");
});
