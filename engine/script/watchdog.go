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
//
// The watchdog cannot see into one native operation: a copy of hundreds of
// megabytes runs to its end, holding up the forced collection (which must
// stop the world) and, while it lasts, the timers of its processor, so
// that a script doubling a string used to get several doublings past the
// ceiling before it was stopped. Such operations are bounded beforehand
// (guards.go, rewrite.go), and the concatenation natives make the check
// themselves now and then, on the script's goroutine, so that a script
// building strings fast waits for the forced collection instead of running
// ahead of it.

const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapLive    = "/gc/heap/live:bytes"
	metricGCCycles    = "/gc/cycles/total:gc-cycles"
)

// memoryWatch is a run's watchdog state.
type memoryWatch struct {
	started   bool
	ended     bool   // the run is over: it must not join the budget
	base      uint64 // live heap when the run began (at most)
	cycles    uint64 // collections finished when the run began
	threshold uint64 // heap size that makes the next forced collection
	// totalThreshold is the heap size that makes the next forced collection
	// for the budget all runs share.
	totalThreshold uint64
	nextForce      time.Time
}

// memoryBudget bounds the heap growth of all the runs in progress together
// (Limits.MaxTotalMemory): one run's ceiling does not stop eight runs, each
// begun when the others already held their memory, from holding eight
// times as much. The growth is measured from the heap when the runs in
// progress began: the base of the first run that found none in progress,
// lowered to any live heap seen since (memory held then and freed since is
// not the scripts'). Past the budget, the run that has been in progress
// longest is stopped, one after another until the heap is back within it:
// which run holds what cannot be told from the process heap, and the
// oldest has had the most time to grow it.
type memoryBudget struct {
	mu   sync.Mutex
	runs map[*run]*vm
	base uint64
	// victim is the run stopped last, until it ends; settled is the count
	// of collections finished when it ended: only a later one tells
	// whether stopping it was enough.
	victim  *run
	settled uint64
}

func newMemoryBudget() *memoryBudget {
	return &memoryBudget{runs: map[*run]*vm{}}
}

// join counts run r on v, whose heap base is base, among the runs in
// progress.
func (b *memoryBudget) join(r *run, v *vm, base uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.runs) == 0 || base < b.base {
		b.base = base
	}
	b.runs[r] = v
}

// leave ends r's part in the budget.
func (b *memoryBudget) leave(r *run) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.runs, r)
	if r == b.victim {
		b.victim = nil
		_, _, b.settled = heapBytes()
	}
}

// over takes the live heap after collection number cycles and returns the
// run to stop (and its runtime) when the runs in progress have grown the
// heap beyond total, or nil. It also returns the base the growth counts
// from.
func (b *memoryBudget) over(live, cycles, total uint64) (*run, *vm, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.base = min(b.base, live)
	if live-b.base <= total || b.victim != nil || cycles <= b.settled {
		return nil, nil, b.base
	}
	var oldest *run
	for r := range b.runs {
		if oldest == nil || r.start.Before(oldest.start) {
			oldest = r
		}
	}
	if oldest == nil {
		return nil, nil, b.base
	}
	b.victim = oldest
	return oldest, b.runs[oldest], b.base
}

// baseline returns the base the growth counts from.
func (b *memoryBudget) baseline() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.base
}

// heapBytes returns the live heap as of the last collection, the heap
// currently occupied by objects, and how many collections have finished.
func heapBytes() (live, objects, cycles uint64) {
	s := [3]metrics.Sample{{Name: metricHeapLive}, {Name: metricHeapObjects}, {Name: metricGCCycles}}
	metrics.Read(s[:])
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		objects = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		cycles = s[2].Value.Uint64()
	}
	return live, objects, cycles
}

var (
	forcedGCMu   sync.Mutex
	forcedGCLast time.Time
)

// liveAfterCollection returns the live heap after a collection that finished
// after since, forcing one unless another run already did.
func liveAfterCollection(since time.Time) (live, cycles uint64) {
	forcedGCMu.Lock()
	if forcedGCLast.Before(since) {
		runtime.GC()
		forcedGCLast = time.Now()
	}
	forcedGCMu.Unlock()
	live, _, cycles = heapBytes()
	return live, cycles
}

// pollMemory is the watchdog tick; it re-arms itself until the run ends.
func (r *run) pollMemory(v *vm) {
	if r.isDone() || r.checkMemory(v, minForceInterval) {
		return
	}
	r.poller.Reset(memoryPollInterval)
}

// checkMemory stops the run and reports true when its heap growth is beyond
// the limit. It compares the live heap of the latest collection with the
// base (free, collections happen anyway); when the heap holds more than the
// base and the limit, it forces a collection to see how much of that is
// live. After one that finds the run within its limit, the next is forced
// once the heap exceeds both the base and the limit, and the live heap found
// and an eighth of the limit: the live heap cannot grow far past the limit
// unseen, and garbage alone forces one at most every eighth of a limit of
// allocation (a script near its limit that makes much garbage gets one
// forced collection after another, at the pace below). Nor is one forced
// sooner than four times as long as the last took after it (nor than
// minSpacing), so that forced collections take a fifth of the time at most,
// unless the heap holds more than twice the limit over the base.
func (r *run) checkMemory(v *vm, minSpacing time.Duration) bool {
	r.memMu.Lock()
	defer r.memMu.Unlock()
	if r.mem.ended {
		return false
	}
	w := &r.mem
	limit, total := uint64(r.limits.MaxMemory), uint64(r.limits.MaxTotalMemory)
	if !w.started {
		live, objects, cycles := heapBytes()
		// The live heap of the last collection may count what has been
		// freed since; the heap's objects now bound what is live too.
		base := min(live, objects)
		w.started, w.base, w.cycles, w.threshold = true, base, cycles, base+limit
		r.budget.join(r, v, base)
	}
	// over stops this run, or the one the budget picks, when live (the heap
	// after a collection) is beyond a limit; it reports whether this run
	// stopped.
	over := func(live, cycles uint64) (stopped bool, totalBase uint64) {
		if live > w.base && live-w.base > limit {
			r.stop(v, newMemoryError(r.limits.MaxMemory))
			return true, 0
		}
		victim, vv, totalBase := r.budget.over(live, cycles, total)
		if victim == nil {
			return false, totalBase
		}
		victim.stop(vv, newTotalMemoryError(r.limits.MaxTotalMemory))
		return victim == r, totalBase
	}
	live, objects, cycles := heapBytes()
	totalBase := r.budget.baseline()
	// Only a collection finished during the run tells what the runs hold.
	if cycles > w.cycles {
		var stopped bool
		if stopped, totalBase = over(live, cycles); stopped {
			return true
		}
	}
	if w.totalThreshold == 0 {
		w.totalThreshold = totalBase + total
	}
	// Past twice the limit the spacing gives way: the heap is not let grow
	// further unconfirmed, and a collection then frees at least a limit's
	// worth or finds the run over it.
	urgent := objects > w.base+2*limit || objects > totalBase+2*total
	if now := time.Now(); objects > min(w.threshold, w.totalThreshold) && (urgent || now.After(w.nextForce)) {
		live, cycles = liveAfterCollection(now)
		stopped, totalBase := over(live, cycles)
		if stopped {
			return true
		}
		w.threshold = max(w.base+limit, live+limit/8)
		w.totalThreshold = max(totalBase+total, live+total/8)
		w.nextForce = time.Now().Add(max(4*time.Since(now), minSpacing))
	}
	return false
}

// checkBeforeString is called by the concatenation natives, on the script's
// goroutine, before they make a string of n characters; it reports whether
// the run may go on. Every eighth of the limit made so far, it makes the
// watchdog's check itself: the script waits for a forced collection there
// instead of making strings meanwhile, which is what a fast string builder
// does between two ticks.
func (r *run) checkBeforeString(v *vm, n int64) bool {
	r.madeChars += n
	if r.madeChars < r.limits.MaxMemory/8 {
		return true
	}
	r.madeChars = 0
	return !r.checkMemory(v, memoryPollInterval)
}

// minForceInterval is the shortest wait between two collections forced for
// a run.
const minForceInterval = 5 * memoryPollInterval
