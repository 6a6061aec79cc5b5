package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
)

// The tests in this file inject faults into the processor's traffic (the
// monitored container's change feed and the lease container) with the
// server's fault rules: every kind, and real splits of the monitored
// container's ranges.

// writeRetrying writes change seq of pk, retrying what failed: a create
// whose reply was lost may have applied (the retry is then a 409).
func (f *fixture) writeRetrying(ctx context.Context, pk string, seq int) error {
	b, _ := json.Marshal(change{ID: fmt.Sprintf("%s-%04d", pk, seq), PK: pk, Seq: seq})
	for {
		_, err := f.monitored.CreateItem(ctx, pkOf(pk), b, nil)
		if err == nil || statusOf(err) == http.StatusConflict {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run keeps going through transient faults from its first call: an
// unavailable service while it opens the monitored container and the lease
// store is retried, not returned.
func TestRunRetriesTransientFaultsWhileStarting(t *testing.T) {
	f := newFixture(t, 0)
	// What Run reads while it starts: the container, its ranges, the
	// store's marker and its leases.
	reads := cosmostest.Condition{Database: "db", Operations: []string{"MetadataReadContainer", "MetadataPartitionKeyRanges", "ReadItem", "QueryItem"}}
	f.server.AddFaults(t,
		cosmostest.Rule{Condition: reads, Result: cosmostest.Result{Type: "ServiceUnavailable"}, Times: 3},
		cosmostest.Rule{Condition: reads, Result: cosmostest.Result{Type: "AppliedThenLost", Lost: "Timeout"}, Times: 3},
		cosmostest.Rule{Condition: reads, Result: cosmostest.Result{Type: "PartitionIsSplitting"}, Times: 2},
	)
	rec := newRecorder()
	w := f.startWorker("w0", rec.handler, nil)
	f.write(4, 0, 5)
	select {
	case err := <-w.done:
		w.done <- err
		t.Fatalf("Run returned %v under transient faults", err)
	default:
	}
	rec.await(t, 20, time.Minute)
}

// The first instance creates the lease store under a lock document; the
// reply to that create is lost though it applied. The retry is refused
// (409) by the instance's own lock, which it recognizes by its owner
// field, instead of waiting for the lock to go stale (30 s) as for another
// instance's.
func TestStoreLockWithLostReplyIsRecognized(t *testing.T) {
	f := newFixture(t, 0)
	f.server.AddFaults(t, cosmostest.Rule{
		Condition: cosmostest.Condition{Database: "db", Container: "leases", Operations: []string{"CreateItem"}},
		Result:    cosmostest.Result{Type: "AppliedThenLost"}, Times: 1,
	})
	rec := newRecorder()
	f.startWorker("w0", rec.handler, nil)
	f.write(2, 0, 5)
	// Well within the 30 s a stale lock is waited for.
	rec.await(t, 10, 20*time.Second)
	if hits := f.server.FaultHits(t); hits[0].Hits != 1 {
		t.Fatalf("the lock's create was not faulted: %+v", hits)
	}
}

// Two processor instances read the feed while every kind of fault hits
// their traffic at random and the monitored container's ranges really
// split: per partition key, no change is delivered before the one before
// it (nothing skipped), every change is delivered, and neither Run gives
// up.
func TestNothingSkippedUnderRandomFaultsAndSplits(t *testing.T) {
	f := newFixture(t, 0)
	seed := cosmostest.Seed(t)
	// Real splits of the monitored container while its feed is read: at
	// the first read, and a second a moment later, then at random.
	feedReads := cosmostest.Condition{Database: "db", Container: "orders", Operations: []string{"ChangeFeedItem"}}
	f.server.AddFaults(t,
		cosmostest.Rule{Condition: feedReads, Result: cosmostest.Result{Type: "PartitionIsGone"}, Times: 1},
		cosmostest.Rule{Condition: feedReads, Result: cosmostest.Result{Type: "PartitionIsGone"}, Times: 1, StartAfter: "500ms"},
	)
	f.server.AddFaults(t, cosmostest.RandomRules(seed, cosmostest.Condition{Database: "db"}, 0.03, 1)...)
	rec := newRecorder()
	var errMu sync.Mutex
	reported := map[string]int{}
	onError := func(o *Options) {
		o.OnError = func(_ string, err error) {
			errMu.Lock()
			reported[fmt.Sprint(statusOf(err))]++
			errMu.Unlock()
		}
	}
	workers := []*worker{f.startWorker("w0", rec.handler, onError), f.startWorker("w1", rec.handler, onError)}

	const pks, per = 8, 30
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	write := func(from, to int) {
		var wg sync.WaitGroup
		for k := range pks {
			wg.Go(func() {
				for s := from; s < to; s++ {
					if err := f.writeRetrying(ctx, fmt.Sprintf("pk%02d", k), s); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	write(0, per/2)
	rec.await(t, pks*per/2, time.Minute)
	write(per/2, per)
	rec.await(t, pks*per, time.Minute)

	for i, w := range workers {
		select {
		case err := <-w.done:
			w.done <- err
			t.Errorf("worker %d: Run returned %v under transient faults", i, err)
		default:
		}
	}
	f.server.LogHits(t)
	// The checks below are the test's own reads, not the processors':
	// faults stop first, or a 408 meant for the workers fails the test.
	f.server.ClearFaults(t)
	ranges, err := f.monitored.ReadFeedRanges(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) < 3 {
		t.Errorf("%d ranges: the monitored container was not split twice", len(ranges))
	}
	rec.mu.Lock()
	t.Logf("%d changes delivered (%d deliveries with repeats) over %d ranges; errors reported by status: %v",
		rec.delivered, rec.total, len(ranges), reported)
	rec.mu.Unlock()
	for _, w := range workers {
		w.cancel()
		if err := <-w.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
		w.done <- nil
	}
}
