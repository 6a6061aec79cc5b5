package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/saga"
)

// TestPurchaseSaga buys a seat through the saga with each failure switch:
// with none it completes; a declined card and a ticketing failure each roll
// the purchase back by compensating, in reverse order, every step that ran
// (the failed one included), and the page says what each compensation did.
// The seat is back on sale, the card is refunded when it was charged, and
// the event reconciles.
func TestPurchaseSaga(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := t.Context()
	const ev = "nebula-nights"
	cases := []struct {
		name   string
		flip   func(bool)
		seat   string
		comp   []string
		charge string
		said   []string // what each compensation is said to have done
	}{
		{"no failure", func(bool) {}, "FC-2-1", nil, "approved", nil},
		{"payment declines", app.switches.PaymentDeclines.Store, "FC-2-2", []string{stepCharge, stepHold}, "declined", []string{
			"The card had been declined, so nothing had been charged: the refund was a no-op.",
			"Released Floor Center, row 2, seat 2: back on sale."}},
		{"ticketing down", app.switches.TicketingDown.Store, "FC-2-3", []string{stepIssue, stepCharge, stepHold}, "refunded", []string{
			"No ticket had been issued, so the revoke recorded the order as cancelled: a late issue is refused.",
			"Refunded $120 to Alice's card.",
			"Released Floor Center, row 2, seat 3: back on sale."}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.flip(true)
			defer c.flip(false)
			in := PurchaseInput{EventID: ev, Event: "Nebula Nights", UserID: "alice", Seats: []string{c.seat}, Total: priceOf(c.seat)}
			st, err := app.purchase.Buy(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := coord.SagaCompensated
			if c.comp == nil {
				wantStatus = coord.SagaCompleted
			}
			if st.Status != wantStatus || !slices.Equal(st.Compensated, c.comp) && len(c.comp) > 0 {
				t.Fatalf("saga ended %s, compensated %v; want %s, %v", st.Status, st.Compensated, wantStatus, c.comp)
			}
			res := app.purchase.result(ctx, in, st)
			var said []string
			for _, u := range res.Undone {
				said = append(said, u.Said)
			}
			if !slices.Equal(said, c.said) {
				t.Errorf("the compensations are said to have done\n%q\nwant\n%q", said, c.said)
			}
			seat, _, err := app.shop.readSeat(ctx, ev, c.seat)
			if err != nil {
				t.Fatal(err)
			}
			wantSeat := statusAvailable
			if c.comp == nil {
				wantSeat = statusSold
			}
			if seat.Status != wantSeat {
				t.Errorf("seat is %s, want %s", seat.Status, wantSeat)
			}
			ch, err := app.purchase.charge(ctx, "alice", "charge-"+st.ID)
			if err != nil || ch.Status != c.charge {
				t.Errorf("charge %+v (%v), want status %s", ch, err, c.charge)
			}
			in2, err := checkIntegrity(ctx, app.shop, ev)
			if err != nil || !in2.OK() {
				t.Errorf("integrity %+v (%v)", in2, err)
			}
		})
	}
}

// TestSagaSeatTakenReleasesNothing: a purchase whose seat another buyer
// holds fails at its first step, and its compensation says it had nothing to
// release and leaves the other buyer's sale alone.
func TestSagaSeatTakenReleasesNothing(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := t.Context()
	const ev = "cosmic-drift"
	if o := app.shop.begin(ctx, StrategyBatch, ev, "FL-3-3", "bob").finish(ctx); !o.Won {
		t.Fatalf("Bob's purchase: %s", o.Message)
	}
	in := PurchaseInput{EventID: ev, Event: "Cosmic Drift Live", UserID: "alice", Seats: []string{"FL-3-3"}, Total: priceOf("FL-3-3")}
	st, err := app.purchase.Buy(ctx, in)
	if err != nil || st.Status != coord.SagaCompensated || st.FailedStep != stepHold {
		t.Fatalf("saga %s, failed step %q (%v); want compensated at %s", st.Status, st.FailedStep, err, stepHold)
	}
	res := app.purchase.result(ctx, in, st)
	want := "This purchase never held Floor Left, row 3, seat 3 (another buyer had it), so there was nothing to release and the other buyer's hold was left alone."
	if len(res.Undone) != 1 || res.Undone[0].Said != want {
		t.Errorf("compensations %+v, want one saying %q", res.Undone, want)
	}
	seat, _, err := app.shop.readSeat(ctx, ev, "FL-3-3")
	if err != nil || seat.Status != statusSold || seat.Holder != "bob" {
		t.Errorf("Bob's seat after Alice's failed saga: %+v (%v)", seat, err)
	}
}

// TestSagaMessagingDownKeepsThePurchase: with messaging down the purchase
// completes (messaging is not one of its steps): the seat is sold, the card
// charged, the ticket active, and the confirmation waits in the outbox,
// committed with the order; nothing is delivered until messaging is back,
// then it is delivered exactly once.
func TestSagaMessagingDownKeepsThePurchase(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := t.Context()
	const ev = "starlight-symphony"
	app.switches.MessagingDown.Store(true)
	defer app.switches.MessagingDown.Store(false)
	in := PurchaseInput{EventID: ev, Event: "Starlight Symphony", UserID: "erin", Seats: []string{"BA-2-5"}, Total: priceOf("BA-2-5")}
	st, err := app.purchase.Buy(ctx, in)
	if err != nil || st.Status != coord.SagaCompleted {
		t.Fatalf("with messaging down the saga ended %s (%v), want completed", st.Status, err)
	}
	res := app.purchase.result(ctx, in, st)
	if !res.Confirmation.Queued || !res.Confirmation.MessagingDown || len(res.Undone) != 0 {
		t.Errorf("result %+v: want the confirmation queued while messaging is down, nothing undone", res.Confirmation)
	}
	o, _, err := app.purchase.order(ctx, ev, st.ID)
	if err != nil || o.Status != "paid" || o.Confirmation != confirmationQueued {
		t.Errorf("order %+v (%v): want paid with its confirmation queued", o, err)
	}
	if ch, err := app.purchase.charge(ctx, "erin", "charge-"+st.ID); err != nil || ch.Status != "approved" {
		t.Errorf("charge %+v (%v), want approved", ch, err)
	}
	tickets, err := app.shop.ticketsOf(ctx, ev)
	if err != nil || len(tickets) != 1 || tickets[0].OwnerID != "erin" || tickets[0].Status != "active" {
		t.Errorf("tickets %+v (%v), want one active ticket of Erin's", tickets, err)
	}
	if stats, err := app.relay.Stats(ctx); err != nil || stats.Unsent != 1 {
		t.Errorf("outbox: %d unsent (%v), want the confirmation", stats.Unsent, err)
	}
	time.Sleep(time.Second) // the relay is retrying meanwhile; nothing may arrive
	if n, err := notifications(ctx, app.notes, "erin"); err != nil || len(n) != 0 {
		t.Errorf("Erin has %d messages (%v) while messaging is down", len(n), err)
	}
	if in2, err := checkIntegrity(ctx, app.shop, ev); err != nil || !in2.OK() || in2.Tickets != 1 {
		t.Errorf("integrity %+v (%v)", in2, err)
	}

	app.switches.MessagingDown.Store(false)
	want := "Your tickets for Starlight Symphony are confirmed: Balcony, row 2, seat 5, $55."
	waitFor(t, 60*time.Second, "the confirmation delivered once messaging is back", func() bool {
		n, err := notifications(ctx, app.notes, "erin")
		stats, serr := app.relay.Stats(ctx)
		return err == nil && serr == nil && len(n) == 1 && n[0].Text == want && stats.Unsent == 0
	})
}

// TestConfirmationOwedAfterCrash: a process that dies between the saga's
// completion and the confirmation's queueing leaves a paid order without
// one; the recoverer queues it, once however many times it runs, and the
// buyer is told once. Callers racing to queue it queue one record.
func TestConfirmationOwedAfterCrash(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := t.Context()
	const ev = "nebula-nights"
	in := PurchaseInput{EventID: ev, Event: "Nebula Nights", UserID: "frank", Seats: []string{"FR-4-6"}, Total: priceOf("FR-4-6")}
	// The saga alone, as Buy runs it, then the "crash": no queueing.
	st, err := app.purchase.exec.Start(ctx, saga.NewID(), in)
	if err != nil || st.Status != coord.SagaCompleted {
		t.Fatalf("saga %s (%v)", st.Status, err)
	}
	if o, _, err := app.purchase.order(ctx, ev, st.ID); err != nil || o.Confirmation != "" {
		t.Fatalf("order %+v (%v) before recovery, want no confirmation", o, err)
	}
	// A second purchase whose saga is still running owes nothing yet.
	running := saga.State{ID: saga.NewID(), Saga: "purchase", Status: coord.SagaRunning, Input: mustJSON(in), Next: 3,
		Completed: []string{}, Compensate: []string{}, Compensated: []string{}}
	if err := app.shop.create(ctx, ev, Order{ID: orderOf(running.ID), Type: typeOrder, EventID: ev, UserID: "frank",
		Seats: []string{"FR-4-5"}, Total: 95, Strategy: sagaStrategy, SagaID: running.ID, Status: "paid"}); err != nil {
		t.Fatal(err)
	}
	sagas, err := app.shop.db.NewContainer("sagas")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sagas.CreateItem(ctx, azcosmos.NewPartitionKeyString(running.ID), mustJSON(running), nil); err != nil {
		t.Fatal(err)
	}

	// An order whose saga document is gone is skipped, not an error.
	if err := app.shop.create(ctx, ev, Order{ID: orderOf("gone"), Type: typeOrder, EventID: ev, UserID: "frank",
		Seats: []string{"FR-4-4"}, Total: 95, Strategy: sagaStrategy, SagaID: "gone", Status: "paid"}); err != nil {
		t.Fatal(err)
	}

	// Concurrent queueing (the buyer's and recoverers') commits one record.
	var queued atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ok, err := app.purchase.queueConfirmation(ctx, st.ID, in)
			if err != nil {
				t.Error(err)
			}
			if ok {
				queued.Add(1)
			}
		})
	}
	wg.Go(func() {
		n, err := app.purchase.queueOwed(ctx)
		if err != nil {
			t.Error(err)
		}
		queued.Add(int32(n))
	})
	wg.Wait()
	if queued.Load() != 1 {
		t.Errorf("%d callers queued the confirmation, want exactly 1", queued.Load())
	}
	if n, err := app.purchase.queueOwed(ctx); err != nil || n != 0 {
		t.Errorf("a later sweep queued %d (%v), want 0", n, err)
	}
	if o, _, err := app.purchase.order(ctx, ev, running.ID); err != nil || o.Confirmation != "" {
		t.Errorf("the running saga's order %+v (%v): want no confirmation before the saga completes", o, err)
	}
	want := "Your tickets for Nebula Nights are confirmed: Floor Right, row 4, seat 6, $95."
	waitFor(t, 60*time.Second, "the recovered confirmation delivered", func() bool {
		n, err := notifications(ctx, app.notes, "frank")
		return err == nil && len(n) == 1 && n[0].Text == want
	})
}

// waitFor polls cond until it holds, failing the test after limit: for
// effects of background workers, which signal nothing when they are done.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPurchaseRecovery leaves a purchase where a crashed executor would
// have: recorded, its seat held, its card charged, nothing after. The
// recoverer continues it from the recorded step: the charge is not made
// twice, the tickets are issued, and the event reconciles.
func TestPurchaseRecovery(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := context.Background()
	const ev = "cosmic-drift"
	in := PurchaseInput{EventID: ev, Event: "Cosmic Drift Live", UserID: "dave", Seats: []string{"FR-1-1"}, Total: priceOf("FR-1-1")}
	id := saga.NewID()
	raw := mustJSON(in)
	call := saga.Call{SagaID: id, Input: raw}
	if err := app.purchase.holdSeats(ctx, call); err != nil {
		t.Fatal(err)
	}
	if err := app.purchase.chargeCard(ctx, call); err != nil {
		t.Fatal(err)
	}
	crashed := saga.State{ID: id, Saga: "purchase", Status: coord.SagaRunning, Input: raw, Next: 2,
		Completed: []string{stepHold, stepCharge}, Compensate: []string{}, Compensated: []string{}}
	if _, err := app.purchase.exec.Get(ctx, id); err == nil {
		t.Fatal("the saga exists before it was recorded")
	}
	sagas, err := app.shop.db.NewContainer("sagas")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sagas.CreateItem(ctx, azcosmos.NewPartitionKeyString(id), mustJSON(crashed), nil); err != nil {
		t.Fatal(err)
	}

	if _, err := app.purchase.recoverOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The app's own recoverer may have got there first: Resume waits for
	// whoever drives it and returns the end state.
	st, err := app.purchase.exec.Resume(ctx, id)
	if err != nil || st.Status != coord.SagaCompleted {
		t.Fatalf("after recovery the saga is %s (%v), want completed", st.Status, err)
	}
	ch, err := app.purchase.charge(ctx, "dave", "charge-"+id)
	if err != nil || ch.Status != "approved" {
		t.Errorf("charge %+v (%v)", ch, err)
	}
	in2, err := checkIntegrity(ctx, app.shop, ev)
	if err != nil || !in2.OK() || in2.SeatsSold != 1 || in2.Tickets != 1 {
		t.Errorf("integrity %+v (%v)", in2, err)
	}
}
