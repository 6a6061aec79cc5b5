package engine

import (
	"encoding/json"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

func TestContainersGetTheDefaultOfferUnlessTheyShareTheDatabases(t *testing.T) {
	ctx := t.Context()
	e, _ := Open(ctx, newTestStore(t), Options{})
	e.CreateDatabase(ctx, []byte(`{"id":"plain"}`), nil)
	e.CreateDatabase(ctx, []byte(`{"id":"shared"}`), &Throughput{Manual: 1000})
	if _, err := e.CreateContainer(ctx, "plain", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "shared", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil); err != nil {
		t.Fatal(err)
	}
	plain, _ := e.Container(ctx, "plain", "c")
	shared, _ := e.Container(ctx, "shared", "c")
	if offerOf(t, e, shared.RID) != nil {
		t.Fatal("a container sharing its database's throughput has an offer of its own")
	}
	o := offerOf(t, e, plain.RID)
	if o == nil {
		t.Fatal("a container created without throughput has no offer")
	}
	if n := o["content"].(map[string]any)["offerThroughput"]; n != float64(DefaultThroughput) {
		t.Fatalf("default offer %v, want %d RU/s", n, DefaultThroughput)
	}
	if ranges, _ := plain.PartitionKeyRanges(); len(ranges) != 1 {
		t.Fatalf("a default-offer container has %d ranges, want 1", len(ranges))
	}
}

func TestOpenGivesOfferlessContainersOfOlderStoresTheDefaultOffer(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	e, _ := Open(ctx, store, Options{})
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil)
	c, _ := e.Container(ctx, "db", "c")
	// Make the store look like an older build wrote it: no offer.
	b := store.NewBatch()
	b.Delete(keys.OfferKey(c.offer))
	rec := c.record
	rec.Offer = ""
	raw, _ := json.Marshal(rec)
	b.Set(keys.ContainerKey(c.db.rid, c.ID), raw)
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	e.Close()

	e2, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if offerOf(t, e2, c.RID) == nil {
		t.Fatal("Open left a container of an older store without an offer")
	}
	c2, _ := e2.Container(ctx, "db", "c")
	e2.Close()
	// The migration is stored: a third Open finds the same offer, not a new one.
	e3, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e3.ListOffers(ctx)); n != 1 {
		t.Fatalf("%d offers after two reopens, want 1", n)
	}
	c3, _ := e3.Container(ctx, "db", "c")
	if c3.offer != c2.offer {
		t.Fatalf("the offer changed across reopen: %s then %s", c2.offer, c3.offer)
	}
	// Deleting the container deletes the migrated offer.
	if err := e3.DeleteContainer(ctx, "db", "c", ""); err != nil {
		t.Fatal(err)
	}
	if n := len(e3.ListOffers(ctx)); n != 0 {
		t.Fatalf("%d offers after deleting the container, want 0", n)
	}
}

func TestOfferReplaceValidatesThroughput(t *testing.T) {
	ctx := t.Context()
	e, _ := Open(ctx, newTestStore(t), Options{})
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}`), nil)
	c, _ := e.Container(ctx, "db", "c")
	for _, tt := range []struct {
		content string
		status  int
	}{
		{`{"offerThroughput":399}`, 400},
		{`{"offerThroughput":450}`, 400},
		{`{"offerThroughput":"500"}`, 400},
		{`{"offerAutopilotSettings":{"maxThroughput":4000}}`, 400},
		{`{"offerThroughput":500}`, 0},
	} {
		_, err := e.ReplaceOffer(ctx, c.offer, []byte(`{"content":`+tt.content+`}`), "")
		if got := statusOf(err); got != tt.status {
			t.Errorf("replace with %s: %d (%v), want %d", tt.content, got, err, tt.status)
		}
	}
}

// offerOf returns the offer whose offerResourceId is rid, nil when none.
func offerOf(t *testing.T, e *Engine, rid string) map[string]any {
	ctx := t.Context()
	t.Helper()
	for _, o := range e.ListOffers(ctx) {
		var m map[string]any
		if err := json.Unmarshal(o.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m["offerResourceId"] == rid {
			return m
		}
	}
	return nil
}
