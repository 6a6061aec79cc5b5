package postgres

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// readGroups coalesces point reads (GetAll) under load: while fewer than
// max of their round trips are in flight a read sends its own, as it
// always did; beyond that it joins the next group, and the reads of a
// group go together, when a round trip in flight lands, in one statement
// (getAllStatement over every read's keys, each read's values found by
// their places), one round trip, one watermark. A round trip costs the
// gateway, whatever it carries, a write(2) that pays PostgreSQL's receive
// and its backend's wake-up, a read that finds nothing yet, a park and a
// wake-up, and PostgreSQL a Bind, an Execute and its executor's start-up;
// a group of n reads pays them once.
//
// Each read stays linearizable: a group's statement is sent after every
// read in it began (a read joins only a group not yet sent) and answered
// before any of them returns, so its one snapshot is a moment within each
// read's call, and the watermark read in it is that snapshot's, as a read
// of its own would have it.
type readGroups struct {
	mu sync.Mutex
	// flying is the point-read round trips in flight, max their bound;
	// next is the group that the next one to land sends (nil: none
	// waiting).
	flying int
	max    int
	next   *readGroup
}

// readGroupMax is the most reads a group takes: a read that finds the next
// group full sends a round trip of its own.
const readGroupMax = 64

// readGroup is reads waiting for, then answered by, one round trip.
type readGroup struct {
	// kbuf holds the reads' keys, one after another, each ending at its
	// kends: copied, since a read whose caller goes away leaves its keys
	// in the group, and its caller may reuse them.
	kbuf  []byte
	kends []int
	// reads is the number of reads in the group.
	reads int
	// values, w and err are the answer, set before done is closed.
	values [][]byte
	w      uint64
	err    error
	done   chan struct{}
}

// newReadGroups bounds the point-read round trips in flight by the
// gateway's CPUs (at least two): more would not be served sooner, each
// costing a wake-up of its own on both sides. Fewer would cost latency:
// on two CPUs a bound of one, against two, took PostgreSQL a third less
// CPU a read under 16 clients of the SDK (median 32 against 47 µs) and
// the gateway no less, but two clients' reads waited for each other's
// round trips (median latency 1.02-1.07 ms against 0.53-0.56) and lost
// 20-35% of their reads a second.
func newReadGroups() readGroups {
	return readGroups{max: max(2, runtime.GOMAXPROCS(0))}
}

// join counts a round trip of the caller's when fewer than max are in
// flight (g is nil: the caller sends it, then calls landed); otherwise it
// adds keys to the next group and returns it, the keys' first place in
// it at at.
func (r *readGroups) join(keys [][]byte) (g *readGroup, at int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.flying < r.max || r.next != nil && r.next.reads >= readGroupMax {
		r.flying++
		return nil, 0
	}
	g = r.next
	if g == nil {
		g = &readGroup{done: make(chan struct{})}
		r.next = g
	}
	at = len(g.kends)
	for _, k := range keys {
		g.kbuf = append(g.kbuf, k...)
		g.kends = append(g.kends, len(g.kbuf))
	}
	g.reads++
	return g, at
}

// handOff is called as a round trip lands: it returns the group to send
// next, which takes the landed round trip's place in flight, or nil.
func (r *readGroups) handOff() *readGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.next
	if g == nil {
		r.flying--
		return nil
	}
	r.next = nil
	return g
}

// landed is called by a read whose own round trip landed: a group
// waiting is sent by a goroutine of its own (the read returns now).
func (s *Store) landed() {
	if g := s.reads.handOff(); g != nil {
		go s.sendGroups(g)
	}
}

// sendGroups sends g's round trip, answers its reads, and goes on with the
// groups that gathered meanwhile, until none waits. Its round trips are no
// caller's: a caller that goes away leaves its group, which goes on for
// the others, under the store's timeout.
func (s *Store) sendGroups(g *readGroup) {
	for g != nil {
		keys := make([][]byte, len(g.kends))
		from := 0
		for i, end := range g.kends {
			keys[i] = g.kbuf[from:end:end]
			from = end
		}
		g.values = make([][]byte, len(keys))
		if s.closed.Load() {
			g.err = storage.ErrClosed
		} else {
			// No caller's context: the connection's deadline keeps the
			// timeout, Close ends the round trip (see onConn).
			g.w, g.err = s.getAllTrip(context.Background(), keys, g.values)
		}
		close(g.done)
		g = s.reads.handOff()
	}
}

// awaitGroup waits for g's answer to the n keys of a read at at, within
// the store's timeout from now (a read of its own would have it) and
// while ctx lasts.
func (s *Store) awaitGroup(ctx context.Context, g *readGroup, at, n int) ([][]byte, uint64, error) {
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case <-g.done:
	case <-ctx.Done():
		return nil, 0, &callerGone{err: ctx.Err()}
	case <-timer.C:
		if s.closed.Load() {
			return nil, 0, storage.ErrClosed
		}
		return nil, 0, fmt.Errorf("postgres: %w: %w within %v", storage.ErrUnavailable, errNoAnswer, s.timeout)
	}
	if g.err != nil {
		return nil, 0, s.wrap(g.err)
	}
	return g.values[at : at+n : at+n], g.w, nil
}
