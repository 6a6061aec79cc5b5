package engine

import (
	"context"

	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// countingStore notes the largest batch committed while recording is on.
type countingStore struct {
	storage.Store
	recording atomic.Bool
	largest   atomic.Int64
}

func (s *countingStore) NewBatch() storage.Batch {
	return &countingBatch{Batch: s.Store.NewBatch(), s: s}
}

type countingBatch struct {
	storage.Batch
	s *countingStore
}

func (b *countingBatch) note() {
	if b.s.recording.Load() {
		n := int64(b.Count())
		for {
			old := b.s.largest.Load()
			if n <= old || b.s.largest.CompareAndSwap(old, n) {
				return
			}
		}
	}
}

func (b *countingBatch) Commit(ctx context.Context) error { b.note(); return b.Batch.Commit(ctx) }

func (b *countingBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	b.note()
	return b.Batch.CommitPipelined(ctx)
}

// sweepRun is what sweepUnderWriters saw.
type sweepRun struct {
	swept              int
	sweepStart         time.Time
	sweepEnd           time.Time
	before, during     []time.Duration // write latencies without the sweep and during it
	doneDuring         [][]time.Time   // per writer, when its writes during the sweep completed
	largestSweepCommit int64           // the most operations in one batch committed during the sweep
	e                  *Engine
	c                  *Container
}

// sweepUnderWriters lets expiring items expire at once while 4 writers
// upsert never-expiring items into the same 64 partitions at a steady pace,
// and records each write's latency and completion, before, during and
// after the sweep, which the test runs itself (so it knows when it ends
// without polling the store, whose snapshots would slow the writers).
func sweepUnderWriters(tb testing.TB, expiring int) sweepRun {
	ctx := tb.Context()
	const (
		partitions = 64
		writers    = 4
		warmUp     = 300 * time.Millisecond
		baseline   = 1500 * time.Millisecond
		after      = 1500 * time.Millisecond
	)
	clock := newTestClock()
	store := &countingStore{Store: newTestStore(tb)}
	e, err := Open(ctx, store.forEngine(), Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		tb.Fatal(err)
	}
	createContainer(tb, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":60}`)
	c, _ := e.Container(ctx, "db", "c")
	// Load the expiring items in large transactions, one partition at a time.
	for p := range partitions {
		pk := StringKey(fmt.Sprintf("p%d", p))
		err := e.seam.inPartition(ctx, c, pk, nil, txnFunc(func(tx *txn) error {
			for i := p; i < expiring; i += partitions {
				it, perr := c.parseItem([]byte(fmt.Sprintf(`{"id":"old%d","pk":"p%d","payload":"%064d"}`, i, p, i)), &ItemRequest{})
				if perr != nil {
					return perr
				}
				if _, err := tx.put(ctx, it, nil); err != nil {
					return err
				}
			}
			return nil
		}))
		if err != nil {
			tb.Fatal(err)
		}
	}

	runtime.GC()
	type sample struct {
		at, done time.Time
	}
	var (
		samples = make([][]sample, writers)
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []sample
			for n := 0; !stop.Load(); n++ {
				id := w*500 + n%500
				body := fmt.Sprintf(`{"id":"w%d","pk":"p%d","ttl":-1}`, id, id%partitions)
				start := time.Now()
				if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: []byte(body)}); err != nil {
					tb.Error(err)
					return
				}
				local = append(local, sample{start, time.Now()})
				time.Sleep(200 * time.Microsecond)
			}
			samples[w] = local
		}()
	}
	time.Sleep(warmUp + baseline)
	baselineStart := time.Now().Add(-baseline)
	r := sweepRun{e: e, c: c, doneDuring: make([][]time.Time, writers)}
	r.sweepStart = time.Now()
	store.recording.Store(true)
	clock.advance(61 * time.Second)
	r.swept, err = e.sweeper.sweep(ctx)
	store.recording.Store(false)
	if err != nil {
		tb.Fatal(err)
	}
	r.sweepEnd = time.Now()
	r.largestSweepCommit = store.largest.Load()
	// Measure as long without the sweep as with it, so bursts of load from
	// outside weigh on both sides alike.
	time.Sleep(min(r.sweepEnd.Sub(r.sweepStart)-baseline, after))
	stop.Store(true)
	wg.Wait()

	// Without the sweep: the baseline before it and the time after it,
	// pooled.
	for w, ss := range samples {
		for _, s := range ss {
			switch {
			case s.at.Before(baselineStart):
			case s.at.Before(r.sweepStart):
				r.before = append(r.before, s.done.Sub(s.at))
			case s.at.Before(r.sweepEnd):
				r.during = append(r.during, s.done.Sub(s.at))
				if s.done.Before(r.sweepEnd) {
					r.doneDuring[w] = append(r.doneDuring[w], s.done)
				}
			default:
				r.before = append(r.before, s.done.Sub(s.at))
			}
		}
	}
	return r
}

// TestTTLSweepDoesNotStallWriters lets items expire at once while writers
// run in the same partitions. What it asserts does not depend on how the
// machine schedules the test: the sweep deletes exactly the expired items,
// in transactions of a few items each (the largest batch committed during
// the sweep is bounded; one big transaction would hold partitions locked
// for its whole length), and every writer keeps completing writes in every
// quarter of the sweep. The latency the sweep adds to writes depends on
// the machine's load: BenchmarkWritesDuringTTLSweep measures it.
func TestTTLSweepDoesNotStallWriters(t *testing.T) {
	expiring := 20000
	if testing.Short() || testOnPostgres {
		expiring = 5000
	}
	r := sweepUnderWriters(t, expiring)
	took := r.sweepEnd.Sub(r.sweepStart)
	t.Logf("swept %d items in %v; largest batch committed meanwhile %d operations; write p99 %v without the sweep (%d writes), %v during it (%d writes)",
		r.swept, took, r.largestSweepCommit, percentile(r.before, 0.99), len(r.before), percentile(r.during, 0.99), len(r.during))
	if r.swept != expiring {
		t.Errorf("the sweep deleted %d items, want %d", r.swept, expiring)
	}
	if n := countPrefix(t, r.e, keys.ItemContainerPrefix(r.c.rid)); n > len(r.doneDuring)*500 {
		t.Errorf("%d items left after the sweep, want at most the writers' %d", n, len(r.doneDuring)*500)
	}
	// An item's delete here writes its item, expiry and index entries and
	// its change record: 8 operations (a writer's upsert, fewer). 16 per
	// item leaves room for more index entries, none for a transaction of
	// twice the items.
	if limit := int64(sweepTxnItems * 16); r.largestSweepCommit > limit {
		t.Errorf("a batch of %d operations was committed during the sweep; the sweep's transactions should hold at most %d items (~%d operations)",
			r.largestSweepCommit, sweepTxnItems, limit)
	}
	quarter := took / 4
	for w, done := range r.doneDuring {
		var seen [4]int
		for _, at := range done {
			seen[min(3, int(at.Sub(r.sweepStart)/quarter))]++
		}
		for q, n := range seen {
			if n == 0 {
				t.Errorf("writer %d completed no write in quarter %d of the %v sweep (writes per quarter %v)", w, q+1, took, seen)
			}
		}
	}
}

// BenchmarkWritesDuringTTLSweep measures what TestTTLSweepDoesNotStallWriters
// leaves to a quiet machine: the writers' p99 latency while 100,000 items
// are swept, against their p99 without the sweep (before and after, pooled).
// It runs once whatever b.N is.
func BenchmarkWritesDuringTTLSweep(b *testing.B) {
	for range b.N {
		r := sweepUnderWriters(b, 100000)
		p99b, p99d := percentile(r.before, 0.99), percentile(r.during, 0.99)
		b.ReportMetric(float64(p99b.Microseconds()), "p99-idle-µs")
		b.ReportMetric(float64(p99d.Microseconds()), "p99-sweep-µs")
		b.ReportMetric(float64(p99d)/float64(p99b), "p99-ratio")
		b.ReportMetric(r.sweepEnd.Sub(r.sweepStart).Seconds(), "sweep-s")
		break
	}
}

func countPrefix(t *testing.T, e *Engine, prefix []byte) int {
	ctx := t.Context()
	t.Helper()
	it, err := e.store.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	return n
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}
