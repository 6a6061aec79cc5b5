package main

import (
	"context"
	"testing"
	"time"
)

// TestTransferOutbox transfers a ticket while messaging is down: the
// transfer commits, both notifications wait in the outbox, and none is
// delivered; once messaging is back the relay delivers each exactly once.
func TestTransferOutbox(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := context.Background()
	const ev = "starlight-symphony"
	out := app.shop.begin(ctx, StrategyBatch, ev, "FC-1-5", "alice").finish(ctx)
	if !out.Won {
		t.Fatalf("purchase: %s", out.Message)
	}
	tickets, err := app.shop.ticketsOf(ctx, ev)
	if err != nil || len(tickets) != 1 {
		t.Fatalf("tickets %v, %v", tickets, err)
	}

	app.switches.MessagingDown.Store(true)
	if err := transferTicket(ctx, app.shop, app.outbox, "Starlight Symphony", ev, tickets[0].ID, "alice", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := transferTicket(ctx, app.shop, app.outbox, "Starlight Symphony", ev, tickets[0].ID, "alice", "carol"); err != errNotOwner {
		t.Fatalf("second transfer of the same ticket by its former owner: %v, want errNotOwner", err)
	}
	after, err := app.shop.ticketsOf(ctx, ev)
	if err != nil || after[0].OwnerID != "bob" {
		t.Fatalf("after the transfer the ticket belongs to %q (%v), want bob", after[0].OwnerID, err)
	}
	st, err := app.relay.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unsent != 2 {
		t.Errorf("with messaging down %d messages wait in the outbox, want 2", st.Unsent)
	}
	for _, u := range []string{"alice", "bob"} {
		if n, err := notifications(ctx, app.notes, u); err != nil || len(n) != 0 {
			t.Errorf("%s got %d notifications (%v) while messaging is down", u, len(n), err)
		}
	}

	app.switches.MessagingDown.Store(false)
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := app.relay.Stats(ctx)
		na, _ := notifications(ctx, app.notes, "alice")
		nb, _ := notifications(ctx, app.notes, "bob")
		if err == nil && st.Unsent == 0 && len(na) == 1 && len(nb) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after messaging came back: %d unsent (%v), alice has %d, bob %d notifications", st.Unsent, err, len(na), len(nb))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition: no event says "delivered"
	}
}

// TestTransferDirectLosesMessages is the contrast: the same transfer without
// the outbox, while messaging is down, moves the ticket and loses both
// notifications: nothing waits in the outbox, so nothing will ever send them.
func TestTransferDirectLosesMessages(t *testing.T) {
	ta := startApp(t)
	app := ta.app
	ctx := context.Background()
	const ev = "cosmic-drift"
	if out := app.shop.begin(ctx, StrategyBatch, ev, "FL-1-1", "carol").finish(ctx); !out.Won {
		t.Fatalf("purchase: %s", out.Message)
	}
	tickets, err := app.shop.ticketsOf(ctx, ev)
	if err != nil || len(tickets) != 1 {
		t.Fatalf("tickets %v, %v", tickets, err)
	}
	app.switches.MessagingDown.Store(true)
	lost, err := transferDirect(ctx, app.shop, app.messenger, "Cosmic Drift Live", ev, tickets[0].ID, "carol", "dave")
	app.switches.MessagingDown.Store(false)
	if err != nil || lost != 2 {
		t.Fatalf("direct transfer: lost %d, %v; want 2 lost", lost, err)
	}
	after, err := app.shop.ticketsOf(ctx, ev)
	if err != nil || after[0].OwnerID != "dave" {
		t.Fatalf("the ticket belongs to %q (%v), want dave", after[0].OwnerID, err)
	}
	st, err := app.relay.Stats(ctx)
	if err != nil || st.Unsent != 0 {
		t.Errorf("outbox backlog %d (%v): the direct transfer owes nothing it remembers", st.Unsent, err)
	}
	for _, u := range []string{"carol", "dave"} {
		if n, err := notifications(ctx, app.notes, u); err != nil || len(n) != 0 {
			t.Errorf("%s has %d notifications (%v), want none: they were lost", u, len(n), err)
		}
	}
}
