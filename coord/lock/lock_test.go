package lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/lock"
)

func TestTryAcquireHeldReleaseAndTokensGrow(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	l := lock.New(lockContainer(t, c, db))
	ctx := context.Background()
	opts := &lock.Options{TTL: 5 * time.Second, Owner: "alice"}

	a, err := l.TryAcquire(ctx, "seat-map", opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token() != 1 {
		t.Fatalf("first token = %d, want 1", a.Token())
	}
	if _, err := l.TryAcquire(ctx, "seat-map", &lock.Options{TTL: 5 * time.Second, Owner: "bob"}); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("second TryAcquire: %v, want ErrHeld", err)
	}
	// Another name is independent.
	o, err := l.TryAcquire(ctx, "other", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release(ctx)
	h, err := l.Holder(ctx, "seat-map")
	if err != nil || h == nil || h.Token != 1 || h.ETag != a.Lease().ETag {
		t.Fatalf("Holder = %+v, %v; want alice's lease %+v", h, err, a.Lease())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.Err(), lock.ErrReleased) || a.Context().Err() == nil {
		t.Fatalf("after Release: Err = %v, context %v", a.Err(), a.Context().Err())
	}
	select {
	case <-a.Lost():
		t.Fatal("Lost fired on Release")
	default:
	}
	b, err := l.TryAcquire(ctx, "seat-map", opts)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() != 2 {
		t.Fatalf("token after release = %d, want 2", b.Token())
	}
	b.Release(ctx)
}

func TestAcquireWaitsAndRenewalOutlivesTTL(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	l := lock.New(lockContainer(t, c, db))
	ctx := context.Background()
	opts := &lock.Options{TTL: 3 * time.Second}
	a, err := l.Acquire(ctx, "n", opts)
	if err != nil {
		t.Fatal(err)
	}
	// Held for several TTLs: renewal keeps it; a waiter with a deadline
	// inside that time gives up.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The waiter that gives up says who was in the way.
	_, err = l.Acquire(wctx, "n", opts)
	var held *lock.HeldError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lock.ErrHeld) || !errors.As(err, &held) ||
		held.Holder.Owner != a.Lease().Owner || held.Holder.Token != a.Token() || !strings.Contains(err.Error(), a.Lease().Owner) {
		t.Fatalf("waiter: %v, want deadline exceeded naming the holder %s", err, a.Lease().Owner)
	}
	select {
	case <-a.Lost():
		t.Fatalf("lost while renewing: %v", a.Err())
	default:
	}
	got := make(chan error, 1)
	go func() {
		b, err := l.Acquire(ctx, "n", opts)
		if err == nil {
			if b.Token() <= a.Token() {
				err = errors.New("token did not grow")
			}
			b.Release(ctx)
		}
		got <- err
	}()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestExpiryIsServerSideAndTokenGrowsAcrossIt(t *testing.T) {
	f := &faults{}
	ca := client(t, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{PerRetryPolicies: []policy.Policy{f}}})
	db := newDB(t, ca)
	la := lock.New(lockContainer(t, ca, db))
	c := client(t, nil)
	lb := lock.New(lockContainer(t, c, db))
	ctx := context.Background()
	opts := &lock.Options{TTL: 2 * time.Second}
	a, err := la.Acquire(ctx, "n", opts)
	if err != nil {
		t.Fatal(err)
	}
	resume := f.stall() // a is cut off: it cannot renew
	defer resume()
	b, err := lb.Acquire(ctx, "n", opts)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after expiry is not above %d", b.Token(), a.Token())
	}
	<-a.Lost()
	b.Release(ctx)
}

// A holder paused past its TTL (here: every request it makes is held back,
// as a long GC pause or a partition would) is fenced out: Lost fires, its
// late write to the protected item is rejected, and its Release leaves the
// new holder's lease alone.
func TestPausedHolderIsFencedOut(t *testing.T) {
	f := &faults{}
	ca := client(t, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{PerRetryPolicies: []policy.Policy{f}}})
	db := newDB(t, ca)
	la := lock.New(lockContainer(t, ca, db))
	dataA := dataContainer(t, ca, db)
	c := client(t, nil)
	lb := lock.New(lockContainer(t, c, db))
	dataB := dataContainer(t, c, db)
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("seats")
	if _, err := dataB.CreateItem(ctx, pk, []byte(`{"id":"best","pk":"seats","owner":""}`), nil); err != nil {
		t.Fatal(err)
	}
	opts := &lock.Options{TTL: 2 * time.Second}

	a, err := la.Acquire(ctx, "seats", opts)
	if err != nil {
		t.Fatal(err)
	}
	var ops azcosmos.PatchOperations
	ops.AppendSet("/owner", "a")
	if _, err := lock.FencedPatch(ctx, dataA, pk, "best", a.Fence(), ops); err != nil {
		t.Fatal(err)
	}

	resume := f.stall()
	// The successor's own lease is long: it must not lapse on a loaded
	// machine before the checks below.
	b, err := lb.Acquire(ctx, "seats", &lock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var bops azcosmos.PatchOperations
	bops.AppendSet("/owner", "b")
	if _, err := lock.FencedPatch(ctx, dataB, pk, "best", b.Fence(), bops); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost did not fire")
	}
	if !errors.Is(a.Err(), lock.ErrLost) || !errors.Is(context.Cause(a.Context()), lock.ErrLost) {
		t.Fatalf("Err = %v, cause %v", a.Err(), context.Cause(a.Context()))
	}
	resume()

	// The zombie wakes up and writes anyway.
	var late azcosmos.PatchOperations
	late.AppendSet("/owner", "a-late")
	if _, err := lock.FencedPatch(ctx, dataA, pk, "best", a.Fence(), late); !errors.Is(err, lock.ErrFenced) {
		t.Fatalf("late write: %v, want ErrFenced", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := lb.Holder(ctx, "seats")
	if err != nil || h == nil || h.Owner != b.Lease().Owner {
		t.Fatalf("after the zombie's Release the holder is %+v (%v), want b", h, err)
	}
	r, err := dataB.ReadItem(ctx, pk, "best", nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Owner  string
		Fences map[string]int64
	}
	json.Unmarshal(r.Value, &doc)
	if doc.Owner != "b" || doc.Fences["seats"] != b.Token() {
		t.Fatalf("protected item = %s", r.Value)
	}
	b.Release(ctx)
}

// The reply to the acquiring batch is lost after the server applied it;
// the SDK's own retry then finds the counter moved. The acquirer must
// recognize its own lease (no false "held by other"), and nobody else gets
// the lock (no double grant). Run with the SDK's retries on and off.
func TestAmbiguousAcquireIsRecognized(t *testing.T) {
	for _, retries := range []int32{0, -1} {
		f := &faults{}
		ca := client(t, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{
			PerRetryPolicies: []policy.Policy{f},
			Retry:            policy.RetryOptions{MaxRetries: retries},
		}})
		db := newDB(t, ca)
		la := lock.New(lockContainer(t, ca, db))
		lb := lock.New(lockContainer(t, client(t, nil), db))
		ctx := context.Background()
		opts := &lock.Options{TTL: 5 * time.Second}
		for i := 1; i <= 3; i++ {
			f.dropNext(1, isBatch)
			a, err := la.TryAcquire(ctx, "n", opts)
			if err != nil {
				t.Fatalf("retries %d, round %d: %v", retries, i, err)
			}
			if f.droppedCount() != i {
				t.Fatalf("no reply was dropped")
			}
			if a.Token() != int64(i) {
				t.Fatalf("token %d, want %d: the counter moved twice", a.Token(), i)
			}
			if _, err := lb.TryAcquire(ctx, "n", opts); !errors.Is(err, lock.ErrHeld) {
				t.Fatalf("other acquirer: %v, want ErrHeld", err)
			}
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Lost replies to renewals and to the release: the holder keeps its lock
// through the first (its next renewal finds its own lease) and the lock is
// free after the second.
func TestAmbiguousRenewAndRelease(t *testing.T) {
	f := &faults{}
	ca := client(t, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{
		PerRetryPolicies: []policy.Policy{f},
		Retry:            policy.RetryOptions{MaxRetries: -1},
	}})
	db := newDB(t, ca)
	la := lock.New(lockContainer(t, ca, db))
	lb := lock.New(lockContainer(t, client(t, nil), db))
	ctx := context.Background()
	opts := &lock.Options{TTL: 3 * time.Second, RenewEvery: 200 * time.Millisecond}
	a, err := la.Acquire(ctx, "n", opts)
	if err != nil {
		t.Fatal(err)
	}
	f.dropNext(3, isReplace)
	deadline := time.Now().Add(30 * time.Second)
	for f.droppedCount() < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	// A few more renewals after the dropped ones.
	time.Sleep(4 * opts.RenewEvery)
	select {
	case <-a.Lost():
		t.Fatalf("lost after ambiguous renewals: %v", a.Err())
	default:
	}
	if _, err := lb.TryAcquire(ctx, "n", opts); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("other acquirer: %v, want ErrHeld", err)
	}
	f.dropNext(1, isDelete)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := lb.TryAcquire(ctx, "n", opts)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.Release(ctx)
}

// A read from a lagging replica misses a live lease: the acquirer's create
// of the lease is refused all the same, so it is not granted the lock.
func TestStaleReadDoesNotDoubleGrant(t *testing.T) {
	c := client(t, nil)
	db := newDB(t, c)
	l := lock.New(lockContainer(t, c, db))
	f := &faults{hide: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/docs/n") }}
	stale := lock.New(lockContainer(t, client(t, &azcosmos.ClientOptions{ClientOptions: policy.ClientOptions{PerRetryPolicies: []policy.Policy{f}}}), db))
	ctx := context.Background()
	a, err := l.Acquire(ctx, "n", &lock.Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stale.TryAcquire(ctx, "n", nil); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("acquirer reading a stale replica: %v, want ErrHeld", err)
	}
	h, err := l.Holder(ctx, "n")
	if err != nil || h == nil || h.Owner != a.Lease().Owner || h.ETag != a.Lease().ETag {
		t.Fatalf("holder %+v (%v), want a's untouched lease", h, err)
	}
	a.Release(ctx)
}
