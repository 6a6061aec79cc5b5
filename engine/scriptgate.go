package engine

import (
	"context"
	"sync"
	"time"
)

// scriptGate admits stored procedures and triggers, sharing the cores they
// may take fairly between logical partitions.
//
// There are two kinds of slots. Full slots (half the cores) run a script for
// its whole time budget. One partition holds at most perKey slots of either
// kind at once, so a caller looping endless procedures in its partition
// takes one core and never every slot; a partition's scripts run one
// transaction at a time anyway (they take its write lock). When a full slot
// frees, the partitions waiting get it in turn, round robin, each
// partition's own requests first come first served.
//
// Short slots (as many again) are for a script that arrives while the full
// slots are taken, from a partition that holds none: it runs at once, but
// for one quantum only. A script still running then is stopped with 429,
// and its partition is kept out of the short slots for a while, so that its
// retry waits for a full slot in turn. Scripts already waiting get a short
// slot that frees only when none was overrun for a while: endless loops
// arriving at once in many partitions cost one quantum, not one each. So a
// trivial procedure starts at once while another caller loops endless ones,
// and endless loops in many partitions still keep at most half the cores.
type scriptGate struct {
	mu      sync.Mutex
	full    int // full slots
	short   int // short slots
	perKey  int // slots one key may hold
	quantum time.Duration
	banFor  time.Duration // how long a key that overran a short slot stays out of them
	now     func() time.Time

	runningFull  int
	runningShort int
	held         map[string]int       // slots held, by key
	banned       map[string]time.Time // keys kept out of short slots, until when
	lastOverrun  time.Time            // when a short slot was last overrun
	queues       map[string][]*waiter // requests waiting, by key, oldest first
	ring         []string             // keys with waiting requests, in turn order
}

// maxBanned is how many banned keys are kept before the expired ones are
// swept out.
const maxBanned = 1024

// waiter is a request waiting for a slot; ready is closed when it gets one.
type waiter struct {
	key     string
	ready   chan struct{}
	granted bool
	short   bool
}

// slot is a slot a script holds.
type slot struct {
	key   string
	short bool
}

func newScriptGate(full, perKey int, quantum, banFor time.Duration) *scriptGate {
	return &scriptGate{full: full, short: full, perKey: perKey, quantum: quantum, banFor: banFor, now: time.Now,
		held: map[string]int{}, banned: map[string]time.Time{}, queues: map[string][]*waiter{}}
}

// acquire takes a slot for key, waiting its turn until ctx is done; it
// returns ctx's error when it gave up.
func (g *scriptGate) acquire(ctx context.Context, key string) (slot, error) {
	g.mu.Lock()
	if len(g.queues[key]) == 0 {
		if g.runningFull < g.full && g.held[key] < g.perKey {
			g.take(key, false)
			g.mu.Unlock()
			return slot{key: key}, nil
		}
		if g.mayTakeShort(key) {
			g.take(key, true)
			g.mu.Unlock()
			return slot{key: key, short: true}, nil
		}
	}
	w := &waiter{key: key, ready: make(chan struct{})}
	if len(g.queues[key]) == 0 {
		g.ring = append(g.ring, key)
	}
	g.queues[key] = append(g.queues[key], w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return slot{key: key, short: w.short}, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted {
		// The slot came as the wait ended: pass it on.
		g.free(slot{key: key, short: w.short})
		return slot{}, ctx.Err()
	}
	q := g.queues[key]
	for i, o := range q {
		if o == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(g.queues, key)
		g.dropFromRing(key)
	} else {
		g.queues[key] = q
	}
	return slot{}, ctx.Err()
}

// release gives back a slot. overran reports a script stopped at the end of
// its quantum in a short slot: its key is kept out of short slots for a
// while.
func (g *scriptGate) release(s slot, overran bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.short && overran {
		now := g.now()
		g.lastOverrun = now
		if len(g.banned) >= maxBanned {
			for k, until := range g.banned {
				if !now.Before(until) {
					delete(g.banned, k)
				}
			}
		}
		g.banned[s.key] = now.Add(g.banFor)
	}
	g.free(s)
}

// stats reports how many scripts run and how many wait.
func (g *scriptGate) stats() (running, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range g.queues {
		waiting += len(q)
	}
	return g.runningFull + g.runningShort, waiting
}

// mayTakeShort reports whether key may take a short slot now. Called with
// mu held.
func (g *scriptGate) mayTakeShort(key string) bool {
	if g.runningShort >= g.short || g.held[key] != 0 {
		return false
	}
	if until, ok := g.banned[key]; ok {
		if g.now().Before(until) {
			return false
		}
		delete(g.banned, key)
	}
	return true
}

func (g *scriptGate) take(key string, short bool) {
	if short {
		g.runningShort++
	} else {
		g.runningFull++
	}
	g.held[key]++
}

// free returns a slot and hands the free slots to the waiting keys in turn:
// a full slot to the first key of the ring that may hold one more, a short
// one to the first that holds none and may take one; a key served goes to
// the ring's end if it has more waiting. Called with mu held.
func (g *scriptGate) free(s slot) {
	if s.short {
		g.runningShort--
	} else {
		g.runningFull--
	}
	if g.held[s.key]--; g.held[s.key] == 0 {
		delete(g.held, s.key)
	}
	for {
		i, short := g.next()
		if i < 0 {
			return
		}
		k := g.ring[i]
		g.ring = append(g.ring[:i:i], g.ring[i+1:]...)
		q := g.queues[k]
		w := q[0]
		q[0] = nil
		if q = q[1:]; len(q) > 0 {
			g.queues[k] = q
			g.ring = append(g.ring, k)
		} else {
			delete(g.queues, k)
		}
		g.take(k, short)
		w.granted, w.short = true, short
		close(w.ready)
	}
}

// next finds the waiting key to serve now: its index in the ring and
// whether it gets a short slot; -1 when none can be served. Called with mu
// held.
func (g *scriptGate) next() (int, bool) {
	if g.runningFull < g.full {
		for i, k := range g.ring {
			if g.held[k] < g.perKey {
				return i, false
			}
		}
	}
	if g.now().Sub(g.lastOverrun) < g.banFor/4 {
		return -1, false
	}
	for i, k := range g.ring {
		if g.mayTakeShort(k) {
			return i, true
		}
	}
	return -1, false
}

func (g *scriptGate) dropFromRing(key string) {
	for i, k := range g.ring {
		if k == key {
			g.ring = append(g.ring[:i:i], g.ring[i+1:]...)
			return
		}
	}
}
