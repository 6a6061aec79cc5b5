package throughput

import (
	"context"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/memory"
)

// clock is a manual clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_700_000_000, 0)} }
func open(t *testing.T) (*engine.Engine, context.Context) {
	t.Helper()
	ctx := t.Context()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); store.Close() })
	return eng, ctx
}

func container(t *testing.T, eng *engine.Engine, ctx context.Context, db, coll string, tp *engine.Throughput) *engine.Container {
	t.Helper()
	if _, err := eng.ReadDatabase(ctx, db); err != nil {
		if _, err := eng.CreateDatabase(ctx, []byte(`{"id":"`+db+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.CreateContainer(ctx, db, []byte(`{"id":"`+coll+`","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), tp); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Container(ctx, db, coll)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// spend admits and charges requests of ru each until one is refused, and
// returns how many were admitted and the wait the refusal named.
func spend(t *testing.T, e *Enforcer, ctx context.Context, c *engine.Container, rangeID string, ru float64) (int, time.Duration) {
	t.Helper()
	for n := 0; n < 100000; n++ {
		tk, wait := e.Admit(ctx, c, rangeID, "", "docs.upsert")
		if wait > 0 {
			return n, wait
		}
		tk.Done(ru)
	}
	t.Fatal("never refused")
	return 0, 0
}

func TestAPartitionSpendsItsRUPerSecondThenWaitsTheTimeItsBudgetNeeds(t *testing.T) {
	eng, ctx := open(t)
	clk := newClock()
	e := New(eng, Options{Now: clk.now})
	c := container(t, eng, ctx, "db", "c", &engine.Throughput{Manual: 400})
	n, wait := spend(t, e, ctx, c, "", 10)
	// 400 RU of budget, 10 RU each: 40 admitted (the first with 1 RU
	// reserved, so at most one more slips in before the budget shows spent).
	if n < 40 || n > 41 {
		t.Fatalf("admitted %d requests of 10 RU at 400 RU/s, want 40", n)
	}
	if wait <= 0 || wait > 30*time.Millisecond {
		t.Fatalf("retry after %v, want the few ms until the budget is above 0", wait)
	}
	clk.advance(wait)
	if _, w := e.Admit(ctx, c, "", "", "docs.upsert"); w != 0 {
		t.Fatalf("refused again after waiting the retry-after (%v more)", w)
	}
	// A second later the whole second's budget is back, no more.
	clk.advance(10 * time.Second)
	if n, _ := spend(t, e, ctx, c, "", 10); n < 40 || n > 41 {
		t.Fatalf("after idling, admitted %d, want one second's budget (40)", n)
	}
	if e.Throttled() != 2 {
		t.Fatalf("Throttled() = %d, want 2", e.Throttled())
	}
}

func TestTheBudgetIsDividedOverTheContainersPhysicalPartitions(t *testing.T) {
	eng, ctx := open(t)
	clk := newClock()
	e := New(eng, Options{Now: clk.now})
	// 12,000 RU/s: two ranges of 6,000 each, as the service divides it.
	c := container(t, eng, ctx, "db", "c", &engine.Throughput{Manual: 12000})
	ranges, _ := c.PartitionKeyRanges()
	if len(ranges) != 2 {
		t.Fatalf("%d ranges, want 2", len(ranges))
	}
	n0, _ := spend(t, e, ctx, c, ranges[0].ID, 100)
	n1, _ := spend(t, e, ctx, c, ranges[1].ID, 100)
	if n0 < 60 || n0 > 61 || n1 < 60 || n1 > 61 {
		t.Fatalf("admitted %d and %d requests of 100 RU, want 60 each (6,000 RU/s per range)", n0, n1)
	}
	// A request across the whole container needs every range's budget.
	if _, w := e.Admit(ctx, c, "", "", "docs.query"); w == 0 {
		t.Fatal("a cross-partition request was admitted with every range spent")
	}
}

func TestAutoscaleIsHeldToItsMaximumAndASharedDatabaseToOneBudget(t *testing.T) {
	eng, ctx := open(t)
	clk := newClock()
	e := New(eng, Options{Now: clk.now})
	auto := container(t, eng, ctx, "db", "auto", &engine.Throughput{AutoscaleMax: 4000})
	if n, _ := spend(t, e, ctx, auto, "", 100); n < 40 || n > 41 {
		t.Fatalf("autoscale 4000: admitted %d requests of 100 RU, want 40", n)
	}
	if _, err := eng.CreateDatabase(ctx, []byte(`{"id":"shared"}`), &engine.Throughput{Manual: 1000}); err != nil {
		t.Fatal(err)
	}
	a := container(t, eng, ctx, "shared", "a", nil)
	b := container(t, eng, ctx, "shared", "b", nil)
	// Containers made since the offers were read are found at the next
	// read, at most 100 ms later.
	clk.advance(200 * time.Millisecond)
	na, _ := spend(t, e, ctx, a, "", 10)
	if na < 100 || na > 101 {
		t.Fatalf("shared 1000 RU/s: container a admitted %d requests of 10 RU, want 100", na)
	}
	if _, w := e.Admit(ctx, b, "", "", "docs.upsert"); w == 0 {
		t.Fatal("container b was admitted with its database's shared budget spent by a")
	}
}

func TestAReplacedOfferTakesEffectWithinASecond(t *testing.T) {
	eng, ctx := open(t)
	clk := newClock()
	e := New(eng, Options{Now: clk.now})
	c := container(t, eng, ctx, "db", "c", &engine.Throughput{Manual: 400})
	spend(t, e, ctx, c, "", 10)
	var rid string
	for _, o := range eng.ListOffers(ctx) {
		rid = o.RID
	}
	if _, err := eng.ReplaceOffer(ctx, rid, []byte(`{"content":{"offerThroughput":1000}}`), ""); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Second)
	if n, _ := spend(t, e, ctx, c, "", 10); n < 100 || n > 101 {
		t.Fatalf("after the offer went to 1000 RU/s, admitted %d requests of 10 RU, want 100", n)
	}
}
