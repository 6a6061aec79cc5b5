package engine

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// TestTTLSweepDoesNotStallWriters lets 100,000 items expire at once while
// writers run, and compares the writers' p99 latency during the sweep with
// their p99 without it (before and after), in the same run.
func TestTTLSweepDoesNotStallWriters(t *testing.T) {
	const (
		partitions = 64
		writers    = 4
		warmUp     = 300 * time.Millisecond
		baseline   = 1500 * time.Millisecond
		after      = 1500 * time.Millisecond
	)
	expiring := 100000
	if testing.Short() {
		expiring = 20000
	}
	clock := newTestClock()
	// The test runs the sweep itself, to know when it ends without polling
	// the store (a poll's snapshot would slow the writers it measures).
	store := memory.New()
	e, err := Open(store, Options{Now: clock.now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	defer e.Close()
	if _, err := e.CreateDatabase([]byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":60}`)
	c, _ := e.Container("db", "c")
	// Load the expiring items in large transactions, one partition at a time.
	for p := range partitions {
		pk := StringKey(fmt.Sprintf("p%d", p))
		err := e.inPartition(c, pk, func(tx *txn) error {
			for i := p; i < expiring; i += partitions {
				it, perr := c.parseItem([]byte(fmt.Sprintf(`{"id":"old%d","pk":"p%d","payload":"%064d"}`, i, p, i)), &ItemRequest{})
				if perr != nil {
					return perr
				}
				if _, err := tx.put(it, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	runtime.GC()
	// Writers upsert never-expiring items into the same partitions, at a
	// steady pace, and record each write's latency and when it started.
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var (
		mu      sync.Mutex
		samples []sample
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
				if _, err := e.UpsertItem(&ItemRequest{Database: "db", Container: "c", Body: []byte(body)}); err != nil {
					t.Error(err)
					return
				}
				local = append(local, sample{start, time.Since(start)})
				time.Sleep(200 * time.Microsecond)
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		}()
	}
	time.Sleep(warmUp + baseline)
	baselineStart := time.Now().Add(-baseline)
	sweepStart := time.Now()
	clock.advance(61 * time.Second)
	swept, err := e.sweep()
	if err != nil {
		t.Fatal(err)
	}
	if swept != expiring {
		t.Errorf("the sweep deleted %d items, want %d", swept, expiring)
	}
	sweepEnd := time.Now()
	// Measure as long without the sweep as with it, so bursts of load from
	// outside the test weigh on both sides alike.
	time.Sleep(min(sweepEnd.Sub(sweepStart)-baseline, after))
	stop.Store(true)
	wg.Wait()

	// Without the sweep: the baseline before it and the second after it,
	// pooled, so a burst of load from outside the test in either does not
	// decide the comparison alone.
	var before, during []time.Duration
	for _, s := range samples {
		switch {
		case s.at.Before(baselineStart):
		case s.at.Before(sweepStart):
			before = append(before, s.lat)
		case s.at.Before(sweepEnd):
			during = append(during, s.lat)
		default:
			before = append(before, s.lat)
		}
	}
	if len(before) < 100 || len(during) < 100 {
		t.Fatalf("too few samples: %d before, %d during the sweep", len(before), len(during))
	}
	p99b, p99d := percentile(before, 0.99), percentile(during, 0.99)
	t.Logf("swept %d items in %v; write p99 %v without the sweep (%d writes), %v during it (%d writes); p50 %v / %v",
		expiring, sweepEnd.Sub(sweepStart), p99b, len(before), p99d, len(during), percentile(before, 0.5), percentile(during, 0.5))
	if p99d > 3*p99b {
		t.Errorf("write p99 during the sweep %v is more than 3x the p99 without it %v", p99d, p99b)
	}
	if n := countPrefix(t, e, itemContainerPrefix(c.rid)); n > writers*500 {
		t.Errorf("%d items left after the sweep, want at most the writers' %d", n, writers*500)
	}
}

func countPrefix(t *testing.T, e *Engine, prefix []byte) int {
	t.Helper()
	it, err := e.store.NewIterator(prefix, storage.PrefixEnd(prefix), false)
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
