package saga_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/coord/internal/cosmostest"
	"github.com/orrery-db/orrery/coord/saga"
)

// The tests in this file inject faults into the saga's own traffic (its
// state documents and its leases) with the server's fault rules; the
// participants' ledger is another service, left alone.

// checkEffects checks that saga id ended as want and left the ledger as a
// purchase whose step fail was declined (-1: none) must: each effect once,
// or every effect undone once, newest first.
func checkEffects(ctx context.Context, good env, id string, fail int, st saga.State) error {
	want := saga.Completed
	if fail >= 0 {
		want = saga.Compensated
	}
	if st.Status != want {
		return fmt.Errorf("%s ended %q, want %q (%+v)", id, st.Status, want, st)
	}
	e, err := readEffects(ctx, good.ledger, id)
	if err != nil {
		return err
	}
	if fail < 0 {
		if e.Seats != 1 || e.Payments != 1 || e.Tickets != 1 || e.Mail != 1 || len(e.Undo) != 0 {
			return fmt.Errorf("%s completed with effects %+v, want each exactly once", id, e)
		}
		if !slices.Equal(st.Completed, stepNames) || len(st.Outputs) != len(stepNames) {
			return fmt.Errorf("%s completed steps %v, outputs %v", id, st.Completed, st.Outputs)
		}
		return nil
	}
	var undo []string
	for i := fail - 1; i >= 0; i-- {
		undo = append(undo, services[i])
	}
	if e.Seats != 0 || e.Payments != 0 || e.Tickets != 0 || e.Mail != 0 || !slices.Equal(e.Undo, undo) {
		return fmt.Errorf("%s compensated with effects %+v, want none left, undone once each in order %v", id, e, undo)
	}
	return nil
}

// A transition's write applies and its reply is lost (a 503, a 408, a
// reset), or it is lost before it applies: the executor settles each by
// reading the saga back, carries on, and the saga completes with each
// effect once. So does a Start whose create's reply is lost.
func TestTransitionSettledAfterAmbiguousWrite(t *testing.T) {
	db := newDB(t)
	good := open(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writes := cosmostest.Condition{Operations: []string{"ReplaceItem"}, Database: db, Container: "sagas"}
	server.AddFaults(t,
		cosmostest.Rule{Condition: cosmostest.Condition{Operations: []string{"CreateItem"}, Database: db, Container: "sagas"},
			Result: cosmostest.Result{Type: "AppliedThenLost", Lost: "ServiceUnavailable"}, Times: 1},
		cosmostest.Rule{Condition: writes, Result: cosmostest.Result{Type: "AppliedThenLost", Lost: "ServiceUnavailable"}, Times: 1},
		cosmostest.Rule{Condition: writes, Result: cosmostest.Result{Type: "AppliedThenLost", Lost: "Timeout"}, Times: 1},
		cosmostest.Rule{Condition: writes, Result: cosmostest.Result{Type: "LostBeforeApply", Lost: "ServiceUnavailable"}, Times: 1},
		cosmostest.Rule{Condition: writes, Result: cosmostest.Result{Type: "AppliedThenLost"}, Times: 1},
		cosmostest.Rule{Condition: writes, Result: cosmostest.Result{Type: "PartitionIsSplitting"}, Times: 1},
	)
	id := "ambiguous"
	if err := newLedger(ctx, good.ledger, id); err != nil {
		t.Fatal(err)
	}
	ex, err := saga.New(good.sagas, "purchase", purchase(good.ledger, -1, func(string, int) {}), good.locks, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ex.Start(ctx, id, map[string]string{"seat": "F-3-7"})
	if err != nil {
		t.Fatalf("Start gave up on an ambiguous write: %v", err)
	}
	for _, r := range server.FaultHits(t) {
		if r.Hits != 1 {
			t.Fatalf("rule %s (%s) fired %d times, want 1", r.ID, r.Result.Type, r.Hits)
		}
	}
	if err := checkEffects(ctx, good, id, -1, st); err != nil {
		t.Fatal(err)
	}
}

// Sagas run concurrently while every kind of fault hits their state
// documents and leases at random: each ends completed or compensated, as
// its participants decided, with each effect applied once (and undone once
// when it compensates).
func TestEachEffectOnceUnderRandomFaults(t *testing.T) {
	db := newDB(t)
	good := open(t, db)
	seed := cosmostest.Seed(t)
	for i, c := range []string{"sagas", "locks"} {
		server.AddFaults(t, cosmostest.RandomRules(seed+uint64(i), cosmostest.Condition{Database: db, Container: c}, 0.03, 1)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const sagas, workers = 15, 3
	ex, err := saga.New(good.sagas, "purchase", purchase(good.ledger, -1, func(string, int) {}), good.locks, nil)
	if err != nil {
		t.Fatal(err)
	}
	executors := map[int]*saga.Executor{-1: ex}
	for fail := range len(stepNames) {
		e, err := saga.New(good.sagas, "purchase", purchase(good.ledger, fail, func(string, int) {}), good.locks, nil)
		if err != nil {
			t.Fatal(err)
		}
		executors[fail] = e
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < sagas; i += workers {
				fail := i%(len(stepNames)+1) - 1
				id := fmt.Sprintf("s%d-fail%d", i, fail)
				if err := newLedger(ctx, good.ledger, id); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				st, err := executors[fail].Start(ctx, id, map[string]string{"seat": id})
				if err == nil {
					err = checkEffects(ctx, good, id, fail, st)
				} else {
					err = fmt.Errorf("%s: Start: %w", id, err)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	server.LogHits(t)
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d sagas", sagas)
}
