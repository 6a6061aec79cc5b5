package main

import (
	"context"
	"slices"
	"testing"

	"github.com/orrery-db/orrery/coord"
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
			wantStatus := coord.SagaCompensated
			if c.comp == nil {
				wantStatus = coord.SagaCompleted
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
