package main

import (
	"context"
	"testing"
	"time"
)

// TestStorm releases 1,000 buyers at once on 100 seats under each safe
// strategy: every seat is sold exactly once, every buyer gets an answer
// (sold or turned away, never an error), and the event reconciles. The
// latency percentiles are logged, not asserted: they depend on the machine.
func TestStorm(t *testing.T) {
	ta := startApp(t)
	for _, st := range []Strategy{StrategyETag, StrategyBatch} {
		t.Run(string(st), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			r, err := runStorm(ctx, ta.app.shop, st, 1000, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Answered != 1000 || r.Won+r.Taken+r.Failed != 1000 {
				t.Errorf("answered %d of 1000 buyers (won %d, turned away %d, errors %d)", r.Answered, r.Won, r.Taken, r.Failed)
			}
			if r.Failed != 0 {
				t.Errorf("%d buyers got an error instead of an answer", r.Failed)
			}
			if r.Won != 100 {
				t.Errorf("%d buyers were told they bought a seat; want 100, one per seat", r.Won)
			}
			if len(r.Integrity.DoubleSold) != 0 {
				t.Errorf("seats sold twice: %+v", r.Integrity.DoubleSold)
			}
			in := r.Integrity
			if !in.OK() || in.SeatsSold != 100 || in.Tickets != 100 || in.PaidOrders != 100 {
				t.Errorf("integrity: %+v", in)
			}
		})
	}
}

// TestRaceStrategies runs the race simulator under each strategy: the naive
// one sells the seat to every buyer, the safe ones to exactly one.
func TestRaceStrategies(t *testing.T) {
	ta := startApp(t)
	ctx := context.Background()
	users := []string{"alice", "bob", "carol", "dave"}
	for i, st := range strategies {
		code := seatCode("FC", 1, i+1)
		res, err := raceSeat(ctx, ta.app.shop, st, "cosmic-drift", code, users)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if st == StrategyNaive {
			want = len(users)
		}
		if res.Winners() != want || len(res.Holders) != want {
			t.Errorf("%s: %d winners, tickets held by %v; want %d", st, res.Winners(), res.Holders, want)
		}
		for _, o := range res.Outcomes {
			if o.Failed {
				t.Errorf("%s: %s got an error: %s", st, o.UserID, o.Message)
			}
		}
	}
	in, err := checkIntegrity(ctx, ta.app.shop, "cosmic-drift")
	if err != nil {
		t.Fatal(err)
	}
	if in.OK() || len(in.DoubleSold) != 1 || in.DoubleSold[0].Seat != "FC-1-1" {
		t.Errorf("integrity after one naive race: %+v; want exactly FC-1-1 sold more than once", in)
	}
}

// BenchmarkBuy measures one uncontended purchase under each safe strategy,
// the baseline for the storm's latencies.
func BenchmarkBuy(b *testing.B) {
	ta := startApp(b)
	ctx := context.Background()
	for _, st := range []Strategy{StrategyETag, StrategyBatch} {
		b.Run(string(st), func(b *testing.B) {
			eventID := stormEventID(st)
			seats := seatsOf(eventID, stormArena)
			for i := 0; b.Loop(); i++ {
				if i%len(seats) == 0 {
					b.StopTimer()
					if err := ta.app.shop.clearEvent(ctx, eventID); err != nil {
						b.Fatal(err)
					}
					if err := ta.app.shop.seedEvent(ctx, Event{ID: eventID, Name: "bench"}, seats); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if o := ta.app.shop.begin(ctx, st, eventID, seats[i%len(seats)].Code, "bench").finish(ctx); !o.Won {
					b.Fatalf("uncontended purchase lost: %s", o.Message)
				}
			}
		})
	}
}
