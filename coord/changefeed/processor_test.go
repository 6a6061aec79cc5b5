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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fixture is a monitored container (partitioned by /pk) and a lease
// container (partitioned by /id) on a fresh server.
type fixture struct {
	t               testing.TB
	server          *cosmostest.Server
	client          *azcosmos.Client
	monitoredClient *azcosmos.Client // the client monitored was made from
	monitored       *azcosmos.ContainerClient
	leases          *azcosmos.ContainerClient
}

func newFixture(t testing.TB, throughput int32) *fixture {
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
	return &fixture{t: t, server: s, client: c, monitoredClient: c, monitored: m, leases: l}
}

// prefix is the lease prefix of the processor with that name over the
// monitored container, as the processor derives it.
func (f *fixture) prefix(name string) string {
	f.t.Helper()
	host, err := HostOf(f.monitoredClient.Endpoint())
	if err != nil {
		f.t.Fatal(err)
	}
	_, prefix, err := prefixOf(context.Background(), f.monitored, name, host)
	if err != nil {
		f.t.Fatal(err)
	}
	return prefix
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
func (r *recorder) await(t testing.TB, n int, within time.Duration) {
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
	return Options{Instance: instance, PollInterval: 50 * time.Millisecond,
		AcquireInterval: 200 * time.Millisecond, RenewInterval: 300 * time.Millisecond, Expiration: 3 * time.Second}
}

// worker is a running processor instance.
type worker struct {
	p      *Processor
	cancel context.CancelFunc
	done   chan error
}

// startWorker starts an instance of the processor "proc".
func (f *fixture) startWorker(instance string, h Handler, tune func(*Options)) *worker {
	return f.startNamed("proc", instance, h, tune)
}

// startNamed starts an instance of the processor with that name.
func (f *fixture) startNamed(name, instance string, h Handler, tune func(*Options)) *worker {
	f.t.Helper()
	o := fastOptions(instance)
	if tune != nil {
		tune(&o)
	}
	p, err := New(f.monitoredClient, f.monitored, f.leases, name, h, &o)
	if err != nil {
		f.t.Fatal(err)
	}
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

// leaseList returns the leases of the processor "proc".
func (f *fixture) leaseList() []*Lease {
	f.t.Helper()
	st := &store{c: f.leases, prefix: f.prefix("proc")}
	all, err := st.list(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return all
}

// owners returns, per instance, the number of leases it holds in the store.
func (f *fixture) owners() (map[string]int, int) {
	f.t.Helper()
	all := f.leaseList()
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
	// A lease moves no earlier than Expiration after its owner's last
	// write of it: the earliest of those bounds them all.
	lastWrite := time.Now()
	for _, l := range f.leaseList() {
		if l.Owner == victim && l.Timestamp.Before(lastWrite) {
			lastWrite = l.Timestamp
		}
	}
	f.write(pks, 30, 40)
	survivors := []string{}
	for _, n := range names {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	owned = f.awaitOwners(60*time.Second, even(survivors))
	if exp := fastOptions("").Expiration; time.Since(lastWrite) < exp {
		t.Fatalf("the killed instance's leases moved %v after its last renewal, before they expired (%v)", time.Since(lastWrite), exp)
	}
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
	est, err := NewEstimator(f.client, f.monitored, f.leases, "proc", nil)
	if err != nil {
		t.Fatal(err)
	}
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

func pkOf(pk string) azcosmos.PartitionKey { return azcosmos.NewPartitionKeyString(pk) }

func TestProcessorMetrics(t *testing.T) {
	f := newFixture(t, 0)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	rec := newRecorder()
	var mu sync.Mutex
	failOnce, failAll := true, false
	h := func(ctx context.Context, b Batch) error {
		mu.Lock()
		fail := failOnce || failAll
		failOnce = false
		mu.Unlock()
		if fail {
			return fmt.Errorf("the handler fails its first batch")
		}
		return rec.handler(ctx, b)
	}
	f.write(3, 0, 5)
	f.startWorker("w0", h, func(o *Options) { o.Metrics = m; o.LagInterval = 100 * time.Millisecond })
	rec.await(t, 15, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		owned := testutil.ToFloat64(m.leasesOwned.WithLabelValues("proc"))
		changes := testutil.ToFloat64(m.changes.WithLabelValues("proc"))
		handled := testutil.ToFloat64(m.handledBatches.WithLabelValues("proc"))
		failed := testutil.ToFloat64(m.failedBatches.WithLabelValues("proc"))
		lag := testutil.ToFloat64(m.lag.WithLabelValues("proc", "-FF"))
		if owned == 1 && changes == 15 && handled >= 1 && failed == 1 && lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("owned %v, changes %v, handled %v, failed %v, lag %v; want 1, 15, >=1, 1, 0", owned, changes, handled, failed, lag)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// While the handler fails, the undelivered changes show as lag.
	mu.Lock()
	failAll = true
	mu.Unlock()
	f.write(2, 5, 7)
	for deadline := time.Now().Add(30 * time.Second); testutil.ToFloat64(m.lag.WithLabelValues("proc", "-FF")) != 4; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lag %v with 4 undelivered changes", testutil.ToFloat64(m.lag.WithLabelValues("proc", "-FF")))
		}
	}
}

// ids returns the ids delivered to a handler, through a channel.
func collect() (Handler, func(t *testing.T, n int) []string) {
	var mu sync.Mutex
	var got []string
	more := make(chan struct{}, 1)
	h := func(_ context.Context, b Batch) error {
		mu.Lock()
		for _, raw := range b.Changes {
			var c change
			_ = json.Unmarshal(raw, &c)
			got = append(got, c.ID)
		}
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
		return nil
	}
	wait := func(t *testing.T, n int) []string {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			mu.Lock()
			out := append([]string(nil), got...)
			mu.Unlock()
			if len(out) >= n {
				return out
			}
			select {
			case <-more:
			case <-deadline:
				t.Fatalf("%d of %d changes delivered: %v", len(out), n, out)
			}
		}
	}
	return h, wait
}

func TestStartFromNowAndFromATime(t *testing.T) {
	f := newFixture(t, 0)
	f.write(1, 0, 3) // pk00-0000..0002: before everything
	// The next whole second, after the first writes.
	at := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at) + 10*time.Millisecond) // let the server's clock pass it
	f.write(1, 3, 5)                                 // pk00-0003..0004: at or after it

	fromTime, waitTime := collect()
	f.startNamed("since", "t", fromTime, func(o *Options) { o.StartFrom = StartFromTime(at) })
	if got := waitTime(t, 2); len(got) != 2 || got[0] != "pk00-0003" || got[1] != "pk00-0004" {
		t.Fatalf("from %v: delivered %v, want pk00-0003, pk00-0004", at, got)
	}

	fromNow, waitNow := collect()
	f.startNamed("now", "n", fromNow, func(o *Options) { o.StartFrom = StartFromNow() })
	// "Now" is pinned when the leases are created: wait for them.
	st := &store{c: f.leases, prefix: f.prefix("now")}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all, err := st.list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(all) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leases created")
		}
	}
	f.write(1, 5, 6)
	if got := waitNow(t, 1); len(got) != 1 || got[0] != "pk00-0005" {
		t.Fatalf("from now: delivered %v, want pk00-0005", got)
	}
}

// TestTakesOverADotNetLease seeds the lease store as a .NET processor leaves
// it (its ".info", a version 0 lease with its legacy and unknown properties,
// owned by a .NET host that stopped renewing): a Go instance of the same
// processor takes the expired lease over, continues from the .NET
// checkpoint, and keeps the document's .NET shape.
func TestTakesOverADotNetLease(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	f.write(1, 0, 3)
	// The .NET processor's checkpoint: after the first three changes.
	r := azcosmos.FeedRange{MinInclusive: "", MaxExclusive: "FF"}
	resp, err := f.monitored.ReadChangeFeed(ctx, &azcosmos.ChangeFeedOptions{MaxItemCount: 3, FeedRange: &r})
	if err != nil || len(resp.Items) != 3 {
		t.Fatalf("reading the first page: %v, %d items", err, len(resp.Items))
	}
	checkpoint := string(resp.ETag)
	f.write(1, 3, 5)

	prefix := f.dotnetPrefix("proc")
	id := prefix + "..0"
	stale := time.Now().Add(-10 * time.Minute).UTC().Format("2006-01-02T15:04:05.0000000Z")
	cp, _ := json.Marshal(checkpoint)
	lease := `{"id":"` + id + `","version":0,"LeaseToken":"0","PartitionId":"0",` +
		`"FeedRange":{"Range":{"min":"","max":"FF"}},"Owner":"dotnet-1","ContinuationToken":` + string(cp) + `,` +
		`"properties":{"tenant":"t1"},"timestamp":"` + stale + `","Mode":"Incremental Feed"}`
	for _, doc := range []string{lease, `{"id":"` + prefix + `.info"}`} {
		var d struct{ ID string }
		_ = json.Unmarshal([]byte(doc), &d)
		if _, err := f.leases.CreateItem(ctx, azcosmos.NewPartitionKeyString(d.ID), []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}

	h, wait := collect()
	f.startWorker("go-1", h, nil)
	if got := wait(t, 2); got[0] != "pk00-0003" || got[1] != "pk00-0004" {
		t.Fatalf("after the .NET checkpoint: delivered %v, want pk00-0003, pk00-0004", got)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		item, err := f.leases.ReadItem(ctx, azcosmos.NewPartitionKeyString(id), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(item.Value, &m)
		if m["Owner"] == "go-1" && m["ContinuationToken"] != checkpoint {
			if m["PartitionId"] != "0" || m["LeaseToken"] != "0" || m["version"] != 0.0 ||
				m["properties"].(map[string]any)["tenant"] != "t1" || m["Mode"] != "Incremental Feed" {
				t.Fatalf("the lease lost its .NET shape: %s", item.Value)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not taken over and checkpointed: %s", item.Value)
		}
	}
}
