package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/inbox"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/outbox"
)

// A message the publisher keeps refusing is given up on after MaxAttempts:
// written to the dead-letter container once, handed to the hook, its
// record marked; while it is being retried the other customers' messages
// go on, and its own customer's later messages are published after it,
// in order.
func TestDeadLetterAndTheOtherKeysGoOn(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	dlq, err := outbox.CreateDeadLetterContainer(ctx, s.db, "dead-letters")
	if err != nil {
		t.Fatal(err)
	}
	const poison = "order-005" // customer c1's second order
	var mu sync.Mutex
	var published []string
	var hooked []outbox.DeadLetter
	before := 0 // messages published when the relay gave up on the poison one
	pub := publisherFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.ID == poison {
			return errors.New("the broker refuses this message: 413 too large")
		}
		published = append(published, m.ID)
		return nil
	})
	reg := prometheus.NewRegistry()
	metrics := outbox.NewMetrics(reg)
	r, err := outbox.NewRelay(s.client, s.orders, s.leases, pub, &outbox.RelayOptions{
		RetryInitial: 200 * time.Millisecond, RetryMax: 400 * time.Millisecond, MaxAttempts: 5,
		DeadLetters: dlq, Metrics: metrics, StatsInterval: time.Hour,
		OnDeadLetter: func(_ context.Context, d outbox.DeadLetter) error {
			mu.Lock()
			defer mu.Unlock()
			hooked = append(hooked, d)
			before = len(published)
			return nil
		},
		Processor: &changefeed.Options{PollInterval: 50 * time.Millisecond, AcquireInterval: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range orders {
		if err := s.place(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n, h := len(published), len(hooked)
		mu.Unlock()
		if n == orders-1 && h == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages published, %d dead-lettered", n, orders-1, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	d := hooked[0]
	got := slices.Clone(published)
	mu.Unlock()
	if d.ID != poison || d.Attempts != 5 || !strings.Contains(d.Error, "413") || d.Message.Key() != customerOf(5) || d.Container != "orders" {
		t.Fatalf("dead letter %+v", d)
	}
	// The other customers did not wait: all of theirs were out before the
	// relay gave up on the poison message (five attempts, over a second).
	others := 0
	for i := range orders {
		if customerOf(i) != customerOf(5) {
			others++
		}
	}
	// (c1's first order, before the poison one, may be out too.)
	if before < others {
		t.Fatalf("when the poison message was given up on, %d messages were out; want all %d of the other customers'", before, others)
	}
	// Its own customer's messages: in order, the later ones after it.
	var mine []string
	for _, id := range got {
		var i int
		fmt.Sscanf(id, "order-%d", &i)
		if customerOf(i) == customerOf(5) {
			mine = append(mine, id)
		}
	}
	if want := []string{"order-001", "order-009", "order-013", "order-017", "order-021"}; !slices.Equal(mine, want) {
		t.Fatalf("customer %s's messages published %v, want %v", customerOf(5), mine, want)
	}
	// One dead-letter document; the record marked; nothing unsent.
	item, err := dlq.ReadItem(ctx, azcosmos.NewPartitionKeyString(poison), poison, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored outbox.DeadLetter
	if err := json.Unmarshal(item.Value, &stored); err != nil || stored.Attempts != 5 || stored.Message.ID != poison {
		t.Fatalf("dead letter document %s (%v)", item.Value, err)
	}
	rec, err := s.orders.ReadItem(ctx, azcosmos.NewPartitionKeyString(customerOf(5)), "outbox:"+poison, nil)
	if err != nil || !strings.Contains(string(rec.Value), `"deadLetteredAt"`) || strings.Contains(string(rec.Value), `"sentAt"`) {
		t.Fatalf("the poison message's record: %s (%v)", rec.Value, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := r.Stats(ctx)
		if err == nil && st.Unsent == 0 && st.Lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v (%v), want nothing unsent or unread", st, err)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "coord_outbox_dead_lettered_total"); err != nil || n != 1 {
		t.Fatalf("coord_outbox_dead_lettered_total: %d series (%v)", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "coord_outbox_dead_lettered_total" && mf.GetMetric()[0].GetCounter().GetValue() != 1 {
			t.Fatalf("coord_outbox_dead_lettered_total = %v, want 1", mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
}

func cosmostestClient(t *testing.T) *azcosmos.Client { return cosmostest.Start(t).Client(t) }

func inboxFor(ctx context.Context, c *azcosmos.ContainerClient, consumer string) (*inbox.Inbox, error) {
	return inbox.New(ctx, c, consumer, nil)
}

// MaxAttempts without anywhere to put a message given up on is refused.
func TestMaxAttemptsNeedsADeadLetterDestination(t *testing.T) {
	s := newShop(t)
	_, err := outbox.NewRelay(s.client, s.orders, s.leases, outbox.NewMemoryPublisher(), &outbox.RelayOptions{MaxAttempts: 3})
	if err == nil {
		t.Fatal("MaxAttempts with neither DeadLetters nor OnDeadLetter: no error")
	}
}

// The outbox works in containers whose partition key is not a top-level
// string: a nested path with a number, and a hierarchical key of a string
// and a number. Records carry the key where the business documents do,
// the relay marks them (so it builds their partition key right), and the
// message says which partition it came from; the inbox handles messages in
// such a container too.
func TestPartitionKeysThatAreNotTopLevelStrings(t *testing.T) {
	c := cosmostestClient(t)
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "keys"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("keys")
	for _, tc := range []struct {
		name string
		def  azcosmos.PartitionKeyDefinition
		key  any
		doc  map[string]any
	}{
		{"nested", azcosmos.PartitionKeyDefinition{Paths: []string{"/customer/number"}},
			42, map[string]any{"customer": map[string]any{"number": 42}}},
		{"hierarchical", azcosmos.PartitionKeyDefinition{Paths: []string{"/tenant", "/user/id"}, Kind: azcosmos.PartitionKeyKindMultiHash, Version: 2},
			[]any{"acme", 7}, map[string]any{"tenant": "acme", "user": map[string]any{"id": 7}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: tc.name, PartitionKeyDefinition: tc.def}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: tc.name + "-leases",
				PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}}}, nil); err != nil {
				t.Fatal(err)
			}
			cont, _ := db.NewContainer(tc.name)
			leases, _ := db.NewContainer(tc.name + "-leases")
			box, err := outbox.New(ctx, cont)
			if err != nil {
				t.Fatal(err)
			}
			pk := azcosmos.NewPartitionKeyNumber(42)
			if tc.name == "hierarchical" {
				pk = azcosmos.NewPartitionKeyString("acme").AppendNumber(7)
			}
			b := cont.NewTransactionalBatch(pk)
			tc.doc["id"] = "order-1"
			doc, _ := json.Marshal(tc.doc)
			b.CreateItem(doc, nil)
			if err := box.Add(&b, tc.key, outbox.Message{ID: "m1", Topic: "placed"}, outbox.Message{ID: "m2", Topic: "paid"}); err != nil {
				t.Fatal(err)
			}
			if err := coord.Committed(cont.ExecuteTransactionalBatch(ctx, b, nil)); err != nil {
				t.Fatal(err)
			}
			mem := outbox.NewMemoryPublisher()
			r, err := outbox.NewRelay(c, cont, leases, mem, &outbox.RelayOptions{
				Processor: &changefeed.Options{PollInterval: 50 * time.Millisecond, AcquireInterval: 100 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = r.Run(runCtx); close(done) }()
			defer func() { stop(); <-done }()
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if err := mem.Wait(wctx, 2); err != nil {
				t.Fatal(err)
			}
			msgs := mem.Messages()
			if msgs[0].ID != "m1" || msgs[1].ID != "m2" {
				t.Fatalf("published %+v", msgs)
			}
			want, _ := json.Marshal(tc.key)
			if got, _ := json.Marshal(msgs[0].PartitionKey); string(got) != string(want) {
				t.Fatalf("message partition key %s, want %s", got, want)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if st, err := r.Stats(ctx); err == nil && st.Unsent == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the records were never marked sent")
				}
			}
			// The consumer's inbox in the same kind of container.
			in, err := inboxFor(ctx, cont, "billing")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := in.Handle(ctx, msgs[0].PartitionKey, msgs[0].ID, func(context.Context, *azcosmos.TransactionalBatch) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := in.Handled(ctx, tc.key, "m1"); err != nil || !ok {
				t.Fatalf("Handled: %v, %v", ok, err)
			}
		})
	}
	// A container partitioned by /id cannot hold an outbox.
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "by-id",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}}}, nil); err != nil {
		t.Fatal(err)
	}
	byID, _ := db.NewContainer("by-id")
	if _, err := outbox.New(ctx, byID); err == nil {
		t.Fatal("an outbox in a container partitioned by /id: no error")
	}
}
