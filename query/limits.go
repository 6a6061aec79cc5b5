package query

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeBudget is returned when an execution runs past Options.Deadline
// where it cannot stop between rows: a whole evaluation (ORDER BY,
// aggregates, GROUP BY, DISTINCT), or inside one row's evaluation. RowsFrom
// stops between rows instead and returns where to resume.
var ErrTimeBudget = errors.New("query: the execution ran out of its time budget")

// ErrMemoryPool is returned when the memory the process's queries share
// (Options.Pool) is taken by other executions: the query is refused without
// being at fault, and may be retried later.
var ErrMemoryPool = errors.New("query: the memory shared by queries is in use")

// MemoryPool is the memory all the executions of a process may hold together
// in rows, groups, sort buffers and results. Executions reserve from it in
// chunks as they grow and return everything when they end. It is safe for
// concurrent use.
type MemoryPool struct {
	limit int64
	used  atomic.Int64
}

// NewMemoryPool returns a pool of limit bytes.
func NewMemoryPool(limit int64) *MemoryPool { return &MemoryPool{limit: limit} }

// InUse reports the bytes currently reserved by executions.
func (p *MemoryPool) InUse() int64 { return p.used.Load() }

func (p *MemoryPool) acquire(n int64) bool {
	for {
		u := p.used.Load()
		if u+n > p.limit {
			return false
		}
		if p.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (p *MemoryPool) release(n int64) { p.used.Add(-n) }

// poolChunk is how much an execution reserves from its pool at a time.
const poolChunk = 1 << 20

// memAccount is what one execution holds, estimated in bytes of Go heap.
type memAccount struct {
	used     int64
	limit    int64 // 0: no per-execution limit
	pool     *MemoryPool
	reserved int64 // taken from pool
}

// charge adds n bytes; it fails the execution past its limit or when the
// pool has no more to give.
func (c *evalCtx) charge(n int64) {
	m := &c.mem
	m.used += n
	if m.limit > 0 && m.used > m.limit {
		c.fail(memoryLimitError(m.limit))
		return
	}
	if m.pool != nil && m.used > m.reserved {
		need := (m.used - m.reserved + poolChunk - 1) / poolChunk * poolChunk
		if !m.pool.acquire(need) {
			c.fail(ErrMemoryPool)
			return
		}
		m.reserved += need
	}
}

// uncharge gives back n bytes charged for something no longer held.
func (c *evalCtx) uncharge(n int64) {
	c.mem.used -= n
}

// release returns the account's reservation to its pool.
func (m *memAccount) release() {
	if m.pool != nil {
		m.pool.release(m.reserved)
		m.reserved = 0
	}
}

func memoryLimitError(limit int64) *Error {
	return &Error{Code: CodeRuntime, Message: fmt.Sprintf(
		"Query exceeded the maximum allowed memory usage of %d MB. "+
			"Please consider adding filters, TOP or OFFSET/LIMIT, or fewer JOINs, to reduce what the query must hold.",
		(limit+(1<<20)-1)>>20)}
}

// Sizes of the evaluator's structures, for charging memory.
const (
	sizeValue  = 32 // value
	sizeObject = 64 // object: two slice headers and a string header
	sizeRecord = 64 // record: a value, a slice header, an int
	sizeString = 16 // a string header
	sizeSlice  = 24 // a slice header
)

// sizeOf estimates the heap bytes v holds beyond its own value word. A
// value read from the document still shares the document's memory; counting
// it anyway errs on the side of refusing early, and the results of such a
// query are encoded copies in the end.
func sizeOf(v value) int64 {
	switch v.k {
	case kString:
		return int64(v.l)
	case kArray:
		n := int64(sizeValue * v.l)
		for _, el := range v.array() {
			n += sizeOf(el)
		}
		return n
	case kObject:
		o := v.object()
		if o.raw != "" {
			return sizeObject + int64(len(o.raw))
		}
		n := int64(sizeObject + sizeString*len(o.keys) + sizeValue*len(o.vals))
		for _, el := range o.vals {
			n += sizeOf(el)
		}
		return n
	}
	return 0
}

// tickEvery is how many units of work pass between checks of the context
// and the clock: often enough to stop within a millisecond or so, rarely
// enough to cost nothing.
const tickEvery = 256

// HeavyAfter is how many units of work (rows bound, JOIN elements visited)
// an execution does before it counts as costly and calls Options.Heavy: a
// few milliseconds of work.
const HeavyAfter = 1 << 15

// Gate is what a costly execution passes before its work goes on
// (Options.Heavy): Enter may wait for the right to run, and its error stops
// the execution. An interface rather than a function, so that the caller's
// gate (a pointer) needs no closure of its own.
type Gate interface{ Enter() error }

// GateFunc is a function as a Gate.
type GateFunc func() error

// Enter calls f.
func (f GateFunc) Enter() error { return f() }

// heavyGate enters Options.Heavy once, when the runs of one execution have
// done HeavyAfter units of work between them.
type heavyGate struct {
	gate Gate
	work atomic.Int64
	once sync.Once
	err  error
}

// pass counts n units of work; past HeavyAfter it waits for the gate.
func (g *heavyGate) pass(n int64) error {
	if g.work.Add(n) < HeavyAfter {
		return nil
	}
	g.once.Do(func() { g.err = g.gate.Enter() })
	return g.err
}

// tick counts one unit of work (a row bound, a JOIN element) and, every
// tickEvery of them, checks for cancellation and the time budget, and
// passes the heavy gate. It returns false when the execution must stop.
func (c *evalCtx) tick() bool {
	c.ticks++
	if c.ticks%tickEvery == 0 {
		if c.heavy != nil {
			if err := c.heavy.pass(tickEvery); err != nil {
				c.fail(err)
			}
		}
		if c.ctx != nil {
			if err := c.ctx.Err(); err != nil {
				c.fail(err)
			}
		}
		if !c.deadline.IsZero() && !c.expired && time.Now().After(c.deadline) {
			c.expired = true
		}
	}
	return c.err == nil
}

// detach returns v with its own copy of every string, key, array and
// object, so that keeping it (a row, a group, a DISTINCT value, an
// aggregate's value) keeps alive only what sizeOf counts. Values read from a
// document are substrings of the document's whole text: a kept string of a
// few bytes would otherwise hold the whole document, which no charge counts.
func detach(v value) value {
	switch v.k {
	case kString:
		return strV(strings.Clone(v.str()))
	case kArray:
		src := v.array()
		out := make([]value, len(src))
		for i, el := range src {
			out[i] = detach(el)
		}
		return arrV(out)
	case kObject:
		o := v.object()
		d := &object{raw: strings.Clone(o.raw), keys: make([]string, len(o.keys)), vals: make([]value, len(o.vals))}
		for i, k := range o.keys {
			d.keys[i] = strings.Clone(k)
		}
		for i, el := range o.vals {
			d.vals[i] = detach(el)
		}
		return objV(d)
	}
	return v
}

// detachRecord detaches what a kept record holds.
func detachRecord(r record) record {
	r.out = detach(r.out)
	if len(r.keys) > 0 {
		keys := make([]value, len(r.keys))
		for i, k := range r.keys {
			keys[i] = detach(k)
		}
		r.keys = keys
	}
	return r
}
