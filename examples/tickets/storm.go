package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// stormArena is the storm's venue: 100 seats.
var stormArena = Venue{
	Name:     "Storm Arena",
	Sections: []Section{{Code: "ST", Name: "Storm Floor", Rows: 10, Seats: 10, Price: 80}},
}

// StormReport is the result of one storm: many buyers released at once on
// few seats under one strategy.
type StormReport struct {
	Strategy Strategy
	Buyers   int
	Seats    int
	Won      int
	Taken    int
	Failed   int
	Answered int
	// Settled counts the writes whose reply was lost and whose fate the
	// buyer learned by reading back (network faults).
	Settled   int
	Integrity Integrity
	P50, P99  time.Duration
	Max       time.Duration
	Elapsed   time.Duration
}

// OK reports whether the storm sold every seat exactly once, answered every
// buyer and left the event reconciled.
func (r StormReport) OK() bool {
	return r.Answered == r.Buyers && r.Failed == 0 && r.Won == r.Seats && r.Integrity.OK()
}

// String is the report's one-line summary.
func (r StormReport) String() string {
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	return fmt.Sprintf("%-5s %d buyers, %d seats: %d sold, %d turned away, %d errors, %d answered, %d lost replies settled; double sales %d; integrity %v; latency p50 %v p99 %v max %v; %v in all: %s",
		r.Strategy, r.Buyers, r.Seats, r.Won, r.Taken, r.Failed, r.Answered, r.Settled, len(r.Integrity.DoubleSold), r.Integrity.OK(),
		r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond), r.Elapsed.Round(time.Millisecond), verdict)
}

// stormPrefix starts the event id of every storm's partition.
const stormPrefix = "storm-"

// stormEventID is the partition a storm under a strategy uses.
func stormEventID(st Strategy) string { return stormPrefix + string(st) }

// runStorm seeds a fresh 100-seat event and releases buyers at once, each on
// the seat buyer%100, so ten buyers want every seat. progress, when not nil,
// hears of the release and of every answer as it comes.
func runStorm(ctx context.Context, shop *Shop, st Strategy, buyers int, progress *stormProgress) (StormReport, error) {
	eventID := stormEventID(st)
	if err := shop.clearEvent(ctx, eventID); err != nil {
		return StormReport{}, err
	}
	seats := seatsOf(eventID, stormArena)
	ev := Event{ID: eventID, Name: "Storm (" + string(st) + ")", Artist: "Load test", Venue: stormArena.Name, Date: time.Now().UTC()}
	if err := shop.seedEvent(ctx, ev, seats); err != nil {
		return StormReport{}, err
	}
	outcomes := make([]Outcome, buyers)
	answered := make([]bool, buyers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			<-start
			user := fmt.Sprintf("buyer-%04d", i)
			outcomes[i] = shop.begin(ctx, st, eventID, seats[i%len(seats)].Code, user).finish(ctx)
			answered[i] = true
			progress.answer(outcomes[i])
		})
	}
	began := time.Now()
	progress.release(began)
	close(start)
	wg.Wait()
	r := StormReport{Strategy: st, Buyers: buyers, Seats: len(seats), Elapsed: time.Since(began)}
	lat := make([]time.Duration, 0, buyers)
	for i, o := range outcomes {
		if answered[i] {
			r.Answered++
		}
		switch {
		case o.Won:
			r.Won++
		case o.Failed:
			r.Failed++
		default:
			r.Taken++
		}
		lat = append(lat, o.Latency)
		r.Settled += o.Trace.Settled
	}
	slices.Sort(lat)
	r.P50, r.P99, r.Max = percentile(lat, 0.50), percentile(lat, 0.99), lat[len(lat)-1]
	in, err := checkIntegrity(ctx, shop, eventID)
	r.Integrity = in
	return r, err
}

// percentile returns the p-quantile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// stormAll runs a storm under each safe strategy and prints the reports.
func stormAll(ctx context.Context, shop *Shop, buyers int, w io.Writer) error {
	failed := false
	for _, st := range []Strategy{StrategyETag, StrategyBatch} {
		r, err := runStorm(ctx, shop, st, buyers, nil)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, r)
		failed = failed || !r.OK()
	}
	if failed {
		return fmt.Errorf("storm: a safe strategy sold a seat twice, left a buyer unanswered or did not reconcile")
	}
	return nil
}
