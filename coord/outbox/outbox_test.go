package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/changefeed"
	"github.com/orrery-db/orrery/coord/inbox"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/outbox"
	"github.com/prometheus/client_golang/prometheus"
)

// server is the server of the runnable examples.
var server *cosmostest.Server

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runRelayWorker())
	}
	os.Exit(cosmostest.RunMain(m, func(s *cosmostest.Server) { server = s }))
}

// shop is an order service (orders and their outbox in "orders", by
// customer) and a consumer keeping customer balances with an inbox
// ("ledger", by customer), on a fresh server.
type shop struct {
	t      testing.TB
	server *cosmostest.Server
	client *azcosmos.Client
	db     *azcosmos.DatabaseClient
	orders *azcosmos.ContainerClient
	leases *azcosmos.ContainerClient
	ledger *azcosmos.ContainerClient
	box    *outbox.Outbox
	in     *inbox.Inbox

	mu      sync.Mutex
	effects int // consumer effects that committed
	changed chan struct{}
}

func newShop(t testing.TB) *shop {
	t.Helper()
	srv := cosmostest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	// A database of its own: the server may be shared (COORD_TEST_ENDPOINT).
	name := fmt.Sprintf("shop-%d", time.Now().UnixNano())
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: name}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase(name)
	mk := func(id, pk string) *azcosmos.ContainerClient {
		if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: id,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pk}}}, nil); err != nil {
			t.Fatal(err)
		}
		cc, _ := db.NewContainer(id)
		return cc
	}
	s := &shop{t: t, server: srv, client: c, db: db, orders: mk("orders", "/customer"), leases: mk("leases", "/id"), ledger: mk("ledger", "/customer"),
		changed: make(chan struct{}, 1)}
	var err error
	if s.box, err = outbox.New(ctx, s.orders); err != nil {
		t.Fatal(err)
	}
	if s.in, err = inbox.New(ctx, s.ledger, "billing", nil); err != nil {
		t.Fatal(err)
	}
	return s
}

type order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Seq      int    `json:"seq"`
	Status   string `json:"status"`
}

func customerOf(i int) string { return fmt.Sprintf("c%d", i%4) }
func orderID(i int) string    { return fmt.Sprintf("order-%03d", i) }

// place writes order i and its "order placed" message in one batch.
func (s *shop) place(ctx context.Context, i int) error {
	cust := customerOf(i)
	o, _ := json.Marshal(order{ID: orderID(i), Customer: cust, Seq: i, Status: "placed"})
	b := s.orders.NewTransactionalBatch(azcosmos.NewPartitionKeyString(cust))
	b.CreateItem(o, nil)
	payload, _ := json.Marshal(map[string]int{"seq": i})
	if err := s.box.Add(&b, cust, outbox.Message{ID: orderID(i), Topic: "order-placed", Payload: payload}); err != nil {
		return err
	}
	return coord.Committed(s.orders.ExecuteTransactionalBatch(ctx, b, nil))
}

// consume is the billing consumer: it adds one to the customer's order
// count, once per message, the marker in the same batch.
func (s *shop) consume(ctx context.Context, m outbox.Message) error {
	ran, err := s.in.Handle(ctx, m.PartitionKey, m.ID, func(ctx context.Context, b *azcosmos.TransactionalBatch) error {
		ops := azcosmos.PatchOperations{}
		ops.AppendIncrement("/orders", 1)
		b.PatchItem("balance", ops, nil)
		return nil
	})
	if ran {
		s.mu.Lock()
		s.effects++
		s.mu.Unlock()
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	return err
}

// openAccounts creates the consumer's balance documents.
func (s *shop) openAccounts() {
	for c := range 4 {
		b, _ := json.Marshal(map[string]any{"id": "balance", "customer": customerOf(c), "orders": 0})
		if _, err := s.ledger.CreateItem(context.Background(), azcosmos.NewPartitionKeyString(customerOf(c)), b, nil); err != nil {
			s.t.Fatal(err)
		}
	}
}

// balances is the consumer's effect: orders counted per customer.
func (s *shop) balances() map[string]int {
	out := map[string]int{}
	for c := range 4 {
		r, err := s.ledger.ReadItem(context.Background(), azcosmos.NewPartitionKeyString(customerOf(c)), "balance", nil)
		if err != nil {
			s.t.Fatal(err)
		}
		var d struct{ Orders int }
		_ = json.Unmarshal(r.Value, &d)
		out[customerOf(c)] = d.Orders
	}
	return out
}

// awaitEffects waits until n messages took effect, by the consumer's
// ledger: a consume whose commit applied but whose reply was lost (its
// relay crashed meanwhile) counts, as it does for the consumer.
func (s *shop) awaitEffects(n int) {
	s.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		got := 0
		for _, c := range s.balances() {
			got += c
		}
		if got >= n {
			return
		}
		select {
		case <-s.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			s.t.Fatalf("%d of %d messages took effect within 60 s", got, n)
		}
	}
}

// relay runs a relay instance until stop (graceful) or until ctx is
// cancelled from inside (a crash: the lease is left, and the next relay
// resumes from the last checkpoint).
type relay struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *shop) startRelay(name string, pub outbox.Publisher) *relay {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := outbox.NewRelay(s.client, s.orders, s.leases, pub, &outbox.RelayOptions{
		RetryInitial: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Processor: &changefeed.Options{Instance: name, PollInterval: 50 * time.Millisecond,
			AcquireInterval: 100 * time.Millisecond, RenewInterval: 500 * time.Millisecond, Expiration: 2 * time.Second}})
	if err != nil {
		s.t.Fatal(err)
	}
	rl := &relay{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rl.done)
		_ = r.Run(ctx)
	}()
	s.t.Cleanup(rl.stop)
	return rl
}

func (r *relay) stop() {
	r.cancel()
	<-r.done
}

// publisherFunc adapts a function to outbox.Publisher.
type publisherFunc func(ctx context.Context, m outbox.Message) error

func (f publisherFunc) Publish(ctx context.Context, m outbox.Message) error { return f(ctx, m) }

func TestBatchWithStaleETagLeavesNeitherBusinessNorOutboxRecord(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	if err := s.place(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pk := azcosmos.NewPartitionKeyString(customerOf(0))
	read, err := s.orders.ReadItem(ctx, pk, orderID(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := read.ETag
	// Someone else updates the order.
	other, _ := json.Marshal(order{ID: orderID(0), Customer: customerOf(0), Status: "cancelled"})
	if _, err := s.orders.ReplaceItem(ctx, pk, orderID(0), other, nil); err != nil {
		t.Fatal(err)
	}
	// Shipping with the stale ETag: a shipment record, the order update and
	// the "shipped" message, in one batch.
	b := s.orders.NewTransactionalBatch(pk)
	ship, _ := json.Marshal(map[string]string{"id": "shipment-0", "customer": customerOf(0)})
	b.CreateItem(ship, nil)
	shipped, _ := json.Marshal(order{ID: orderID(0), Customer: customerOf(0), Status: "shipped"})
	b.ReplaceItem(orderID(0), shipped, &azcosmos.TransactionalBatchItemOptions{IfMatchETag: &stale})
	if err := s.box.Add(&b, customerOf(0), outbox.Message{ID: "shipped-0", Topic: "order-shipped"}); err != nil {
		t.Fatal(err)
	}
	err = coord.Committed(s.orders.ExecuteTransactionalBatch(ctx, b, nil))
	var be *coord.BatchError
	if !errors.As(err, &be) || be.StatusCode != http.StatusPreconditionFailed || be.Index != 1 {
		t.Fatalf("commit with a stale ETag: %v, want a 412 on operation 1", err)
	}
	for _, id := range []string{"shipment-0", "outbox:shipped-0"} {
		_, err := s.orders.ReadItem(ctx, pk, id, nil)
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
			t.Fatalf("%s after the failed batch: %v, want 404", id, err)
		}
	}
	got, _ := s.orders.ReadItem(ctx, pk, orderID(0), nil)
	var o order
	_ = json.Unmarshal(got.Value, &o)
	if o.Status != "cancelled" {
		t.Fatalf("order status %q after the failed batch, want the other writer's \"cancelled\"", o.Status)
	}
}

const orders = 24

// checkExactlyOnce checks that every order took effect once and that each
// customer's messages were first published in the order written.
func (s *shop) checkExactlyOnce(published []outbox.Message) {
	s.t.Helper()
	want := map[string]int{}
	for i := range orders {
		want[customerOf(i)]++
	}
	got := s.balances()
	for c, n := range want {
		if got[c] != n {
			s.t.Errorf("customer %s counted %d orders, want %d (all: %v)", c, got[c], n, got)
		}
	}
	seen := map[string]bool{}
	last := map[string]int{}
	for _, m := range published {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		var p struct{ Seq int }
		_ = json.Unmarshal(m.Payload, &p)
		if l, ok := last[m.Key()]; ok && p.Seq < l {
			s.t.Errorf("customer %s: order %d published before %d", m.PartitionKey, l, p.Seq)
		}
		last[m.Key()] = p.Seq
	}
	if len(seen) != orders {
		s.t.Errorf("%d distinct messages published, want %d", len(seen), orders)
	}
}

func TestOutboxLosesNothingAcrossCrashes(t *testing.T) {
	const crashAt = 7 // the message around which the crash happens
	cases := []struct {
		name string
		run  func(t *testing.T, s *shop, mem *outbox.MemoryPublisher)
	}{
		{"crash after commit", func(t *testing.T, s *shop, mem *outbox.MemoryPublisher) {
			// The service commits every order and dies before anything is
			// published; a relay started later publishes them.
			for i := range orders {
				if err := s.place(context.Background(), i); err != nil {
					t.Fatal(err)
				}
			}
			pub := publisherFunc(func(ctx context.Context, m outbox.Message) error {
				if err := s.consume(ctx, m); err != nil {
					return err
				}
				return mem.Publish(ctx, m)
			})
			s.startRelay("r1", pub)
			s.awaitEffects(orders)
		}},
		{"crash after publish", func(t *testing.T, s *shop, mem *outbox.MemoryPublisher) {
			// The relay publishes message crashAt and dies before marking
			// it sent or checkpointing; the next relay publishes it (and
			// the rest of its batch) again.
			var r1 *relay
			var once sync.Once
			pub := publisherFunc(func(ctx context.Context, m outbox.Message) error {
				if err := s.consume(ctx, m); err != nil {
					return err
				}
				_ = mem.Publish(ctx, m)
				crashed := false
				if m.ID == orderID(crashAt) {
					once.Do(func() { crashed = true; r1.cancel() })
				}
				if crashed {
					return errors.New("relay killed after publishing")
				}
				return nil
			})
			r1 = s.startRelay("r1", pub)
			for i := range orders {
				if err := s.place(context.Background(), i); err != nil {
					t.Fatal(err)
				}
			}
			<-r1.done
			s.startRelay("r2", pub)
			s.awaitEffects(orders)
			if err := mem.Wait(context.Background(), orders+1); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range mem.Messages() {
				if m.ID == orderID(crashAt) {
					n++
				}
			}
			if n < 2 {
				t.Fatalf("message %d published %d times across the crash, want at least 2", crashAt, n)
			}
		}},
		{"crash during consumption", func(t *testing.T, s *shop, mem *outbox.MemoryPublisher) {
			// The consumer dies twice on message crashAt: once before its
			// batch commits, once after it commits but before it
			// acknowledges; the relay retries both times.
			attempts := 0
			var mu sync.Mutex
			pub := publisherFunc(func(ctx context.Context, m outbox.Message) error {
				mu.Lock()
				n := 0
				if m.ID == orderID(crashAt) {
					attempts++
					n = attempts
				}
				mu.Unlock()
				if n == 1 {
					return errors.New("consumer died before its write")
				}
				if err := s.consume(ctx, m); err != nil {
					return err
				}
				if n == 2 {
					return errors.New("consumer died before acknowledging")
				}
				return mem.Publish(ctx, m)
			})
			s.startRelay("r1", pub)
			for i := range orders {
				if err := s.place(context.Background(), i); err != nil {
					t.Fatal(err)
				}
			}
			s.awaitEffects(orders)
			if err := mem.Wait(context.Background(), orders); err != nil {
				t.Fatal(err)
			}
			if attempts < 3 {
				t.Fatalf("message %d delivered %d times, want at least 3", crashAt, attempts)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newShop(t)
			s.openAccounts()
			mem := outbox.NewMemoryPublisher()
			tc.run(t, s, mem)
			// Every message took effect; wait for its publication to be
			// recorded too (the publishers record after consuming).
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for distinct(mem.Messages()) < orders {
				n := len(mem.Messages())
				if err := mem.Wait(ctx, n+1); err != nil {
					t.Fatal(err)
				}
			}
			s.checkExactlyOnce(mem.Messages())
		})
	}
}

// TestNaiveDualWriteLosesMessages runs the "crash after commit" case with a
// service that writes the order and then publishes directly: the message of
// the order written just before the crash is lost for good.
func TestNaiveDualWriteLosesMessages(t *testing.T) {
	const crashAt = 7
	s := newShop(t)
	s.openAccounts()
	mem := outbox.NewMemoryPublisher()
	ctx := context.Background()
	for i := range orders {
		cust := customerOf(i)
		o, _ := json.Marshal(order{ID: orderID(i), Customer: cust, Seq: i, Status: "placed"})
		if _, err := s.orders.CreateItem(ctx, azcosmos.NewPartitionKeyString(cust), o, nil); err != nil {
			t.Fatal(err)
		}
		if i == crashAt {
			continue // the service dies here and restarts with the next order
		}
		payload, _ := json.Marshal(map[string]int{"seq": i})
		m := outbox.Message{ID: orderID(i), Topic: "order-placed", Payload: payload, PartitionKey: cust}
		if err := s.consume(ctx, m); err != nil {
			t.Fatal(err)
		}
		_ = mem.Publish(ctx, m)
	}
	// Nothing can republish it: the order exists, its message does not.
	if _, err := s.orders.ReadItem(ctx, azcosmos.NewPartitionKeyString(customerOf(crashAt)), orderID(crashAt), nil); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range s.balances() {
		total += n
	}
	if total != orders-1 || len(mem.Messages()) != orders-1 {
		t.Fatalf("naive dual write: %d effects, %d messages; want %d (one lost)", total, len(mem.Messages()), orders-1)
	}
}

func distinct(ms []outbox.Message) int {
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.ID] = true
	}
	return len(seen)
}

func TestRelayMetricsShowBacklogAndOldestUnsent(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	for i := range 5 {
		if err := s.place(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	down := true
	pub := publisherFunc(func(ctx context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return errors.New("broker unavailable")
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	metrics := outbox.NewMetrics(reg)
	r, err := outbox.NewRelay(s.client, s.orders, s.leases, pub, &outbox.RelayOptions{Metrics: metrics,
		StatsInterval: 50 * time.Millisecond, RetryInitial: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Processor: &changefeed.Options{PollInterval: 50 * time.Millisecond, AcquireInterval: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	value := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
		return -1
	}
	await := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: backlog %v, oldest %v s, lag %v, published %v, failures %v", what,
					value("coord_outbox_backlog"), value("coord_outbox_oldest_unsent_age_seconds"), value("coord_outbox_lag"),
					value("coord_outbox_published_total"), value("coord_outbox_publish_failures_total"))
			}
		}
	}
	// The broker is down: five unsent, aging, publication failing, and the
	// relay's own position still before them.
	await("while the broker is down", func() bool {
		return value("coord_outbox_backlog") == 5 && value("coord_outbox_oldest_unsent_age_seconds") >= 1 &&
			value("coord_outbox_publish_failures_total") >= 2 && value("coord_outbox_lag") >= 5
	})
	mu.Lock()
	down = false
	mu.Unlock()
	await("after the broker is back", func() bool {
		return value("coord_outbox_backlog") == 0 && value("coord_outbox_oldest_unsent_age_seconds") == 0 &&
			value("coord_outbox_published_total") == 5 && value("coord_outbox_lag") == 0
	})
}

func TestRelayPublishesToAWebhookWithRetries(t *testing.T) {
	s := newShop(t)
	ctx := context.Background()
	var mu sync.Mutex
	var got []outbox.Message
	var keys []string
	calls := 0
	all := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls%3 == 1 { // every third call fails
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		var m outbox.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		got = append(got, m)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(got) == 6 {
			close(all)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer hook.Close()
	for i := range 6 {
		if err := s.place(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	s.startRelay("r1", &outbox.WebhookPublisher{URL: hook.URL})
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of 6 messages reached the webhook", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	for i, m := range got {
		if keys[i] != m.ID || m.Topic != "order-placed" || len(m.Payload) == 0 {
			t.Fatalf("webhook got %+v with Idempotency-Key %q", m, keys[i])
		}
	}
	if calls < 8 {
		t.Fatalf("%d webhook calls for 6 messages with every third failing; the failures were not retried", calls)
	}
}
