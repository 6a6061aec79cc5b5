package compat

import (
	"context"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/orrerytest"
)

// heapNow returns the heap's live bytes as of the last collection and the
// bytes its objects occupy now.
func heapNow() (live, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestScriptMemoryBudgetBoundsConcurrentHogs starts procedures that each
// take most of one run's memory limit and then hold it, one after another in
// partitions of their own, each once the one before holds its memory (or
// was stopped): each alone is within its own limit, eight together are far
// beyond the budget all runs share. The live heap, measured after a
// collection while they hold their memory and sampled throughout, must stay
// within that budget and some slack, and runs beyond it must have been
// stopped with the memory-limit error.
func TestScriptMemoryBudgetBoundsConcurrentHogs(t *testing.T) {
	const (
		mib     = 1 << 20
		perRun  = 64 * mib
		total   = 96 * mib
		holds   = 40 * mib // what each procedure makes and holds
		hogs    = 8
		slack   = 48 * mib // one run's allocation between two checks, and the server's own
		timeout = 60 * time.Second
	)
	s := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{
		ScriptLimits:         script.Limits{Timeout: timeout, MaxMemory: perRun, MaxTotalMemory: total},
		MaxConcurrentScripts: hogs,
	}})
	newContainer(t, s, "db", "items", "/pk")
	createSproc(t, s, "db", "items", "hog", `function hog(kib) {
		var held = [];
		for (var i = 0; i < kib; i++) held.push("y".repeat(1000) + i);
		while (held.length > 0) {}
	}`)
	// The base is the live heap once what earlier tests of the process left
	// behind has been freed: collect until it stops shrinking.
	runtime.GC()
	base, _ := heapNow()
	for settle := time.Now().Add(10 * time.Second); time.Now().Before(settle); {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		now, _ := heapNow()
		if now+mib/2 >= base {
			base = min(base, now)
			break
		}
		base = now
	}
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if live, _ := heapNow(); live > peak.Load() {
				peak.Store(live)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopped, holding atomic.Int64
	var wg sync.WaitGroup
	for i := range hogs {
		holding.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer holding.Add(-1)
			status, body, err := executeSprocCtx(ctx, s, "db", "items", "hog", "hog"+strconv.Itoa(i), holds/1024)
			switch {
			case err != nil && ctx.Err() != nil:
				// held on until cancelled
			case err != nil:
				t.Errorf("hog %d: %v", i, err)
			case status == http.StatusBadRequest:
				stopped.Add(1)
			default:
				t.Errorf("hog %d answered %d %s, want 400 (stopped for memory) or to hold on until cancelled", i, status, body)
			}
		}()
		// The next one starts once every one still running holds its
		// memory: the live heap, collected, has grown by all of it.
		for deadline := time.Now().Add(timeout / 2); ; time.Sleep(5 * time.Millisecond) {
			target := base + uint64(holding.Load())*(holds-holds/8)
			if _, objects := heapNow(); objects >= target {
				// Maybe: a collection tells.
				runtime.GC()
				if live, _ := heapNow(); live >= target {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("hog %d never held its memory", i)
			}
		}
	}
	runtime.GC()
	held, _ := heapNow()
	cancel()
	wg.Wait()
	close(stopSampling)
	<-sampled
	grownHeld, grownPeak := int64(held)-int64(base), int64(peak.Load())-int64(base)
	t.Logf("%d procedures of %d MiB each, budget %d MiB: %d stopped; live heap grown %d MiB with all started, at most %d MiB sampled",
		hogs, holds/mib, total/mib, stopped.Load(), grownHeld/mib, grownPeak/mib)
	if grownHeld > total+slack {
		t.Errorf("with %d procedures holding %d MiB each the live heap grew %d MiB, beyond the %d MiB budget (and %d MiB slack)",
			hogs, holds/mib, grownHeld/mib, total/mib, slack/mib)
	}
	if grownPeak > total+2*slack {
		t.Errorf("the live heap peaked %d MiB over its base, beyond the %d MiB budget (and %d MiB slack)", grownPeak/mib, total/mib, 2*slack/mib)
	}
	if stopped.Load() == 0 {
		t.Error("no procedure was stopped for memory, though together they hold far beyond the budget")
	}
}
