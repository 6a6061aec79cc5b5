package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBestAvailable races buyers for the best seats: without the lock they
// all pick the same seats and the overlap is reported; with coord/lock each
// gets seats of their own, under distinct fencing tokens, and the event
// reconciles.
func TestBestAvailable(t *testing.T) {
	ta := startApp(t)
	ctx := context.Background()
	users := []string{"alice", "bob", "carol"}

	res, err := bestAvailable(ctx, ta.app.shop, nil, "nebula-nights", users, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Overlap) != 2 {
		t.Errorf("without the lock: overlap %v; want the two best seats, sold to every buyer", res.Overlap)
	}

	res, err = bestAvailable(ctx, ta.app.shop, ta.app.locker, "cosmic-drift", users, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Overlap) != 0 {
		t.Errorf("with the lock: overlap %v", res.Overlap)
	}
	var tokens []int64
	for _, o := range res.Outcomes {
		if !o.Won || len(o.Seats) != 2 {
			t.Errorf("with the lock: %s got %v: %s", o.UserID, o.Seats, o.Message)
		}
		tokens = append(tokens, o.Token)
	}
	slices.Sort(tokens)
	if len(slices.Compact(tokens)) != len(users) {
		t.Errorf("fencing tokens %v are not distinct", tokens)
	}
	in, err := checkIntegrity(ctx, ta.app.shop, "cosmic-drift")
	if err != nil {
		t.Fatal(err)
	}
	if !in.OK() || in.SeatsSold != 6 {
		t.Errorf("integrity with the lock: %+v", in)
	}
}

// TestActivityFeed checks that a purchase reaches the activity log through
// the change-feed processor.
func TestActivityFeed(t *testing.T) {
	ta := startApp(t)
	_, ch, cancel := ta.app.activity.subscribe()
	defer cancel()
	ctx := context.Background()
	out := ta.app.shop.begin(ctx, StrategyBatch, "starlight-symphony", "BA-2-5", "erin").finish(ctx)
	if !out.Won {
		t.Fatalf("purchase: %s", out.Message)
	}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e := <-ch:
			if strings.Contains(e.Text, "Erin paid $55 for Balcony, row 2, seat 5") {
				return
			}
		case <-deadline:
			t.Fatal("the purchase did not reach the activity log within 60 s")
		}
	}
}

// TestBestStalledHolder stalls a lock holder past its lease: the next buyer
// gets the lock and the seats, and the stalled one's late writes are fenced
// out, so the seats stay sold once and the event reconciles.
func TestBestStalledHolder(t *testing.T) {
	ta := startApp(t)
	ctx := context.Background()
	res, err := bestWithStall(ctx, ta.app.shop, ta.app.locker, "starlight-symphony", "alice", "bob", 2)
	if err != nil {
		t.Fatal(err)
	}
	zombie, next := res.Outcomes[0], res.Outcomes[1]
	if zombie.Won || len(zombie.Seats) != 0 || !strings.Contains(zombie.Message, "refused") {
		t.Errorf("the stalled buyer: %+v; want its writes refused", zombie)
	}
	if !next.Won || len(next.Seats) != 2 || next.Token <= zombie.Token {
		t.Errorf("the next buyer: %+v; want two seats under a newer token than %d", next, zombie.Token)
	}
	in, err := checkIntegrity(ctx, ta.app.shop, "starlight-symphony")
	if err != nil || !in.OK() || in.SeatsSold != 2 {
		t.Errorf("integrity %+v (%v)", in, err)
	}
	for _, code := range next.Seats {
		seat, _, err := ta.app.shop.readSeat(ctx, "starlight-symphony", code)
		if err != nil || seat.Holder != "bob" || seat.Fences["best-starlight-symphony"] != next.Token {
			t.Errorf("seat %s: %+v (%v); want Bob's, fenced at %d", code, seat, err, next.Token)
		}
	}
}
