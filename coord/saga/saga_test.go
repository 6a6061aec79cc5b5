package saga_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/coord/saga"
)

var stepNames = []string{"hold_seat", "charge", "issue_ticket", "notify"}

// leaseTTL is the crashing executor's lease: how long recovery waits.
// Recoverers hold longer leases (recoverTTL), so that a loaded machine
// does not make one lose its lease halfway and hand over to another.
const (
	leaseTTL   = 3 * time.Second
	recoverTTL = 10 * time.Second
)

// purchase is the four-step purchase saga whose participants write to
// ledger. Step fail's action is declined (-1: none). at is called at each
// point a crash can happen: before and after each action's effect, before
// and after each compensation's.
//
// Each action returns its participant's reference ("<service>.<key>") as
// its output, and checks that every earlier step's reference reached it;
// each compensation of a completed step checks that its own did. A missing
// or wrong output fails the step for good, so a test that expects a saga to
// complete (or to compensate cleanly) sees it.
func purchase(ledger *azcosmos.ContainerClient, fail int, at func(phase string, step int)) []saga.Step {
	steps := make([]saga.Step, len(stepNames))
	for i, name := range stepNames {
		svc := services[i]
		steps[i] = saga.Step{Name: name, Action: func(ctx context.Context, c saga.Call) (any, error) {
			at("action-before", i)
			if err := checkOutputs(c, i); err != nil {
				return nil, saga.Permanent(err)
			}
			if i == fail {
				return nil, fmt.Errorf("%s declined", svc)
			}
			// A participant is another service: once called it carries
			// on whatever becomes of its caller.
			if err := apply(context.WithoutCancel(ctx), ledger, c.SagaID, svc, c.Key); err != nil {
				return nil, err
			}
			at("action-after", i)
			return reference{Ref: svc + "." + c.Key}, nil
		}}
		if svc != "mail" {
			steps[i].Compensate = func(ctx context.Context, c saga.Call) error {
				at("comp-before", i)
				var own reference
				got, err := c.Output(c.Step, &own)
				switch {
				case err != nil:
					return err
				case c.Completed != got:
					return fmt.Errorf("compensating %s: completed %v but output recorded %v", c.Step, c.Completed, got)
				case got && own.Ref != svc+"."+c.Key:
					return fmt.Errorf("compensating %s: its output is %q", c.Step, own.Ref)
				}
				if err := cancel(context.WithoutCancel(ctx), ledger, c.SagaID, svc, c.Key); err != nil {
					return err
				}
				at("comp-after", i)
				return nil
			}
		}
	}
	return steps
}

// reference is a purchase step's output.
type reference struct {
	Ref string `json:"ref"`
}

// checkOutputs checks that the outputs of steps 0..i-1 reached step i.
func checkOutputs(c saga.Call, i int) error {
	for j := range i {
		var r reference
		ok, err := c.Output(stepNames[j], &r)
		if err != nil {
			return err
		}
		if want := services[j] + "." + c.SagaID + ":" + stepNames[j]; !ok || r.Ref != want {
			return fmt.Errorf("step %s sees the output of %s as %q (recorded %v), want %q", stepNames[i], stepNames[j], r.Ref, ok, want)
		}
	}
	return nil
}

type scenario struct {
	fail  int    // the declined step, -1 for none
	phase string // where the first executor crashes
	step  int
}

func (s scenario) String() string {
	f := "ok"
	if s.fail >= 0 {
		f = "fail-" + stepNames[s.fail]
	}
	return fmt.Sprintf("%s.crash-%s-%s", f, s.phase, stepNames[s.step])
}

// scenarios is every crash point of the purchase: before and after each
// action's effect (after the effect is also before its record; after the
// record of step k is before the action of step k+1), with and without a
// later failure, and before and after each compensation's effect for every
// failing step.
func scenarios() []scenario {
	var out []scenario
	for k := range stepNames {
		out = append(out, scenario{-1, "action-before", k}, scenario{-1, "action-after", k})
	}
	for f := range stepNames {
		out = append(out, scenario{f, "action-before", f})
		if f > 0 {
			out = append(out, scenario{f, "action-after", f - 1})
		}
		for j := 0; j <= f && j < 3; j++ {
			out = append(out, scenario{f, "comp-before", j}, scenario{f, "comp-after", j})
		}
	}
	return out
}

// TestCrashAtEveryPointThenRecoverers kills the executor at every crash
// point of the purchase (its client is cut off and its goroutine frozen at
// that point, so its lease expires as a dead process's would), then starts
// three recoverers at once. Each participant effect happens exactly once,
// the saga ends completed or compensated in reverse order, exactly one
// recoverer drives it, and the frozen executor, woken at the end as a
// zombie, changes nothing.
func TestCrashAtEveryPointThenRecoverers(t *testing.T) {
	db := newDB(t)
	good := open(t, db)
	all := scenarios()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	for _, sc := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := runScenario(t, db, good, sc); err != nil {
				t.Errorf("%v: %v", sc, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d scenarios", len(all))
}

func runScenario(t *testing.T, db string, good env, sc scenario) error {
	ctx, cancelAll := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelAll()
	id := sc.String()
	if err := newLedger(ctx, good.ledger, id); err != nil {
		return err
	}

	cut := &cutoff{}
	zenv := open(t, db, cut)
	crashed, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	zombie, err := saga.New(zenv.sagas, "purchase", purchase(good.ledger, sc.fail, func(phase string, step int) {
		if phase == sc.phase && step == sc.step && once.CompareAndSwap(false, true) {
			cut.sever()
			close(crashed)
			<-release
		}
	}), zenv.locks, &saga.Options{LeaseTTL: leaseTTL, Owner: "zombie"})
	if err != nil {
		return err
	}
	zdone := make(chan error, 1)
	go func() {
		_, err := zombie.Start(ctx, id, map[string]string{"seat": "F-3-7"})
		zdone <- err
	}()
	select {
	case <-crashed:
	case err := <-zdone:
		return fmt.Errorf("the crash point was never reached (Start: %v)", err)
	}

	// Three recoverers race to resume it.
	var drivers sync.Map
	states := make([]saga.State, 3)
	errs := make([]error, 3)
	var rw sync.WaitGroup
	for r := range 3 {
		renv := open(t, db)
		role := fmt.Sprintf("recoverer-%d", r)
		ex, err := saga.New(renv.sagas, "purchase", purchase(good.ledger, sc.fail, func(string, int) {
			drivers.Store(role, true)
		}), renv.locks, &saga.Options{LeaseTTL: recoverTTL, Owner: role})
		if err != nil {
			return err
		}
		rw.Add(1)
		go func() {
			defer rw.Done()
			states[r], errs[r] = ex.Resume(ctx, id)
		}()
	}
	rw.Wait()
	want := saga.Completed
	if sc.fail >= 0 {
		want = saga.Compensated
	}
	for r := range 3 {
		if errs[r] != nil {
			return fmt.Errorf("recoverer %d: %v", r, errs[r])
		}
		if states[r].Status != want {
			return fmt.Errorf("recoverer %d ended in %q, want %q (%+v)", r, states[r].Status, want, states[r])
		}
	}
	n := 0
	drivers.Range(func(any, any) bool { n++; return true })
	if n > 1 {
		return fmt.Errorf("%d recoverers drove the saga", n)
	}

	// The frozen executor wakes up as a zombie: nothing it does may count.
	cut.restore()
	close(release)
	if err := <-zdone; !errors.Is(err, saga.ErrPreempted) {
		return fmt.Errorf("zombie: %v, want ErrPreempted", err)
	}

	final, err := good.sagasGet(ctx, id)
	if err != nil {
		return err
	}
	if final.Status != want || final.Rev != states[0].Rev {
		return fmt.Errorf("final state %+v after the zombie, recoverers left revision %d", final, states[0].Rev)
	}
	e, err := readEffects(ctx, good.ledger, id)
	if err != nil {
		return err
	}
	if sc.fail < 0 {
		if e.Seats != 1 || e.Payments != 1 || e.Tickets != 1 || e.Mail != 1 || len(e.Undo) != 0 {
			return fmt.Errorf("completed with effects %+v, want each exactly once", e)
		}
		if !slices.Equal(final.Completed, stepNames) {
			return fmt.Errorf("completed steps %v", final.Completed)
		}
		if len(final.Outputs) != len(stepNames) {
			return fmt.Errorf("recorded outputs %v, want one per step", final.Outputs)
		}
		return nil
	}
	if e.Seats != 0 || e.Payments != 0 || e.Tickets != 0 || e.Mail != 0 {
		return fmt.Errorf("compensated with effects %+v, want none left", e)
	}
	var undo, compensated []string
	for i := sc.fail; i >= 0; i-- {
		if i < sc.fail {
			undo = append(undo, services[i])
		}
		if i < 3 {
			compensated = append(compensated, stepNames[i])
		}
	}
	if !slices.Equal(e.Undo, undo) {
		return fmt.Errorf("effects undone in order %v, want %v", e.Undo, undo)
	}
	if !slices.Equal(final.Compensated, compensated) || final.FailedStep != stepNames[sc.fail] {
		return fmt.Errorf("recorded compensations %v (failed %q), want %v", final.Compensated, final.FailedStep, compensated)
	}
	return nil
}

func (e env) sagasGet(ctx context.Context, id string) (saga.State, error) {
	ex, err := saga.New(e.sagas, "purchase", purchase(e.ledger, -1, func(string, int) {}), e.locks, nil)
	if err != nil {
		return saga.State{}, err
	}
	return ex.Get(ctx, id)
}
