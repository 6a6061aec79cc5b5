package main

import (
	"context"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/saga"
)

// TestPurchaseSaga buys a seat through the saga with each failure switch:
// with none it completes; a declined card, a ticketing failure and a
// messaging failure each roll the purchase back by compensating, in reverse
// order, every step that ran (the failed one included). The seat is back on
// sale, the card is refunded when it was charged, and the event reconciles.
func TestPurchaseSaga(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := context.Background()
	const ev = "nebula-nights"
	cases := []struct {
		name   string
		flip   func(bool)
		seat   string
		comp   []string
		charge string
	}{
		{"no failure", func(bool) {}, "FC-2-1", nil, "approved"},
		{"payment declines", app.switches.PaymentDeclines.Store, "FC-2-2", []string{stepCharge, stepHold}, "declined"},
		{"ticketing down", app.switches.TicketingDown.Store, "FC-2-3", []string{stepIssue, stepCharge, stepHold}, "refunded"},
		{"messaging down", app.switches.MessagingDown.Store, "FC-2-4", []string{stepIssue, stepCharge, stepHold}, "refunded"},
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
			wantStatus := saga.Compensated
			if c.comp == nil {
				wantStatus = saga.Completed
			}
			if st.Status != wantStatus || !slices.Equal(st.Compensated, c.comp) && len(c.comp) > 0 {
				t.Fatalf("saga ended %s, compensated %v; want %s, %v", st.Status, st.Compensated, wantStatus, c.comp)
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
	crashed := saga.State{ID: id, Saga: "purchase", Status: saga.Running, Input: raw, Next: 2,
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
	if err != nil || st.Status != saga.Completed {
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
