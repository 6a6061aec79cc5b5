package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/faults"
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
	told := buyNaive(t, ta.app, eventID, 40)
	in, err := checkIntegrity(t.Context(), ta.app.shop, eventID)
	if err != nil {
		t.Fatal(err)
	}
	if in.OK() {
		t.Fatalf("40 naive purchases under network faults reconcile: %+v; the buyers were told:%s", in, toldCounts(told))
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

// buyNaive has n buyers buy the event's first n seats at once, each its
// own, with the naive strategy, and returns what each was told.
func buyNaive(t *testing.T, app *App, eventID string, n int) []Outcome {
	t.Helper()
	seats := seatsOf(eventID, orionHall)[:n]
	told := make([]Outcome, len(seats))
	var wg sync.WaitGroup
	for i, s := range seats {
		wg.Go(func() {
			told[i] = app.shop.begin(t.Context(), StrategyNaive, eventID, s.Code, fmt.Sprintf("naive-%02d", i)).finish(t.Context())
		})
	}
	wg.Wait()
	return told
}

// toldCounts lists how many buyers were told each message.
func toldCounts(told []Outcome) string {
	n := map[string]int{}
	for _, o := range told {
		n[o.Message]++
	}
	var b strings.Builder
	for _, m := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(&b, "\n\t%d: %s", n[m], m)
	}
	return b.String()
}

// refuseBuyersAccountReads installs a rule through the admin API that
// answers 429 to the buyers' reads of the account (the read the SDK makes
// before a client's first request), times times (0: every one).
func refuseBuyersAccountReads(t *testing.T, admin *faultAdmin, times int64) {
	t.Helper()
	rule := faults.Rule{ID: "buyers-account-reads-refused",
		Condition: faults.Condition{UserAgent: buyerAgent, Operations: []string{"MetadataReadDatabaseAccount"}},
		Result:    faults.Result{Type: faults.TooManyRequests, RetryAfter: faults.Duration(5 * time.Millisecond)},
		Times:     times}
	if _, err := admin.call(t.Context(), http.MethodPost, "", map[string]any{"rules": []faults.Rule{rule}}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestBuyersClientIsReadyBeforeNetworkFaults: the buyers' SDK client has
// made its first request by the time the app is up, so a 429 storm turned
// on later never meets the account read the SDK makes before it. With
// every buyers' account read refused from then on, 40 naive buyers still
// read their seats and buy them. (The SDK keeps a refused first account
// read for five minutes and fails every request of the client with it: a
// storm that refused it would have every buyer fail without a write,
// whatever the strategy.)
func TestBuyersClientIsReadyBeforeNetworkFaults(t *testing.T) {
	ta := startApp(t)
	refuseBuyersAccountReads(t, ta.app.network, 0)
	told := buyNaive(t, ta.app, "nebula-nights", 40)
	for _, o := range told {
		if !o.Won {
			t.Fatalf("with the buyers' account reads refused after the app's start, the buyers were told:%s", toldCounts(told))
		}
	}
}

// TestBuyersClientIsReadyThoughItsFirstRequestIsRefused: an app started
// while the buyers' account reads are refused (a network faults switch
// left on by an earlier run) makes its buyers' client again until its
// first request is answered, instead of keeping one that fails every
// purchase for five minutes.
func TestBuyersClientIsReadyThoughItsFirstRequestIsRefused(t *testing.T) {
	emb, err := startEmbedded(t.Context())
	if err != nil {
		t.Fatalf("starting the embedded Orrery: %v", err)
	}
	t.Cleanup(emb.close)
	admin, err := newFaultAdmin(emb.endpoint, emb.key)
	if err != nil {
		t.Fatal(err)
	}
	// As many refusals as the SDK's tries of one account read.
	refuseBuyersAccountReads(t, admin, 4)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	app, err := newApp(ctx, emb.endpoint, emb.key, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatalf("starting the app: %v", err)
	}
	t.Cleanup(app.Close)
	if told := buyNaive(t, app, "nebula-nights", 1); !told[0].Won {
		t.Fatalf("a buyer of an app started while its buyers' account reads were refused was told:%s", toldCounts(told))
	}
}
