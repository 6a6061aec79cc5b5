package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/coord/internal/cosmostest"
)

// fixture is a monitored container (partitioned by /pk) and a lease
// container (partitioned by /id) on a fresh server.
type fixture struct {
	t         *testing.T
	client    *azcosmos.Client
	monitored *azcosmos.ContainerClient
	leases    *azcosmos.ContainerClient
}

func newFixture(t *testing.T, throughput int32) *fixture {
	t.Helper()
	s := cosmostest.Start(t)
	c := s.Client(t)
	ctx := context.Background()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := c.NewDatabase("db")
	var opts *azcosmos.CreateContainerOptions
	if throughput > 0 {
		tp := azcosmos.NewManualThroughputProperties(throughput)
		opts = &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}
	}
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "orders",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "leases",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/id"}}}, nil); err != nil {
		t.Fatal(err)
	}
	m, _ := db.NewContainer("orders")
	l, _ := db.NewContainer("leases")
	return &fixture{t: t, client: c, monitored: m, leases: l}
}

// change is one written document: the seq-th change of partition key pk.
type change struct {
	ID  string `json:"id"`
	PK  string `json:"pk"`
	Seq int    `json:"seq"`
}

// write writes changes from..to-1 of each of pks partition keys, each key's
// in order, the keys concurrently.
func (f *fixture) write(pks, from, to int) {
	f.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, pks)
	for k := range pks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("pk%02d", k)
			for s := from; s < to; s++ {
				b, _ := json.Marshal(change{ID: fmt.Sprintf("%s-%04d", pk, s), PK: pk, Seq: s})
				if _, err := f.monitored.CreateItem(context.Background(), azcosmos.NewPartitionKeyString(pk), b, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
}

// recorder collects deliveries and checks, as they arrive, that per
// partition key nothing is skipped: a change delivered for the first time is
// always the next one of its key.
type recorder struct {
	mu        sync.Mutex
	next      map[string]int // per key, the seq of the next first delivery
	delivered int            // distinct changes delivered
	total     int            // deliveries, duplicates included
	errs      []string
	changed   chan struct{}
}

func newRecorder() *recorder {
	return &recorder{next: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) handler(ctx context.Context, b Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, raw := range b.Changes {
		var c change
		if err := json.Unmarshal(raw, &c); err != nil {
			r.errs = append(r.errs, err.Error())
			continue
		}
		r.total++
		switch n := r.next[c.PK]; {
		case c.Seq == n:
			r.next[c.PK] = n + 1
			r.delivered++
		case c.Seq > n:
			r.errs = append(r.errs, fmt.Sprintf("%s: change %d delivered before %d", c.PK, c.Seq, n))
		}
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return nil
}

// await waits until n distinct changes were delivered.
func (r *recorder) await(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		r.mu.Lock()
		got, errs := r.delivered, r.errs
		r.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("delivery out of order: %v", errs[:min(len(errs), 5)])
		}
		if got >= n {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("%d of %d changes delivered within %v", got, n, within)
		}
	}
}

// fastOptions are short intervals so a test sees leases move within seconds.
func fastOptions(instance string) Options {
	return Options{Name: "proc", Instance: instance, PollInterval: 50 * time.Millisecond,
		AcquireInterval: 200 * time.Millisecond, RenewInterval: 300 * time.Millisecond, Expiration: 3 * time.Second}
}

// worker is a running processor instance.
type worker struct {
	p      *Processor
	cancel context.CancelFunc
	done   chan error
}

func (f *fixture) startWorker(name string, h Handler, tune func(*Options)) *worker {
	o := fastOptions(name)
	if tune != nil {
		tune(&o)
	}
	p := New(f.monitored, f.leases, h, o)
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- p.Run(ctx) }()
	f.t.Cleanup(func() { w.stop() })
	return w
}

// stop stops the worker and releases its leases.
func (w *worker) stop() {
	w.cancel()
	<-w.done
	w.done <- nil // later stops return at once
}

// crash stops the worker without releasing its leases, as a killed process.
func (w *worker) crash() {
	w.p.kill()
	w.stop()
}

// owners returns, per instance, the number of leases it holds in the store.
func (f *fixture) owners() (map[string]int, int) {
	f.t.Helper()
	props, err := f.monitored.Read(context.Background(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	st := &store{c: f.leases, prefix: leasePrefix("proc", "", props.ContainerProperties.ResourceID)}
	all, err := st.list(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	m := map[string]int{}
	for _, l := range all {
		m[l.Owner]++
	}
	return m, len(all)
}

// awaitOwners polls the lease store until ok accepts the ownership.
func (f *fixture) awaitOwners(within time.Duration, ok func(map[string]int, int) bool) map[string]int {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		m, n := f.owners()
		if ok(m, n) {
			return m
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("lease ownership did not converge within %v: %v", within, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// even reports whether every lease is owned by one of the named workers and
// each holds floor or ceil of its share.
func even(names []string) func(map[string]int, int) bool {
	return func(m map[string]int, n int) bool {
		if n == 0 || m[""] > 0 {
			return false
		}
		lo, hi := n/len(names), (n+len(names)-1)/len(names)
		sum := 0
		for _, w := range names {
			if m[w] < lo || m[w] > hi {
				return false
			}
			sum += m[w]
		}
		return sum == n
	}
}

func testProcessorFleet(t *testing.T, throughput int32, wantRanges int) {
	f := newFixture(t, throughput)
	ranges, err := f.monitored.ReadFeedRanges(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) < wantRanges {
		t.Skipf("the server gave the container %d feed range(s) at %d RU/s; this case needs %d", len(ranges), throughput, wantRanges)
	}
	const pks = 24
	rec := newRecorder()
	f.write(pks, 0, 10) // before the processor starts: read from the beginning
	names := []string{"w0", "w1", "w2", "w3"}
	workers := map[string]*worker{}
	for _, n := range names {
		workers[n] = f.startWorker(n, rec.handler, nil)
	}
	f.write(pks, 10, 30) // while it runs
	rec.await(t, pks*30, 60*time.Second)
	owned := f.awaitOwners(60*time.Second, even(names))
	t.Logf("%d ranges, ownership %v", len(ranges), owned)

	// Kill the instance holding the most leases: they move once expired.
	victim := names[0]
	for _, n := range names {
		if owned[n] > owned[victim] {
			victim = n
		}
	}
	workers[victim].crash()
	f.write(pks, 30, 40)
	survivors := []string{}
	for _, n := range names {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	owned = f.awaitOwners(60*time.Second, even(survivors))
	rec.await(t, pks*40, 60*time.Second)
	if owned[victim] != 0 {
		t.Fatalf("the killed instance still holds %d leases", owned[victim])
	}
}

func TestProcessorFleetOnTheContainersRanges(t *testing.T) { testProcessorFleet(t, 0, 1) }

// TestProcessorFleetOnSixteenRanges runs when the server gives a container
// created with 160,000 RU/s sixteen physical ranges, as the service does.
func TestProcessorFleetOnSixteenRanges(t *testing.T) { testProcessorFleet(t, 160000, 16) }

func TestEstimatorCountsUndeliveredChanges(t *testing.T) {
	f := newFixture(t, 0)
	rec := newRecorder()
	est := NewEstimator(f.monitored, f.leases, Options{Name: "proc"})
	f.write(5, 0, 10)
	w := f.startWorker("w0", rec.handler, nil)
	rec.await(t, 50, 60*time.Second)
	w.stop()
	ctx := context.Background()
	if n, err := est.Total(ctx); err != nil || n != 0 {
		t.Fatalf("estimate after delivering everything: %d, %v; want 0", n, err)
	}
	f.write(5, 10, 17)
	if n, err := est.Total(ctx); err != nil || n != 35 {
		t.Fatalf("estimate with 35 undelivered changes: %d, %v", n, err)
	}
	// An update of a delivered document is one more change.
	b, _ := json.Marshal(change{ID: "pk00-0000", PK: "pk00", Seq: 0})
	if _, err := f.monitored.UpsertItem(ctx, azcosmos.NewPartitionKeyString("pk00"), b, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := est.Total(ctx); err != nil || n != 36 {
		t.Fatalf("estimate with 36 undelivered changes: %d, %v", n, err)
	}
	f.startWorker("w1", rec.handler, nil)
	rec.await(t, 85, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := est.Total(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("estimate stays %d after delivery", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
