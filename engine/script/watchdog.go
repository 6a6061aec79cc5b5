package script

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Goja has no heap limit, and Go has no per-goroutine allocation counter. So
// the memory ceiling is measured on the process heap: every
// memoryPollInterval the watchdog compares the heap (live and not yet swept
// objects) with the live heap when the run began. Growth beyond MaxMemory
// might be garbage of other goroutines, so it forces a collection and stops
// the script only if the live heap itself grew beyond MaxMemory. Under heavy
// concurrent load, other goroutines' live growth counts against a running
// script; the ceiling is a guard against runaway scripts, not an account.

const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapLive    = "/gc/heap/live:bytes"
)

// memoryWatch is a run's watchdog state.
type memoryWatch struct {
	started   bool
	base      uint64 // live heap when the run began
	threshold uint64 // heap size that makes the next forced collection
	nextForce time.Time
}

// heapBytes returns the live heap as of the last collection and the heap
// currently occupied by objects.
func heapBytes() (live, objects uint64) {
	s := [2]metrics.Sample{{Name: metricHeapLive}, {Name: metricHeapObjects}}
	metrics.Read(s[:])
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		objects = s[1].Value.Uint64()
	}
	return live, objects
}

var (
	forcedGCMu   sync.Mutex
	forcedGCLast time.Time
)

// liveAfterCollection returns the live heap after a collection that finished
// after since, forcing one unless another run already did.
func liveAfterCollection(since time.Time) uint64 {
	forcedGCMu.Lock()
	if forcedGCLast.Before(since) {
		runtime.GC()
		forcedGCLast = time.Now()
	}
	forcedGCMu.Unlock()
	live, _ := heapBytes()
	return live
}

// pollMemory is the watchdog tick; it re-arms itself until the run ends.
// Every tick compares the live heap of the latest collection with the base
// (free, collections happen anyway); when the heap has grown by the limit
// since the base or since the last forced collection, it forces one to see
// how much of that is live. So forced collections come at most once per
// limit's worth of allocation, and the ceiling may be overshot by up to one
// limit before it is caught.
func (r *run) pollMemory(v *vm) {
	if r.isDone() {
		return
	}
	live, objects := heapBytes()
	w := &r.mem
	limit := uint64(r.limits.MaxMemory)
	if !w.started {
		w.started, w.base, w.threshold = true, live, live+limit
	}
	if live > w.base && live-w.base > limit {
		r.stop(v, newMemoryError(r.limits.MaxMemory))
		return
	}
	if now := time.Now(); objects > w.threshold && now.After(w.nextForce) {
		live = liveAfterCollection(now)
		if live > w.base && live-w.base > limit {
			r.stop(v, newMemoryError(r.limits.MaxMemory))
			return
		}
		w.threshold = max(w.base, live) + limit
		w.nextForce = time.Now().Add(10 * memoryPollInterval)
	}
	r.poller.Reset(memoryPollInterval)
}
