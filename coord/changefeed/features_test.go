package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// ids is what a handler saw: the ids of the changes, in delivery order.
type ids struct {
	mu      sync.Mutex
	got     []string
	batches []Batch
	more    chan struct{}
}

func newIDs() *ids { return &ids{more: make(chan struct{}, 1)} }

func (s *ids) add(b Batch) {
	s.mu.Lock()
	for _, raw := range b.Changes {
		var c change
		_ = json.Unmarshal(raw, &c)
		s.got = append(s.got, c.ID)
	}
	s.batches = append(s.batches, b)
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

func (s *ids) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		s.mu.Lock()
		out := slices.Clone(s.got)
		s.mu.Unlock()
		if len(out) >= n {
			return out
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("%d of %d changes delivered: %v", len(out), n, out)
		}
	}
}

func (s *ids) lastBatch() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches[len(s.batches)-1]
}

func (s *ids) batch(i int) Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches[i]
}

// With ManualCheckpoint a lease advances only when the handler checkpoints:
// a processor restarted after delivering everything without checkpointing
// gets everything again; one restarted after the handler checkpointed a
// batch (after returning from it, from another goroutine) resumes after that
// batch; a handler error resumes from the last checkpoint, not from the
// failed batch; and a batch of a lease no longer held cannot be
// checkpointed.
func TestManualCheckpoints(t *testing.T) {
	f := newFixture(t, 0)
	f.write(1, 0, 20)
	manual := func(o *Options) { o.ManualCheckpoint = true; o.MaxItems = 5 }

	first := newIDs()
	w := f.startWorker("m1", func(_ context.Context, b Batch) error { first.add(b); return nil }, manual)
	if got := first.wait(t, 20); len(got) != 20 {
		t.Fatalf("first run: %v", got)
	}
	w.stop()
	if err := first.lastBatch().Checkpoint(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("checkpoint of a released lease's batch: %v, want ErrLeaseLost", err)
	}

	// Nothing was checkpointed: all twenty again. This time the second
	// batch is checkpointed, later and from another goroutine.
	second := newIDs()
	w = f.startWorker("m2", func(_ context.Context, b Batch) error { second.add(b); return nil }, manual)
	if got := second.wait(t, 20); got[0] != "pk00-0000" {
		t.Fatalf("second run started at %s, want the beginning", got[0])
	}
	done := make(chan error)
	go func() { done <- second.batch(1).Checkpoint(context.Background()) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// An older batch checkpointed after a newer one changes nothing.
	if err := second.batch(0).Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.stop()

	// Resumes after the second batch (changes 10..19); the handler fails
	// its second batch once, after checkpointing its first.
	third := newIDs()
	failed := false
	w = f.startWorker("m3", func(_ context.Context, b Batch) error {
		third.add(b)
		third.mu.Lock()
		n := len(third.batches)
		third.mu.Unlock()
		switch {
		case n == 1:
			return b.Checkpoint(context.Background())
		case n == 2 && !failed:
			failed = true
			return errors.New("the sink is down")
		}
		return nil
	}, manual)
	got := third.wait(t, 15)
	want := []string{"pk00-0010", "pk00-0011", "pk00-0012", "pk00-0013", "pk00-0014",
		"pk00-0015", "pk00-0016", "pk00-0017", "pk00-0018", "pk00-0019",
		"pk00-0015", "pk00-0016", "pk00-0017", "pk00-0018", "pk00-0019"}
	if !slices.Equal(got[:15], want) {
		t.Fatalf("third run delivered %v\nwant %v", got, want)
	}
	w.stop()
}

// Lease notifications: an instance alone is told it acquired every lease;
// a second one joining takes some, the first being told it released them;
// a stopped instance is told it released what it held.
func TestLeaseNotifications(t *testing.T) {
	f := newFixture(t, 40000)
	ranges, err := f.monitored.ReadFeedRanges(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(ranges)
	if n < 2 {
		t.Skipf("the server gave the container %d feed range; this test needs several", n)
	}
	var mu sync.Mutex
	held := map[string]map[string]bool{"a": {}, "b": {}}
	var events []string
	notify := func(instance string) func(*Options) {
		return func(o *Options) {
			o.OnLeaseAcquired = func(lease string) {
				mu.Lock()
				defer mu.Unlock()
				if held[instance][lease] {
					events = append(events, "twice:"+instance+":"+lease)
				}
				held[instance][lease] = true
				events = append(events, "acquired:"+instance+":"+lease)
			}
			o.OnLeaseReleased = func(lease string) {
				mu.Lock()
				defer mu.Unlock()
				if !held[instance][lease] {
					events = append(events, "unheld:"+instance+":"+lease)
				}
				delete(held[instance], lease)
				events = append(events, "released:"+instance+":"+lease)
			}
		}
	}
	count := func(instance string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(held[instance])
	}
	await := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: held %v, events %v", what, held, events)
			}
		}
	}
	rec := newRecorder()
	a := f.startWorker("a", rec.handler, notify("a"))
	await("a alone", func() bool { return count("a") == n })
	b := f.startWorker("b", rec.handler, notify("b"))
	await("a and b sharing", func() bool { return count("a")+count("b") == n && count("b") >= n/2 && count("a") >= n/2 })
	// The notifications agree with the store.
	owners, _ := f.owners()
	if owners["a"] != count("a") || owners["b"] != count("b") {
		t.Fatalf("the store says %v, the notifications a %d, b %d", owners, count("a"), count("b"))
	}
	b.stop()
	await("b stopped", func() bool { return count("b") == 0 })
	await("a alone again", func() bool { return count("a") == n })
	a.stop()
	await("a stopped", func() bool { return count("a") == 0 })
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e[:5] == "twice" || e[:6] == "unheld" {
			t.Fatalf("inconsistent notifications: %v", events)
		}
	}
}

// createAVADContainer creates container id with a changeFeedPolicy, which
// the all-versions-and-deletes mode needs (and the Go SDK cannot set), by
// the REST API, and makes it the fixture's monitored container.
func (f *fixture) createAVADContainer(id string) {
	f.t.Helper()
	body := fmt.Sprintf(`{"id":%q,"partitionKey":{"paths":["/pk"],"kind":"Hash","version":2},"changeFeedPolicy":{"retentionDuration":10}}`, id)
	status, resp := f.signed("POST", "/dbs/db/colls", "colls", "dbs/db", []byte(body))
	if status != http.StatusCreated {
		f.t.Fatalf("creating %s: %d %s", id, status, resp)
	}
	f.monitored, _ = f.client.NewContainer("db", id)
}

// In all-versions-and-deletes mode the processor delivers every create,
// replace and delete, in order per item, with their metadata, also across a
// split of the range it reads.
func TestAllVersionsAndDeletes(t *testing.T) {
	f := newFixture(t, 0)
	f.createAVADContainer("events")
	ctx := context.Background()
	var mu sync.Mutex
	var got []Version
	more := make(chan struct{}, 1)
	h := func(_ context.Context, b Batch) error {
		vs, err := b.Versions()
		if err != nil {
			return err
		}
		mu.Lock()
		got = append(got, vs...)
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
		return nil
	}
	wait := func(n int) []Version {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			mu.Lock()
			out := slices.Clone(got)
			mu.Unlock()
			if len(out) >= n {
				return out
			}
			select {
			case <-more:
			case <-deadline:
				t.Fatalf("%d of %d versions delivered: %+v", len(out), n, out)
			}
		}
	}
	if _, err := New(f.client, f.monitored, f.leases, "avad", h, &Options{Mode: AllVersionsAndDeletes, StartFrom: StartFromBeginning()}); err == nil {
		t.Fatal("all versions and deletes from the beginning: no error")
	}
	f.startNamed("avad", "w", h, func(o *Options) { o.Mode = AllVersionsAndDeletes })
	// The start is "now", pinned when the leases are created.
	st := &store{c: f.leases, prefix: f.prefix("avad")}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if all, err := st.list(ctx); err == nil && len(all) > 0 {
			if all[0].Mode != "Full-Fidelity Feed" {
				t.Fatalf("lease mode %q", all[0].Mode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leases created")
		}
	}
	pk := azcosmos.NewPartitionKeyString("p")
	steps := func(round int) {
		a, b := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
		for _, op := range []func() error{
			func() error {
				_, err := f.monitored.CreateItem(ctx, pk, []byte(`{"id":"`+a+`","pk":"p","v":1}`), nil)
				return err
			},
			func() error {
				_, err := f.monitored.ReplaceItem(ctx, pk, a, []byte(`{"id":"`+a+`","pk":"p","v":2}`), nil)
				return err
			},
			func() error {
				_, err := f.monitored.CreateItem(ctx, pk, []byte(`{"id":"`+b+`","pk":"p","v":1}`), nil)
				return err
			},
			func() error { _, err := f.monitored.DeleteItem(ctx, pk, a, nil); return err },
			func() error {
				_, err := f.monitored.UpsertItem(ctx, pk, []byte(`{"id":"`+b+`","pk":"p","v":2}`), nil)
				return err
			},
		} {
			if err := op(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(round int) []string {
		a, b := fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)
		return []string{"create " + a, "replace " + a, "create " + b, "delete " + a, "replace " + b}
	}
	steps(0)
	vs := wait(5)
	var seen []string
	for _, v := range vs {
		seen = append(seen, v.Operation+" "+v.ID)
		if v.LSN == 0 || v.Time.IsZero() || (v.Operation == "delete") != (v.Current == nil) {
			t.Fatalf("version %+v", v)
		}
	}
	if !slices.Equal(seen, want(0)) {
		t.Fatalf("versions %v, want %v", seen, want(0))
	}
	if !f.canSplit() {
		t.Log("the server has no administrative split call: the split part is skipped")
		return
	}
	status, body := f.split(f.rangeIDs()[0])
	if status != http.StatusOK {
		t.Fatalf("split: %d %s", status, body)
	}
	steps(1)
	vs = wait(10)
	seen = nil
	for _, v := range vs[5:] {
		seen = append(seen, v.Operation+" "+v.ID)
	}
	if !slices.Equal(seen, want(1)) {
		t.Fatalf("versions after the split %v, want %v", seen, want(1))
	}
	// The parent's lease became its children's.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		all, err := st.list(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) == 2 && all[0].Mode == "Full-Fidelity Feed" && all[1].Mode == "Full-Fidelity Feed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leases after the split, want the two children in the all-versions mode", len(all))
		}
	}
}
