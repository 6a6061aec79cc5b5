package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/lock"
)

// The tests in this file run the lock against the server with faults
// injected into its traffic by the server itself (its fault rules), every
// kind: 429, 408, 503, 500, 449, a real split (410/1002), 410/1007 and
// 410/1008, delays, connection resets, writes applied whose replies are
// lost, writes lost before they apply.

// A renewal applies but its reply is lost; the renewals after it fail
// (503) for a while, then one finds the lease rewritten by this holder.
// The lease's time to live ran from the renewal that applied, not from the
// one that found it: the holder must not believe it holds the lock past
// the moment another acquirer can take it.
func TestRenewalSettledLateDoesNotOutliveTheLease(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	lc := lockContainer(t, c, db)
	la, lb := lock.New(lc), lock.New(lc)
	ctx := context.Background()
	opts := &lock.Options{TTL: 6 * time.Second, RenewEvery: time.Second}
	a, err := la.Acquire(ctx, "n", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	renewals := cosmostest.Condition{Operations: []string{"ReplaceItem"}, Database: db}
	rules := server.AddFaults(t,
		// The first renewal (1 s from now) applies; its reply is lost.
		cosmostest.Rule{Condition: renewals, Result: cosmostest.Result{Type: "AppliedThenLost"}, Times: 1},
		// Its retries fail until 3 s from now; the first after finds the
		// lease rewritten by a.
		cosmostest.Rule{Condition: renewals, Result: cosmostest.Result{Type: "ServiceUnavailable"}, For: "3s"},
		// Then every renewal fails: a must give the lock up in time.
		cosmostest.Rule{Condition: renewals, Result: cosmostest.Result{Type: "ServiceUnavailable"}, StartAfter: "3600ms"},
	)
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := lb.Acquire(bctx, "n", &lock.Options{TTL: 6 * time.Second, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	defer b.Release(ctx)
	if hits := server.FaultHits(t); len(hits) < 1 || hits[0].ID != rules[0].ID || hits[0].Hits != 1 {
		t.Fatalf("the renewal whose reply is lost was not injected: %+v", hits)
	}
	if until := lock.HeldUntil(a); until.After(acquired) {
		t.Fatalf("a believes it holds the lock until %v after b took it: overlap of %v",
			until.Format(time.StampMilli), until.Sub(acquired))
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
	select {
	case <-a.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("a never noticed it lost the lock")
	}
}

// 410 Gone answers that the SDK surfaces (a completing split, 1007, or
// partition migration, 1008) are transient: Acquire and Release retry them.
func TestAcquireAndReleaseRetryGone(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	l := lock.New(lockContainer(t, c, db))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, kind := range []string{"PartitionIsSplitting", "PartitionIsMigrating"} {
		for _, op := range []string{"ReadItem", "BatchItem", "DeleteItem"} {
			server.AddFaults(t, cosmostest.Rule{
				Condition: cosmostest.Condition{Operations: []string{op}, Database: db},
				Result:    cosmostest.Result{Type: kind}, Times: 2,
			})
			h, err := l.Acquire(ctx, "n", nil)
			if err != nil {
				t.Fatalf("%s on %s: Acquire: %v", kind, op, err)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("%s on %s: Release: %v", kind, op, err)
			}
			server.ClearFaults(t)
		}
	}
}

// tenure is one holder's time with the lock: from when Acquire returned to
// when it stopped believing it held it (Release called, or its lease's
// safe time ran out).
type tenure struct {
	token    int64
	acquired time.Time
	ended    time.Time
	worker   int
}

// Workers take one lock in turns while every kind of fault hits their
// traffic at random. Each holder's tenure must end before the next one's
// begins (no two holders at once, by their own beliefs), and the fencing
// tokens grow with every acquisition.
func TestNoOverlapAndGrowingFencesUnderRandomFaults(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	lc := lockContainer(t, c, db)
	const workers, rounds = 3, 6
	server.AddFaults(t, cosmostest.RandomRules(cosmostest.Seed(t), cosmostest.Condition{Database: db}, 0.03, 2)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		tenures  []tenure
		failures []error
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			l := lock.New(lc)
			for range rounds {
				h, err := l.Acquire(ctx, "n", &lock.Options{TTL: 2 * time.Second, MaxBackoff: 100 * time.Millisecond})
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				tn := tenure{token: h.Token(), acquired: time.Now(), worker: w}
				select {
				case <-h.Context().Done():
				case <-time.After(time.Duration(rand.Int64N(int64(700 * time.Millisecond)))):
					// Held up to 0.7 s: renewals (every 333 ms) run into
					// faults too.
				}
				tn.ended = time.Now()
				if until := lock.HeldUntil(h); until.Before(tn.ended) {
					tn.ended = until
				}
				_ = h.Release(context.WithoutCancel(ctx)) // a failed release leaves the lease to expire
				mu.Lock()
				tenures = append(tenures, tn)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	server.LogHits(t)
	if err := errors.Join(failures...); err != nil {
		t.Fatalf("Acquire gave up under transient faults: %v", err)
	}
	slices.SortFunc(tenures, func(a, b tenure) int { return a.acquired.Compare(b.acquired) })
	for i := 1; i < len(tenures); i++ {
		p, n := tenures[i-1], tenures[i]
		if n.token <= p.token {
			t.Errorf("token %d (worker %d) acquired after token %d (worker %d): fences must grow", n.token, n.worker, p.token, p.worker)
		}
		if p.ended.After(n.acquired) {
			t.Errorf("worker %d (token %d) believed it held the lock %v after worker %d (token %d) took it",
				p.worker, p.token, p.ended.Sub(n.acquired), n.worker, n.token)
		}
	}
	t.Logf("%d acquisitions", len(tenures))
	if len(tenures) != workers*rounds {
		t.Fatalf("%d acquisitions, want %d", len(tenures), workers*rounds)
	}
}
