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
	steps[2].Action = func(ctx context.Context, c saga.Call) (any, error) {
		cancelCaller()
		<-ctx.Done()
		_ = issue // the ticket is never issued
		return nil, ctx.Err()
	}
	ex, err := saga.New(e.sagas, "purchase", steps, e.locks, &saga.Options{LeaseTTL: recoverTTL})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ex.Start(ctx, "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != saga.Compensated || st.FailedStep != "issue_ticket" || !strings.Contains(st.Error, "canceled") {
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
	ex, err := saga.New(e.sagas, "purchase", steps, e.locks, &saga.Options{LeaseTTL: recoverTTL, CompensationRetry: saga.RetryPolicy{Attempts: 3, Backoff: 10 * time.Millisecond}})
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
	if st.Status != saga.CompensationFailed || !slices.Equal(st.Compensate, []string{"charge", "hold_seat"}) ||
		!strings.Contains(st.Error, "service unavailable") || tries.Load() != 3 {
		t.Fatalf("state %+v after %d tries", st, tries.Load())
	}
	refundsDown.Store(false)
	st, err = ex.Resume(ctx, "s2")
	if err != nil || st.Status != saga.Compensated {
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
		}), ei.locks, &saga.Options{LeaseTTL: recoverTTL})
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
		if errs[i] != nil || states[i].Status != saga.Completed {
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
		}), lock.New(lc), &saga.Options{LeaseTTL: recoverTTL})
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
		case results[i] == nil && states[i].Status == saga.Completed:
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
		ex, err := saga.New(env.sagas, "purchase", purchase(e.ledger, -1, freeze(id)), env.locks, &saga.Options{LeaseTTL: leaseTTL})
		if err != nil {
			t.Fatal(err)
		}
		go ex.Start(ctx, id, nil)
		<-inCharge[id]
	}
	rec, err := saga.New(e.sagas, "purchase", purchase(e.ledger, -1, func(string, int) {}), e.locks, &saga.Options{LeaseTTL: recoverTTL})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := rec.Start(ctx, "done", nil); err != nil || st.Status != saga.Completed {
		t.Fatalf("done: %+v, %v", st, err)
	}
	unfinished, err := rec.Unfinished(ctx)
	var ids []string
	for _, st := range unfinished {
		ids = append(ids, st.ID)
	}
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
			if st.Status != saga.Completed {
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

// flaky wraps step i's action so that its first n attempts fail with a
// transient error before reaching the participant; it records the attempt
// numbers the action was called with.
func flaky(steps []saga.Step, i, n int, seen *[]int, mu *sync.Mutex) {
	act := steps[i].Action
	steps[i].Action = func(ctx context.Context, c saga.Call) (any, error) {
		mu.Lock()
		*seen = append(*seen, c.Attempt)
		mu.Unlock()
		if c.Attempt <= n {
			return nil, errors.New("payments: 503 service unavailable")
		}
		return act(ctx, c)
	}
}

// A transient failure of an action is retried under the step's policy,
// with the same idempotency key, and the saga completes: one transient
// error no longer compensates the whole purchase.
func TestTransientFailuresAreRetried(t *testing.T) {
	db := newDB(t)
	e := open(t, db)
	ctx := context.Background()
	if err := newLedger(ctx, e.ledger, "r1"); err != nil {
		t.Fatal(err)
	}
	steps := purchase(e.ledger, -1, func(string, int) {})
	var mu sync.Mutex
	var seen []int
	flaky(steps, 1, 2, &seen, &mu)
	steps[1].Retry = saga.RetryPolicy{Attempts: 3, Backoff: 10 * time.Millisecond}
	ex, err := saga.New(e.sagas, "purchase", steps, e.locks, &saga.Options{LeaseTTL: recoverTTL, Retry: saga.RetryPolicy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ex.Start(ctx, "r1", nil)
	if err != nil || st.Status != saga.Completed {
		t.Fatalf("Start: %+v, %v", st, err)
	}
	if !slices.Equal(seen, []int{1, 2, 3}) {
		t.Fatalf("the charge was attempted %v, want attempts 1, 2, 3", seen)
	}
	fx, _ := readEffects(ctx, e.ledger, "r1")
	if fx.Seats != 1 || fx.Payments != 1 || fx.Tickets != 1 || fx.Mail != 1 {
		t.Fatalf("effects %+v", fx)
	}
}

// An action whose attempts are spent, or whose error is Permanent, fails
// the saga: it compensates, recording the step, the error and the attempts.
func TestSpentAndPermanentFailuresCompensate(t *testing.T) {
	db := newDB(t)
	e := open(t, db)
	ctx := context.Background()
	for _, tc := range []struct {
		id       string
		err      error
		attempts int
	}{
		{"spent", errors.New("payments: 503 service unavailable"), 2},
		{"declined", saga.Permanent(errors.New("card declined")), 1},
	} {
		if err := newLedger(ctx, e.ledger, tc.id); err != nil {
			t.Fatal(err)
		}
		steps := purchase(e.ledger, -1, func(string, int) {})
		var calls atomic.Int32
		steps[1].Action = func(ctx context.Context, c saga.Call) (any, error) {
			calls.Add(1)
			return nil, tc.err
		}
		steps[1].Retry = saga.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}
		ex, err := saga.New(e.sagas, "purchase", steps, e.locks, &saga.Options{LeaseTTL: recoverTTL})
		if err != nil {
			t.Fatal(err)
		}
		st, err := ex.Start(ctx, tc.id, nil)
		if err != nil || st.Status != saga.Compensated || st.FailedStep != "charge" || st.Attempts != tc.attempts ||
			int(calls.Load()) != tc.attempts || st.Error != tc.err.Error() {
			t.Fatalf("%s: %+v after %d calls, %v", tc.id, st, calls.Load(), err)
		}
		fx, _ := readEffects(ctx, e.ledger, tc.id)
		if fx.Seats != 0 || !slices.Equal(fx.Undo, []string{"seats"}) {
			t.Fatalf("%s: effects %+v", tc.id, fx)
		}
	}
}

// Each attempt of an action is bounded by the step's timeout, whether the
// action heeds its context (cancelled) or not (its late success does not
// count); a compensation's attempts are bounded by its own timeout, and
// when they are spent the saga is left in compensation_failed.
func TestTimeoutsBoundEachAttempt(t *testing.T) {
	db := newDB(t)
	e := open(t, db)
	ctx := context.Background()
	for _, id := range []string{"heeds", "ignores"} {
		if err := newLedger(ctx, e.ledger, id); err != nil {
			t.Fatal(err)
		}
		steps := purchase(e.ledger, -1, func(string, int) {})
		steps[1].Action = func(ctx context.Context, c saga.Call) (any, error) {
			if id == "heeds" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			time.Sleep(300 * time.Millisecond) // a call that ignores its context
			return reference{Ref: "late"}, nil
		}
		steps[1].Timeout = 100 * time.Millisecond
		steps[1].Retry = saga.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}
		// The refund hangs: its attempts time out too.
		steps[1].Compensate = func(ctx context.Context, c saga.Call) error {
			<-ctx.Done()
			return ctx.Err()
		}
		steps[1].CompensationTimeout = 50 * time.Millisecond
		steps[1].CompensationRetry = saga.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}
		ex, err := saga.New(e.sagas, "purchase", steps, e.locks, &saga.Options{LeaseTTL: recoverTTL})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = ex.Start(ctx, id, nil)
		if !errors.Is(err, saga.ErrCompensationFailed) {
			t.Fatalf("%s: Start: %v, want ErrCompensationFailed", id, err)
		}
		if took := time.Since(start); took < 2*100*time.Millisecond+2*50*time.Millisecond {
			t.Fatalf("%s: two timed-out attempts and two timed-out refunds took only %v", id, took)
		}
		st, err := ex.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != saga.CompensationFailed || st.FailedStep != "charge" || !strings.Contains(st.Error, "deadline exceeded") ||
			st.Attempts != 2 || !slices.Equal(st.Compensate, []string{"charge", "hold_seat"}) || st.Outputs["charge"] != nil {
			t.Fatalf("%s: %+v", id, st)
		}
	}
}

// Unfinished lists every saga that needs attention, compensation_failed
// ones included, with what went wrong; finished ones are left out.
func TestUnfinishedListsCompensationFailedSagas(t *testing.T) {
	db := newDB(t)
	e := open(t, db)
	ctx := context.Background()
	for _, id := range []string{"ok", "undone", "stuck"} {
		if err := newLedger(ctx, e.ledger, id); err != nil {
			t.Fatal(err)
		}
	}
	def := func(fail int, refundsDown bool) *saga.Executor {
		steps := purchase(e.ledger, fail, func(string, int) {})
		if refundsDown {
			steps[1].Compensate = func(context.Context, saga.Call) error { return errors.New("payments: refunds are down") }
		}
		ex, err := saga.New(e.sagas, "purchase", steps, e.locks, &saga.Options{LeaseTTL: recoverTTL,
			Retry:             saga.RetryPolicy{Attempts: 1},
			CompensationRetry: saga.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	if st, err := def(-1, false).Start(ctx, "ok", nil); err != nil || st.Status != saga.Completed {
		t.Fatalf("ok: %+v, %v", st, err)
	}
	if _, err := def(2, false).Start(ctx, "undone", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := def(2, true).Start(ctx, "stuck", nil); !errors.Is(err, saga.ErrCompensationFailed) {
		t.Fatalf("stuck: %v", err)
	}
	list, err := def(2, false).Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "stuck" || list[0].Status != saga.CompensationFailed ||
		!strings.Contains(list[0].Error, "refunds are down") || !slices.Equal(list[0].Compensate, []string{"charge", "hold_seat"}) ||
		list[0].Updated.IsZero() || list[0].ETag == "" {
		t.Fatalf("Unfinished = %+v", list)
	}
}
