package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// RaceResult is what a race simulation shows: each buyer's outcome and who
// holds a ticket for the seat afterwards.
type RaceResult struct {
	Started  time.Time // when the buyers were released
	EventID  string
	Seat     Seat
	Strategy Strategy
	Outcomes []Outcome
	Holders  []string // owners of active tickets for the seat
}

// Winners counts the buyers who were told they bought the seat.
func (r RaceResult) Winners() int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Won {
			n++
		}
	}
	return n
}

// DoubleBooked reports whether more than one ticket exists for the seat.
func (r RaceResult) DoubleBooked() bool { return len(r.Holders) > 1 }

// raceSeat fires one buyer per user at one seat under a strategy. Every
// buyer makes its read before any buyer writes: the window that a real race
// only hits some of the time is made to happen every time, so the page shows
// what each strategy does when it does.
func raceSeat(ctx context.Context, shop *Shop, st Strategy, eventID, code string, users []string) (RaceResult, error) {
	attempts := make([]*attempt, len(users))
	started := time.Now()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() { attempts[i] = shop.begin(ctx, st, eventID, code, u) })
	}
	wg.Wait() // every read is done: now all buyers write at once
	outcomes := make([]Outcome, len(users))
	for i, a := range attempts {
		wg.Go(func() { outcomes[i] = a.finish(ctx) })
	}
	wg.Wait()

	res := RaceResult{Started: started, EventID: eventID, Strategy: st, Outcomes: outcomes}
	seat, _, err := shop.readSeat(ctx, eventID, code)
	if err != nil {
		return res, err
	}
	res.Seat = seat
	tickets, err := shop.ticketsOf(ctx, eventID)
	if err != nil {
		return res, err
	}
	for _, t := range tickets {
		if t.Seat == code && t.Status == "active" {
			res.Holders = append(res.Holders, t.OwnerID)
		}
	}
	slices.Sort(res.Holders)
	return res, nil
}
