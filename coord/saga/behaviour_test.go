package saga_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/coord"
	"github.com/orrery-db/orrery/coord/lock"
	"github.com/orrery-db/orrery/coord/saga"
)

// The caller gives up (its context is cancelled) while the third step
// runs: the saga fails there, and the compensations still run to the end.
func TestCallerCancelStillCompensates(t *testing.T) {
	db := newDB(t)
	e := open(t, db)
	ctx, cancelCaller := context.WithCancel(context.Background())
	defer cancelCaller()
	if err := newLedger(ctx, e.ledger, "s1"); err != nil {
		t.Fatal(err)
	}
	steps := purchase(e.ledger, -1, func(phase string, step int) {})
	issue := steps[2].Action
	steps[2].Action = func(ctx context.Context, c saga.Call) error {
		cancelCaller()
		<-ctx.Done()
		_ = issue // the ticket is never issued
		return ctx.Err()
	}
	ex, err := saga.New(e.sagas, "purchase", steps, saga.Options{Locks: e.locks, LeaseTTL: recoverTTL})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ex.Start(ctx, "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != coord.SagaCompensated || st.FailedStep != "issue_ticket" || !strings.Contains(st.Error, "canceled") {
		t.Fatalf("state %+v", st)
	}
	fx, err := readEffects(context.Background(), e.ledger, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if fx.Seats != 0 || fx.Payments != 0 || !slices.Equal(fx.Undo, []string{"payments", "seats"}) {
		t.Fatalf("effects %+v", fx)
	}
}

// A refund that keeps failing leaves the saga visibly in
// compensation_failed, with what is left to compensate; once the payment
// service is back, Resume finishes the compensation.
func TestCompensationFailedIsVisibleThenResumed(t *testing.T) {
	db := newDB(t)
	e := open(t, db)
	ctx := context.Background()
	if err := newLedger(ctx, e.ledger, "s2"); err != nil {
		t.Fatal(err)
	}
	var refundsDown atomic.Bool
	refundsDown.Store(true)
	var tries atomic.Int32
	steps := purchase(e.ledger, 2, func(string, int) {})
	refund := steps[1].Compensate
	steps[1].Compensate = func(ctx context.Context, c saga.Call) error {
		if refundsDown.Load() {
			tries.Add(1)
			return errors.New("payments: service unavailable")
		}
		return refund(ctx, c)
	}
	ex, err := saga.New(e.sagas, "purchase", steps, saga.Options{Locks: e.locks, LeaseTTL: recoverTTL, CompensationAttempts: 3, CompensationBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Start(ctx, "s2", nil); !errors.Is(err, saga.ErrCompensationFailed) {
		t.Fatalf("Start: %v, want ErrCompensationFailed", err)
	}
	st, err := ex.Get(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != coord.SagaCompensationFailed || !slices.Equal(st.Compensate, []string{"charge", "hold_seat"}) ||
		!strings.Contains(st.Error, "service unavailable") || tries.Load() != 3 {
		t.Fatalf("state %+v after %d tries", st, tries.Load())
	}
	refundsDown.Store(false)
	st, err = ex.Resume(ctx, "s2")
	if err != nil || st.Status != coord.SagaCompensated {
		t.Fatalf("Resume: %+v, %v", st, err)
	}
	fx, _ := readEffects(ctx, e.ledger, "s2")
	if fx.Seats != 0 || fx.Payments != 0 || !slices.Equal(fx.Undo, []string{"payments", "seats"}) {
		t.Fatalf("effects %+v", fx)
	}
}

// Several executors start the same saga at once (a retried request, two
// nodes): one drives it, every participant effect happens once, and all
// report the same outcome.
func TestConcurrentStartsDriveOnce(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	e := open(t, db)
	if err := newLedger(ctx, e.ledger, "s3"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var wg sync.WaitGroup
	states := make([]saga.State, 4)
	errs := make([]error, 4)
	for i := range 4 {
		ei := open(t, db)
		ex, err := saga.New(ei.sagas, "purchase", purchase(e.ledger, -1, func(phase string, _ int) {
			if phase == "action-before" {
				calls.Add(1)
			}
		}), saga.Options{Locks: ei.locks, LeaseTTL: recoverTTL})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i], errs[i] = ex.Start(ctx, "s3", nil)
		}()
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil || states[i].Status != coord.SagaCompleted {
			t.Fatalf("executor %d: %+v, %v", i, states[i], errs[i])
		}
	}
	if calls.Load() != 4 {
		t.Fatalf("%d actions called, want 4", calls.Load())
	}
	fx, _ := readEffects(ctx, e.ledger, "s3")
	if fx.Seats != 1 || fx.Payments != 1 || fx.Tickets != 1 || fx.Mail != 1 {
		t.Fatalf("effects %+v", fx)
	}
}

// The ETag guard alone, without the lease: two executors whose leases come
// from different lock containers (as if the lease had failed) both run the
// first action, then both try to record it. One transition wins; the other
// executor is refused and stops with ErrPreempted, and the saga still ends
// with each effect once.
func TestETagGuardStopsASecondExecutor(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	e := open(t, db)
	if err := newLedger(ctx, e.ledger, "s4"); err != nil {
		t.Fatal(err)
	}
	d, _ := e.client.NewDatabase(db)
	var both sync.WaitGroup
	both.Add(2)
	var entered atomic.Int32
	var results [2]error
	var states [2]saga.State
	var wg sync.WaitGroup
	for i := range 2 {
		lc, err := lock.CreateContainer(ctx, d, fmt.Sprintf("locks-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := saga.New(e.sagas, "purchase", purchase(e.ledger, -1, func(phase string, step int) {
			if phase == "action-before" && step == 0 && entered.Add(1) <= 2 {
				both.Done()
				both.Wait() // both executors are inside the first action
			}
		}), saga.Options{Locks: lock.New(lc), LeaseTTL: recoverTTL})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i], results[i] = ex.Start(ctx, "s4", nil)
		}()
	}
	wg.Wait()
	won, lost := 0, 0
	for i := range 2 {
		switch {
		case results[i] == nil && states[i].Status == coord.SagaCompleted:
			won++
		case errors.Is(results[i], saga.ErrPreempted):
			lost++
		default:
			t.Fatalf("executor %d: %+v, %v", i, states[i], results[i])
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("%d executors completed the saga, %d were refused", won, lost)
	}
	fx, _ := readEffects(ctx, e.ledger, "s4")
	if fx.Seats != 1 || fx.Payments != 1 || fx.Tickets != 1 || fx.Mail != 1 {
		t.Fatalf("effects %+v", fx)
	}
}

// A recoverer finds the unfinished sagas by query and resumes those whose
// executor is gone; a saga whose executor is alive answers ErrBusy.
func TestUnfinishedAndTryResume(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	e := open(t, db)
	for _, id := range []string{"crashed", "alive", "done"} {
		if err := newLedger(ctx, e.ledger, id); err != nil {
			t.Fatal(err)
		}
	}
	cut := &cutoff{}
	ze := open(t, db, cut)
	inCharge := map[string]chan struct{}{"crashed": make(chan struct{}), "alive": make(chan struct{})}
	release := make(chan struct{})
	defer close(release)
	var once sync.Map
	freeze := func(id string) func(string, int) {
		return func(phase string, step int) {
			if ch := inCharge[id]; ch != nil && phase == "action-before" && step == 1 {
				if _, dup := once.LoadOrStore(id, true); !dup {
					if id == "crashed" {
						cut.sever()
					}
					close(ch)
					<-release
				}
			}
		}
	}
	for _, id := range []string{"crashed", "alive"} {
		env := ze
		if id == "alive" {
			env = open(t, db)
		}
		ex, err := saga.New(env.sagas, "purchase", purchase(e.ledger, -1, freeze(id)), saga.Options{Locks: env.locks, LeaseTTL: leaseTTL})
		if err != nil {
			t.Fatal(err)
		}
		go ex.Start(ctx, id, nil)
		<-inCharge[id]
	}
	rec, err := saga.New(e.sagas, "purchase", purchase(e.ledger, -1, func(string, int) {}), saga.Options{Locks: e.locks, LeaseTTL: recoverTTL})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := rec.Start(ctx, "done", nil); err != nil || st.Status != coord.SagaCompleted {
		t.Fatalf("done: %+v, %v", st, err)
	}
	ids, err := rec.Unfinished(ctx)
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"alive", "crashed"}) {
		t.Fatalf("Unfinished = %v, %v", ids, err)
	}
	if _, err := rec.TryResume(ctx, "alive"); !errors.Is(err, saga.ErrBusy) {
		t.Fatalf("TryResume of a live saga: %v, want ErrBusy", err)
	}
	// The crashed one's lease expires within its TTL; the recoverer
	// retries until it is no longer busy.
	deadline := time.Now().Add(leaseTTL + 30*time.Second)
	for {
		st, err := rec.TryResume(ctx, "crashed")
		if err == nil {
			if st.Status != coord.SagaCompleted {
				t.Fatalf("crashed: %+v", st)
			}
			break
		}
		if !errors.Is(err, saga.ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("TryResume of the crashed saga: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	fx, _ := readEffects(ctx, e.ledger, "crashed")
	if fx.Seats != 1 || fx.Payments != 1 || fx.Tickets != 1 || fx.Mail != 1 {
		t.Fatalf("effects %+v", fx)
	}
}
