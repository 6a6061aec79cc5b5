package main

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// setNetworkFaults flips the network faults switch through the site's form.
func setNetworkFaults(t *testing.T, c *client, on bool) {
	t.Helper()
	v := "0"
	if on {
		v = "1"
	}
	at, body := c.post("/switches", url.Values{"switch": {"network"}, "on": {v}, "back": {"/integrity"}})
	if at != "/integrity" {
		t.Fatalf("flipping the network faults switch ended at %s:\n%s", at, body)
	}
}

// toldTheTruth checks that every buyer of a storm was told what happened:
// a buyer told it bought the seat holds exactly one active ticket for it,
// and a buyer told otherwise holds none.
func toldTheTruth(t *testing.T, ta *testApp, r StormReport, outcomes map[string]Outcome) {
	t.Helper()
	tickets, err := ta.app.shop.ticketsOf(t.Context(), stormEventID(r.Strategy))
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for _, tk := range tickets {
		if tk.Status == "active" {
			held[tk.OwnerID]++
		}
	}
	for user, o := range outcomes {
		switch {
		case o.Won && held[user] != 1:
			t.Errorf("%s: %s was told %q but holds %d tickets", r.Strategy, user, o.Message, held[user])
		case !o.Won && held[user] != 0:
			t.Errorf("%s: %s was told %q but holds %d tickets", r.Strategy, user, o.Message, held[user])
		}
	}
}

// stormOutcomes runs a storm and keeps each buyer's outcome by user.
func stormOutcomes(t *testing.T, ta *testApp, st Strategy, buyers int) (StormReport, map[string]Outcome) {
	t.Helper()
	p := &stormProgress{}
	var mu sync.Mutex
	outcomes := map[string]Outcome{}
	p.onAnswer = func(o Outcome) {
		mu.Lock()
		outcomes[o.UserID] = o
		mu.Unlock()
	}
	r, err := runStorm(t.Context(), ta.app.shop, st, buyers, p)
	if err != nil {
		t.Fatalf("%s storm: %v (the app's own requests must not be faulted)", st, err)
	}
	t.Log(r)
	return r, outcomes
}

// TestSafeStrategiesReconcileUnderNetworkFaults turns the network faults
// switch on and storms a show under the ETag and batch strategies: replies
// are lost after their writes committed and 429s are sent, yet every seat
// is sold exactly once, the show reconciles, and every buyer is told the
// truth (a buyer whose reply was lost reads its order back instead of
// meeting its own write's 412 or 409). The rules hit the buyers' requests
// only: seeding and reconciling the show, on the app's own client, never
// fail. Switching off removes the rules.
func TestSafeStrategiesReconcileUnderNetworkFaults(t *testing.T) {
	ta := startApp(t)
	c := newTestClient(t, ta)
	setNetworkFaults(t, c, true)
	if _, body := c.get("/integrity"); !strings.Contains(body, "data-network-note") {
		t.Error("the integrity page does not say that network faults are on")
	}
	settled := 0
	for _, st := range []Strategy{StrategyETag, StrategyBatch} {
		r, outcomes := stormOutcomes(t, ta, st, 200)
		if !r.Integrity.OK() {
			t.Errorf("%s under network faults does not reconcile: %+v", st, r.Integrity)
		}
		if r.Won != r.Seats || r.Answered != r.Buyers {
			t.Errorf("%s under network faults: %d of %d seats sold, %d of %d buyers answered", st, r.Won, r.Seats, r.Answered, r.Buyers)
		}
		toldTheTruth(t, ta, r, outcomes)
		settled += r.Settled
	}
	hits, err := ta.app.network.hits(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if hits[ruleLostReply] == 0 || hits[ruleStorm429] == 0 || settled == 0 {
		t.Fatalf("the faults did not happen: hits %v, lost replies settled %d", hits, settled)
	}
	setNetworkFaults(t, c, false)
	if hits, err := ta.app.network.hits(t.Context()); err != nil || len(hits) != 0 {
		t.Fatalf("after switching off the rules are %v (%v); want none", hits, err)
	}
	if _, body := c.get("/integrity"); strings.Contains(body, "data-network-note") {
		t.Error("the integrity page says network faults are on after switching them off")
	}
}

// TestNaiveStrategyDoublesSalesUnderNetworkFaults is the failure the safe
// strategies avoid: the naive buyer retries a purchase whose reply was lost
// from the start, with a fresh order, so the seat it already bought is
// bought again: the integrity page shows the show not reconciling, a seat
// held twice by one buyer.
func TestNaiveStrategyDoublesSalesUnderNetworkFaults(t *testing.T) {
	ta := startApp(t)
	c := newTestClient(t, ta)
	setNetworkFaults(t, c, true)
	const eventID = "nebula-nights"
	seats := seatsOf(eventID, orionHall)[:40]
	var wg sync.WaitGroup
	for i, s := range seats {
		wg.Go(func() {
			ta.app.shop.begin(t.Context(), StrategyNaive, eventID, s.Code, fmt.Sprintf("naive-%02d", i)).finish(t.Context())
		})
	}
	wg.Wait()
	in, err := checkIntegrity(t.Context(), ta.app.shop, eventID)
	if err != nil {
		t.Fatal(err)
	}
	if in.OK() {
		t.Fatalf("40 naive purchases under network faults reconcile: %+v", in)
	}
	self := false
	for _, d := range in.DoubleSold {
		self = self || (len(d.Owners) == 2 && d.Owners[0] == d.Owners[1])
	}
	if in.SeatsOrdered <= in.SeatsSold && !self {
		t.Errorf("no seat was bought twice by its own buyer: %+v", in)
	}
	_, body := c.get("/integrity")
	if !strings.Contains(body, "Does not reconcile") {
		t.Error("the integrity page shows every show reconciled")
	}
}
