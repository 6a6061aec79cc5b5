package script

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// peakSlack is how much the heap may grow during a run beyond twice the
// memory limit: the runtime's own allocations, the test's and the sampler's.
const peakSlack = 8 << 20

// measuredRun is a stored procedure run with its heap growth sampled.
type measuredRun struct {
	err     error
	elapsed time.Duration
	cpu     time.Duration // the process's CPU time during the run, the sampler's included
	peak    uint64        // the largest growth of the heap (objects, live or not) over its size at the start
}

// processCPU is the CPU time the test process has used so far. Unlike wall
// time it does not grow while other processes hold the cores, so bounds on
// it hold on a loaded machine.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// executeUntilMemoryStop runs body, which must end with the memory-limit
// error, and logs how long it ran and how far the heap grew.
func executeUntilMemoryStop(t *testing.T, rn *Runner, body string) measuredRun {
	t.Helper()
	m := executeMeasured(t, rn, body)
	status, msg := statusAndMessage(t, m.err)
	if status != 400 || !strings.Contains(msg, "memory limit") {
		t.Fatalf("got %d %s, want 400 with the memory limit", status, msg)
	}
	t.Logf("stopped after %v (%v of CPU), heap grew by %d MiB at most", m.elapsed.Round(time.Millisecond), m.cpu.Round(time.Millisecond), m.peak>>20)
	return m
}

// executeMeasured runs body as a stored procedure while a goroutine samples
// the heap every 50 µs.
func executeMeasured(t *testing.T, rn *Runner, body string) measuredRun {
	t.Helper()
	// Warm the pool so that making a runtime is not part of the run.
	if _, err := rn.Execute(context.Background(), Script{ID: "warm", Body: trivialSproc}, nil, newFakeCollection(), ExecuteOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	sample := []metrics.Sample{{Name: metricHeapObjects}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	stop, sampled := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: metricHeapObjects}}
		peak := uint64(0)
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > base && v-base > peak {
				peak = v - base
			}
			select {
			case <-stop:
				sampled <- peak
				return
			case <-time.After(50 * time.Microsecond):
			}
		}
	}()
	start, cpuStart := time.Now(), processCPU(t)
	_, err := rn.Execute(context.Background(), Script{ID: "measured", Body: body}, nil, newFakeCollection(), ExecuteOptions{})
	m := measuredRun{err: err, elapsed: time.Since(start), cpu: processCPU(t) - cpuStart}
	close(stop)
	m.peak = <-sampled
	return m
}

func TestEndlessLoopsStopWithinTheBudget(t *testing.T) {
	const budget = 500 * time.Millisecond
	rn := NewRunner(Limits{Timeout: budget})
	tests := []struct{ name, body string }{
		{"loop", `function () { while (true) {} }`},
		{"loop catching everything", `function () { for (;;) { try { while (true) {} } catch (e) {} finally { continue; } } }`},
		{"loop in a callback", `function () {
			var c = getContext().getCollection();
			c.readDocuments(c.getSelfLink(), function () { for (;;) {} });
		}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A stopped runtime is retired; warm the pool again so that
			// making one is not part of the measurement.
			if _, err := rn.Execute(context.Background(), Script{ID: "warm", Body: trivialSproc}, nil, newFakeCollection(), ExecuteOptions{}); err != nil {
				t.Fatal(err)
			}
			start, cpuStart := time.Now(), processCPU(t)
			_, err := rn.Execute(context.Background(), Script{ID: tc.name, Body: tc.body}, nil, newFakeCollection(), ExecuteOptions{})
			elapsed, cpu := time.Since(start), processCPU(t)-cpuStart
			status, msg := statusAndMessage(t, err)
			if status != 408 || !strings.Contains(msg, "time budget") {
				t.Fatalf("got %d %s", status, msg)
			}
			t.Logf("stopped after %v, %v of CPU", elapsed, cpu)
			// The loop cannot have used more CPU than the budget's wall
			// time; a late stop shows on a quiet machine. The wall bound
			// is loose: on a loaded one the interrupt waits for a core.
			if raceEnabled {
				return
			}
			if cpuLimit, wallLimit := budget+budget/2+100*time.Millisecond, budget+3*time.Second; cpu > cpuLimit || elapsed > wallLimit {
				t.Fatalf("stopped after %v having used %v of CPU; want at most %v and %v for a budget of %v", elapsed, cpu, wallLimit, cpuLimit, budget)
			}
		})
	}
}

func TestCancelledContextStopsTheScript(t *testing.T) {
	rn := NewRunner(Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := rn.Execute(ctx, Script{ID: "loop", Body: `function () { for (;;) {} }`}, nil, newFakeCollection(), ExecuteOptions{})
	if status, msg := statusAndMessage(t, err); status != 408 || !strings.Contains(msg, "cancelled") {
		t.Fatalf("got %d %s", status, msg)
	}
	if e := time.Since(start); e > time.Second {
		t.Fatalf("took %v", e)
	}
}

// endingCollection is a collection whose reads end the run's context and
// then fail with its error, as a storage call does when the request's
// deadline passes while it waits.
type endingCollection struct {
	*fakeCollection
	cancel context.CancelFunc
	// settle is how long the read waits after the cancel, giving the
	// context's watcher time to interrupt the runtime before the failure
	// is handed to the script (zero: the failure usually arrives first).
	settle time.Duration
}

func (c endingCollection) ReadDocument(ctx context.Context, link string, opts ReadOptions) (json.RawMessage, error) {
	c.cancel()
	time.Sleep(c.settle)
	return nil, fmt.Errorf("storage: %w", ctx.Err())
}

// TestStorageFailingAsTheContextEndsAnswersTheContextsEnd: a script that
// ends on the failure its context's end caused (before the context's
// watcher has stopped it) is answered 408 like any run whose context ended,
// never with the storage failure as a 500. Whether the watcher's interrupt
// lands before the failure reaches the script, while the error handed to
// the callback is being built, or after, the answer is the same.
func TestStorageFailingAsTheContextEndsAnswersTheContextsEnd(t *testing.T) {
	rn := NewRunner(Limits{})
	for i := range 60 {
		settle := []time.Duration{0, 0, 20 * time.Millisecond}[i%3]
		ctx, cancel := context.WithCancel(context.Background())
		_, err := rn.Execute(ctx, Script{ID: "read", Body: `function () {
			var c = getContext().getCollection();
			c.readDocument(c.getAltLink() + "/docs/a", function (err, doc) { if (err) throw err; });
		}`}, nil, endingCollection{newFakeCollection(`{"id":"a"}`), cancel, settle}, ExecuteOptions{})
		cancel()
		if status, msg := statusAndMessage(t, err); status != 408 {
			t.Fatalf("run %d: %d %s, want 408", i, status, msg)
		}
	}
}

func TestCallsAreRefusedNearTheEndOfTheBudget(t *testing.T) {
	const budget = 300 * time.Millisecond
	rn := NewRunner(Limits{Timeout: budget, AcceptFraction: 0.5})
	body := `function () {
		var c = getContext().getCollection(), n = 0;
		function step() {
			var accepted = c.readDocument(c.getAltLink() + "/docs/a", function (err, doc) {
				if (err) throw err;
				n++;
				step();
			});
			if (!accepted) {
				getContext().getResponse().setBody({reads: n, continuation: "resume-at-" + n});
			}
		}
		step();
	}`
	coll := newFakeCollection(`{"id":"a"}`)
	// Warm the pool so that making a runtime is not part of the measurement.
	if _, err := rn.Execute(context.Background(), Script{ID: "warm", Body: trivialSproc}, nil, coll, ExecuteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := rn.Execute(context.Background(), Script{ID: "chunked", Body: body}, nil, coll, ExecuteOptions{})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Body), `"continuation":"resume-at-`) || coll.reads < 10 {
		t.Fatalf("body %s after %d reads", res.Body, coll.reads)
	}
	// Calls are accepted until half the budget has passed. How long the
	// script then takes to finish depends on the machine's load; had it run
	// out of budget it would have ended in 408, not in the body above.
	if elapsed < budget/2 {
		t.Fatalf("finished after %v; calls should be accepted until %v", elapsed, budget/2)
	}
}

func TestHugeAllocationsFailTheScript(t *testing.T) {
	const limit = 32 << 20
	rn := NewRunner(Limits{MaxMemory: limit, Timeout: 20 * time.Second})
	tests := []struct{ name, body, want string }{
		{"array fill", `function () { new Array(1e9).fill(0); }`, "Invalid array length"},
		{"array-like fill", `function () { Array.prototype.fill.call({length: 1e9}, 0); }`, "Invalid array length"},
		{"array from", `function () { Array.from({length: 1e9}); }`, "Invalid array length"},
		{"join of a long array", `function () { var a = []; a.length = 4e9; a.join("x"); }`, "Invalid array length"},
		{"join of big strings", `function () { var s = "x".repeat(1e6), a = []; for (var i = 0; i < 1000; i++) a.push(s); a.join(""); }`, "Invalid string length"},
		{"nested join", `function () { var s = "x".repeat(1e6), a = [s, s], b = []; for (var i = 0; i < 100; i++) b.push(a); b.join(); }`, "Invalid string length|memory limit"},
		{"stringify of a long sparse array", `function () { var a = []; a.length = 4e9; JSON.stringify(a); }`, "more elements"},
		{"stringify of shared objects", `function () { var o = {v: "x"}; for (var i = 0; i < 40; i++) o = {a: o, b: o}; JSON.stringify(o); }`, "more elements"},
		{"stringify of big strings", `function () { var s = "x".repeat(1e6), a = []; for (var i = 0; i < 100; i++) a.push(s); getContext().getResponse().setBody(a); }`, "longer than"},
		{"join of deeply nested arrays", `function () { var a = []; for (var i = 0; i < 5e4; i++) a = [a]; String(a); }`, "nested too deeply"},
		{"stringify of deeply nested objects", `function () { var a = {}; for (var i = 0; i < 5e4; i++) a = {a: a}; JSON.stringify(a); }`, "nested too deeply"},
		{"repeat", `function () { "x".repeat(1 << 30); }`, "Invalid string length"},
		{"padStart", `function () { "x".padStart(1e9, "ab"); }`, "Invalid string length"},
		{"split of a long string", `function () { var s = "x".repeat(10e6); s.split(""); }`, "Invalid array length"},
		{"apply with a huge argument list", `function () { Math.max.apply(null, {length: 1e9}); }`, "Invalid array length"},
		{"typed arrays are absent", `function () { new Uint8Array(1 << 30); }`, "ReferenceError"},
		{"string doubling", `function () { var s = "0123456789abcdef"; for (;;) { s = s + s; } }`, "memory limit"},
		{"growing array of objects", `function () { var a = []; for (;;) { a.push({n: a.length, s: "v" + a.length}); } }`, "memory limit"},
		{"growing array of strings", `function () { var a = []; for (var i = 0; ; i++) { a.push(String.fromCharCode(65 + i % 26).repeat(1000) + i); } }`, "memory limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := rn.Execute(context.Background(), Script{ID: tc.name, Body: tc.body}, nil, newFakeCollection(), ExecuteOptions{})
			status, msg := statusAndMessage(t, err)
			if status != 400 || !containsAny(msg, strings.Split(tc.want, "|")) {
				t.Fatalf("got %d %s, want 400 with %s", status, msg, tc.want)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			t.Logf("failed after %v; heap after collection %d MiB", time.Since(start).Round(time.Millisecond), ms.HeapAlloc>>20)
			if ms.HeapAlloc > 8*limit {
				t.Fatalf("heap still holds %d MiB after the script failed", ms.HeapAlloc>>20)
			}
		})
	}
}

// TestRunawayScriptsStopNearTheCeiling runs the scripts of the compat
// suite's hostile cases with a smaller ceiling: each must end with the
// memory-limit error well within its time budget, the heap having grown by
// no more than about twice the ceiling meanwhile (three times allowed, for
// a loaded machine).
func TestRunawayScriptsStopNearTheCeiling(t *testing.T) {
	const limit = 32 << 20
	const budget = 5 * time.Second
	rn := NewRunner(Limits{MaxMemory: limit, Timeout: budget})
	tests := []struct{ name, body string }{
		{"1 GB by doubling a string", `function () { var s = "0123456789abcdef"; for (var i = 0; i < 26; i++) { s = s + s; } getContext().getResponse().setBody(s.length); }`},
		{"1 GB in 1 MB strings", `function () { var s = "x".repeat(1 << 20), a = []; for (var i = 0; i < 1024; i++) { a.push(s + i); } }`},
		{"1 GB of small objects", `function () { var a = []; for (var i = 0; i < (1 << 24); i++) { a.push({i: i, s: "item " + i}); } }`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := executeUntilMemoryStop(t, rn, tc.body)
			// The memory limit stopped it, so within the budget's wall time;
			// "well within" is checked in CPU time, which load does not
			// stretch.
			if m.cpu > budget/2 && !raceEnabled {
				t.Errorf("used %v of CPU (%v of wall time) of a budget of %v", m.cpu, m.elapsed, budget)
			}
			// About twice the ceiling on an idle machine; the watchdog and
			// the collector run late when other processes hold the cores
			// (75 MiB in one run beside a CPU hog), hence three times.
			// Unbounded, each of these grows the heap by a gigabyte.
			if m.peak > 3*limit+peakSlack {
				t.Errorf("the heap grew by %d MiB with a limit of %d MiB", m.peak>>20, limit>>20)
			}
		})
	}
}

func TestNoStateLeaksBetweenRuns(t *testing.T) {
	rn := NewRunner(Limits{PoolSize: 1})
	ctx := context.Background()
	polluters := []string{
		`function () {
			leak = 1; globalThis.leak2 = 2; this.leak3 = 3;
			Array.prototype.evil = 1; Object.prototype.polluted = 1;
			JSON.parse = null; Math.random = function () { return 4; };
			try { Object.defineProperty(Object.prototype, "sneaky", {value: 1}); } catch (e) {}
			try { getContext().getCollection().extra = 1; } catch (e) {}
			try { ErrorCodes.BadRequest = 1; } catch (e) {}
		}`,
		`function () { (0, eval)("var leakedVar = 4; let leakedLet = 5; function leakedFn() {}"); }`,
		`function () { "use strict"; Array.prototype.evil = 1; }`,
	}
	check := `function () {
		getContext().getResponse().setBody([typeof leak, typeof leak2, typeof leak3, [].evil, ({}).polluted, ({}).sneaky,
			typeof JSON.parse, Math.random() === 4, getContext().getCollection().extra, ErrorCodes.BadRequest,
			typeof leakedVar, typeof leakedLet, typeof leakedFn]);
	}`
	want := `["undefined","undefined","undefined",null,null,null,"function",false,null,400,"undefined","undefined","undefined"]`
	for i, p := range polluters {
		_, _ = rn.Execute(ctx, Script{ID: fmt.Sprint("polluter", i), Body: p}, nil, newFakeCollection(), ExecuteOptions{})
		res, err := rn.Execute(ctx, Script{ID: "check", Body: check}, nil, newFakeCollection(), ExecuteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Body) != want {
			t.Fatalf("after polluter %d:\ngot  %s\nwant %s", i, res.Body, want)
		}
	}
	_, err := rn.Execute(ctx, Script{ID: "strict", Body: polluters[2]}, nil, newFakeCollection(), ExecuteOptions{})
	if status, msg := statusAndMessage(t, err); status != 400 || !strings.Contains(msg, "TypeError") {
		t.Fatalf("strict assignment to a frozen built-in: got %d %s", status, msg)
	}
}

func TestNoHostAccess(t *testing.T) {
	body := `function () {
		getContext().getResponse().setBody([typeof require, typeof setTimeout, typeof setInterval, typeof process,
			typeof GoError, typeof ArrayBuffer, typeof host, typeof eval, typeof Function]);
	}`
	res, err := NewRunner(Limits{}).Execute(context.Background(), Script{ID: "host", Body: body}, nil, newFakeCollection(), ExecuteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `["undefined","undefined","undefined","undefined","undefined","undefined","undefined","function","function"]`; string(res.Body) != want {
		t.Fatalf("got  %s\nwant %s", res.Body, want)
	}
}

func TestConcurrentRuns(t *testing.T) {
	rn := NewRunner(Limits{PoolSize: 2})
	coll := newFakeCollection()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				res, err := rn.Execute(context.Background(), Script{ID: "addOrder", Body: addOrderJS, ETag: "1"},
					args(fmt.Sprintf(`{"id":%q,"customerId":"c1","total":%d}`, id, i)), coll, ExecuteOptions{})
				if err != nil {
					errs <- err
					return
				}
				if string(res.Body) != fmt.Sprintf("%q", id) {
					errs <- fmt.Errorf("run %s returned %s", id, res.Body)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(coll.writes); n != 100 {
		t.Fatalf("%d writes, want 100", n)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
