package query

import (
	"container/heap"
	"math"
	"sort"
	"strconv"
)

// rootIter yields the documents a query level ranges over.
type rootIter func(yield func(value) bool)

// streaming reports whether rows can be emitted as they are produced.
func (q *selectQuery) streaming() bool {
	return len(q.aggs) == 0 && len(q.groupBy) == 0 && len(q.orderBy) == 0 && !q.distinct
}

// limits are the TOP, OFFSET and LIMIT values; -1 means absent.
type limits struct{ top, offset, limit int }

func (c *evalCtx) count(x expr, what string) int {
	if x == nil {
		return -1
	}
	v := x.eval(c, nil)
	if v.k != kNumber || v.n < 0 || !isInteger(v.n) || v.n > math.MaxInt32 {
		c.fail(runtimeError("The %s value must be a non-negative 32-bit integer.", what))
		return 0
	}
	return int(v.n)
}

func (q *selectQuery) limits(c *evalCtx) limits {
	return limits{top: c.count(q.top, "TOP"), offset: c.count(q.offset, "OFFSET"), limit: c.count(q.limit, "LIMIT")}
}

// take is how many rows may be emitted after the offset; -1 means no bound.
func (l limits) take() int {
	switch {
	case l.top >= 0 && l.limit >= 0:
		return min(l.top, l.limit)
	case l.top >= 0:
		return l.top
	}
	return l.limit
}

// run evaluates the query level and passes each result to emit until emit
// returns false. roots is nil for subqueries (one pass over the outer row).
func (q *selectQuery) run(c *evalCtx, outer *env, roots rootIter, emit func(value) bool) {
	switch {
	case len(q.from) > 0 && q.from[0].sub != nil:
		// A subquery source feeds this level; a nested one runs once over the
		// outer row (inner is nil), a top-level one over the documents.
		sub, inner := q.from[0].sub, roots
		roots = func(y func(value) bool) { sub.run(c, outer, inner, y) }
	case roots == nil || len(q.from) == 0:
		roots = func(y func(value) bool) { y(undef) }
	}
	lim := q.limits(c)
	if c.err != nil {
		return
	}
	e := &env{vals: make([]value, q.nslots), parent: outer}
	if q.streaming() {
		skip, left := max(lim.offset, 0), lim.take()
		if left == 0 {
			return
		}
		roots(func(root value) bool {
			e.root = root
			return q.rows(c, e, 0, func() bool {
				v := q.project(c, e)
				if !v.defined() || c.err != nil {
					return c.err == nil
				}
				if skip > 0 {
					skip--
					return true
				}
				if !emit(v) {
					return false
				}
				left--
				return left != 0
			})
		})
		return
	}
	var recs []record
	dedupedEarly := false
	if len(q.aggs) > 0 || len(q.groupBy) > 0 {
		recs = q.runGroups(c, e, roots)
	} else {
		// With ORDER BY and a bound on the output (TOP or LIMIT) only the
		// best offset+take rows need keeping: a heap holds them.
		top := &topRecords{q: q, bound: -1}
		rank := q.newRankRun(c)
		if len(q.orderBy) > 0 && !q.distinct && lim.take() >= 0 && rank == nil {
			top.bound = max(lim.offset, 0) + lim.take()
		}
		// Without ORDER BY, DISTINCT keeps each value once as it comes,
		// not every row until the end.
		var seenEarly map[string]bool
		if q.distinct && len(q.orderBy) == 0 && rank == nil {
			seenEarly, dedupedEarly = map[string]bool{}, true
		}
		roots(func(root value) bool {
			e.root = root
			if rank != nil && outer == nil {
				rank.count(c, root)
			}
			return q.rows(c, e, 0, func() bool {
				r := q.record(c, e)
				if !r.out.defined() || r.skip {
					return c.err == nil // never emitted, never counted
				}
				if seenEarly != nil {
					k := string(appendCanonical(nil, r.out))
					if seenEarly[k] {
						return c.err == nil
					}
					seenEarly[k] = true
					c.charge(int64(len(k)) + 48)
				}
				if rank != nil {
					r.rank = rank.raw(c, e)
				}
				r.seq = len(recs) + top.seen
				if top.bound >= 0 {
					if top.add(r) {
						c.charge(recordSize(r))
					}
				} else {
					r = detachRecord(r)
					c.charge(recordSize(r))
					recs = append(recs, r)
				}
				return c.err == nil
			})
		})
		if top.bound >= 0 {
			recs = top.recs
		}
		if rank != nil && c.err == nil {
			exact := rank.finish(recs, c.rankCuts, max(lim.offset, 0), lim.take())
			if c.rankExact != nil && outer == nil {
				*c.rankExact = exact
			}
		}
	}
	if c.err != nil {
		return
	}
	if len(q.orderBy) > 0 {
		sort.Slice(recs, func(i, j int) bool { return q.before(recs[i], recs[j]) })
	}
	var seen map[string]bool
	if q.distinct && !dedupedEarly {
		seen = map[string]bool{}
	}
	skip, left := max(lim.offset, 0), lim.take()
	for _, r := range recs {
		if left == 0 {
			return
		}
		if !r.out.defined() {
			continue
		}
		if seen != nil {
			k := string(appendCanonical(nil, r.out))
			if seen[k] {
				continue
			}
			seen[k] = true
			if c.charge(int64(len(k)) + 48); c.err != nil {
				return
			}
		}
		if skip > 0 {
			skip--
			continue
		}
		if !emit(r.out) {
			return
		}
		left--
	}
}

// record is one projected row with its ORDER BY keys; seq is its arrival
// order, which breaks ties so that sorting is stable.
type record struct {
	out  value
	keys []value
	seq  int
	// rank is what the row gives ORDER BY RANK's components, until the
	// ranking is known; skip drops a row without the vector its ORDER BY
	// VectorDistance needs.
	rank []rankRaw
	skip bool
}

// before reports whether a sorts before b under ORDER BY.
func (q *selectQuery) before(a, b record) bool {
	for k, o := range q.orderBy {
		if cmp := compareOrder(a.keys[k], b.keys[k]); cmp != 0 {
			return (cmp < 0) != o.desc
		}
	}
	return a.seq < b.seq
}

// topRecords keeps the bound best records seen, in a heap whose root is the
// worst of them.
type topRecords struct {
	q     *selectQuery
	bound int
	recs  []record
	seen  int
}

func (t *topRecords) Len() int           { return len(t.recs) }
func (t *topRecords) Less(i, j int) bool { return t.q.before(t.recs[j], t.recs[i]) }
func (t *topRecords) Swap(i, j int)      { t.recs[i], t.recs[j] = t.recs[j], t.recs[i] }
func (t *topRecords) Push(x any)         { t.recs = append(t.recs, x.(record)) }
func (t *topRecords) Pop() any {
	r := t.recs[len(t.recs)-1]
	t.recs = t.recs[:len(t.recs)-1]
	return r
}

// add offers r to the heap; it reports whether the heap grew.
func (t *topRecords) add(r record) bool {
	t.seen++
	switch {
	case t.bound == 0:
	case len(t.recs) < t.bound:
		heap.Push(t, detachRecord(r))
		return true
	case t.q.before(r, t.recs[0]):
		t.recs[0] = detachRecord(r)
		heap.Fix(t, 0)
	}
	return false
}

// recordSize estimates the memory a kept record holds.
func recordSize(r record) int64 {
	return sizeRecord + int64(sizeValue*len(r.keys)) + sizeOf(r.out)
}

func (q *selectQuery) record(c *evalCtx, e *env) record {
	r := record{out: q.project(c, e)}
	if len(q.orderBy) > 0 {
		r.keys = make([]value, len(q.orderBy))
		for i, o := range q.orderBy {
			if o.rank {
				continue
			}
			k := o.x.eval(c, e)
			if sc := searchCallOf(o.x); sc != nil && (sc.kind == skVectorDistance || sc.kind == skVectorScore) {
				// Written without ASC or DESC, the order is the closest
				// first. Rows without a vector of the query's dimensions
				// have no distance: an index search leaves them out, a
				// brute-force search (third argument true) ranks them as
				// the service does, as the least close (first by
				// distance, last by similarity).
				switch {
				case k.k != kNumber && !sc.bruteForce:
					r.skip = true
				case k.k != kNumber:
					if !o.explicit && sc.metricFor(c).higherIsCloser() {
						k = strV("") // after every number: last
					}
				case !o.explicit && sc.metricFor(c).higherIsCloser():
					k = numV(-k.n)
				}
			}
			r.keys[i] = k
		}
	}
	return r
}

// rows binds FROM sources from index i on and calls fn for every row that
// passes WHERE; it returns false when fn asked to stop, or when the
// execution must stop (cancelled, out of budget or failed).
//
// With e.pos set (RowsFrom), rows records each source's element ordinal in
// e.pos, starts at e.from, and once the time budget has expired stops
// before the next element, leaving in e.pos the position to resume at;
// other levels fail with ErrTimeBudget instead.
func (q *selectQuery) rows(c *evalCtx, e *env, i int, fn func() bool) bool {
	if !c.tick() {
		return false
	}
	if c.expired && e.pos == nil {
		c.fail(ErrTimeBudget)
		return false
	}
	if i == len(q.from) {
		e.from = nil
		ok := true
		if q.where == nil || q.where.eval(c, e).isTrue() {
			if c.matched != nil && c.matched.root == q {
				c.matched.n++
			}
			ok = fn()
		}
		if e.pos != nil {
			c.progressed = true
		}
		return ok && c.err == nil
	}
	src := q.from[i]
	start := 0
	if e.from != nil {
		start = e.from[i]
	}
	if src.sub != nil && i > 0 {
		more, j := true, 0
		src.sub.run(c, e, nil, func(v value) bool {
			if j++; j-1 < start {
				return true
			}
			if !q.enter(c, e, i, j-1, start) {
				more = false
				return false
			}
			e.vals[src.slot] = v
			more = q.rows(c, e, i+1, fn)
			return more
		})
		return more && c.err == nil
	}
	if e.pos != nil {
		clear(e.pos[i:]) // the source is evaluated before any element is bound
	}
	var v value
	if src.sub != nil {
		v = e.root
	} else {
		v = src.x.eval(c, e)
	}
	if src.in {
		if v.k != kArray {
			return c.err == nil
		}
		arr := v.array()
		for j := start; j < len(arr); j++ {
			if !q.enter(c, e, i, j, start) {
				return false
			}
			e.vals[src.slot] = arr[j]
			if !q.rows(c, e, i+1, fn) {
				return false
			}
		}
		return c.err == nil
	}
	if !v.defined() || start > 0 {
		return c.err == nil
	}
	if !q.enter(c, e, i, 0, start) {
		return false
	}
	e.vals[src.slot] = v
	return q.rows(c, e, i+1, fn)
}

// enter is about to bind element j of source i (start is the element
// rows began at): when positions are tracked it records j, or stops before
// it once the time budget has expired, leaving j as the position to resume
// at.
func (q *selectQuery) enter(c *evalCtx, e *env, i, j, start int) bool {
	if e.pos == nil {
		return true
	}
	if j != start {
		e.from = nil
	}
	e.pos[i] = j
	clear(e.pos[i+1:])
	if c.expired && c.progressed {
		c.stopped = true
		return false
	}
	return true
}

func (q *selectQuery) project(c *evalCtx, e *env) value {
	if q.star {
		return e.vals[0]
	}
	if q.isValue {
		return q.items[0].x.eval(c, e)
	}
	o := &object{keys: make([]string, 0, len(q.items)), vals: make([]value, 0, len(q.items))}
	for _, it := range q.items {
		if v := it.x.eval(c, e); v.defined() {
			o.keys = append(o.keys, it.alias)
			o.vals = append(o.vals, v)
		}
	}
	return objV(o)
}

// group is one GROUP BY bucket: the first row's bindings and accumulators.
type group struct {
	vals []value
	root value
	key  value // the first GROUP BY key's value
	accs []aggState
}

func (q *selectQuery) runGroups(c *evalCtx, e *env, roots rootIter) []record {
	var groups []*group
	index := map[string]*group{}
	newGroup := func() *group {
		// A group keeps its first row's bindings for the projection:
		// detached from the documents, so that it holds what is charged.
		g := &group{vals: make([]value, len(e.vals)), root: detach(e.root), accs: make([]aggState, len(q.aggs))}
		held := int64(64+sizeValue*(len(g.vals)+1)+96*len(g.accs)) + sizeOf(g.root)
		for i, v := range e.vals {
			g.vals[i] = detach(v)
			held += sizeOf(g.vals[i])
		}
		for i, a := range q.aggs {
			g.accs[i].fn = a.fn
		}
		groups = append(groups, g)
		c.charge(held)
		return g
	}
	if len(q.groupBy) == 0 {
		newGroup()
	}
	var key []byte
	roots(func(root value) bool {
		e.root = root
		return q.rows(c, e, 0, func() bool {
			var g *group
			if len(q.groupBy) == 0 {
				g = groups[0]
			} else {
				key = key[:0]
				for _, gx := range q.groupBy {
					key = appendCanonical(key, gx.eval(c, e))
					key = append(key, 0)
				}
				if g = index[string(key)]; g == nil {
					g = newGroup()
					g.key = detach(q.groupBy[0].eval(c, e))
					index[string(key)] = g
					c.charge(int64(len(key)) + 48 + sizeOf(g.key))
				}
			}
			for i, a := range q.aggs {
				if n := g.accs[i].add(a.arg.eval(c, e)); n > 0 {
					c.charge(n)
				}
			}
			return c.err == nil
		})
	})
	if len(q.groupBy) == 1 {
		// The service's documented single-key results come back ordered by
		// the key (undefined first); with several keys they come back in
		// first-seen order, which is what groups already holds.
		sort.SliceStable(groups, func(i, j int) bool { return compareOrder(groups[i].key, groups[j].key) < 0 })
	}
	recs := make([]record, 0, len(groups))
	for _, g := range groups {
		ge := &env{vals: g.vals, root: g.root, parent: e.parent, aggs: make([]value, len(g.accs))}
		for i := range g.accs {
			ge.aggs[i] = g.accs[i].result()
		}
		r := q.record(c, ge)
		r.seq = len(recs)
		recs = append(recs, r)
	}
	return recs
}

// aggState accumulates one aggregate over a group's rows.
type aggState struct {
	fn      string
	n       int
	sum     float64
	invalid bool
	best    value
	list    []value
	set     map[string]bool
}

// add accumulates v; it returns the bytes the state grew by (MAKELIST and
// MAKESET keep their values).
func (a *aggState) add(v value) int64 {
	if !v.defined() {
		return 0
	}
	switch a.fn {
	case "COUNT":
		a.n++
	case "COUNTIF":
		if v.isTrue() {
			a.n++
		}
	case "SUM", "AVG":
		if v.k != kNumber {
			a.invalid = true
			return 0
		}
		a.n++
		a.sum += v.n
	case "MIN", "MAX":
		if v.k == kArray || v.k == kObject {
			a.invalid = true
			return 0
		}
		if !a.best.defined() {
			a.best = detach(v)
			return 0
		}
		cmp := compareOrder(v, a.best)
		if (a.fn == "MIN" && cmp < 0) || (a.fn == "MAX" && cmp > 0) {
			a.best = detach(v)
		}
	case "MAKELIST":
		a.list = append(a.list, detach(v))
		return sizeValue + sizeOf(v)
	case "MAKESET":
		if a.set == nil {
			a.set = map[string]bool{}
		}
		k := string(appendCanonical(nil, v))
		if !a.set[k] {
			a.set[k] = true
			a.list = append(a.list, detach(v))
			return sizeValue + sizeOf(v) + int64(len(k)) + 48
		}
	}
	return 0
}

func (a *aggState) result() value {
	switch a.fn {
	case "COUNT", "COUNTIF":
		return numV(float64(a.n))
	case "SUM":
		if a.invalid {
			return undef
		}
		return numV(a.sum)
	case "AVG":
		if a.invalid || a.n == 0 {
			return undef
		}
		return numV(a.sum / float64(a.n))
	case "MIN", "MAX":
		if a.invalid {
			return undef
		}
		return a.best
	case "MAKELIST", "MAKESET":
		if a.list == nil {
			return arrV([]value{})
		}
		return arrV(a.list)
	}
	return undef
}

// appendCanonical encodes v so that equal values (ignoring object property
// order) produce equal bytes; undefined has its own encoding.
func appendCanonical(buf []byte, v value) []byte {
	switch v.k {
	case kUndefined:
		return append(buf, 'U')
	case kObject:
		keys := sortedKeys(v.object())
		buf = append(buf, '{')
		for _, k := range keys {
			buf = strconv.AppendQuote(buf, k)
			buf = append(buf, ':')
			buf = appendCanonical(buf, v.object().get(k))
			buf = append(buf, ',')
		}
		return append(buf, '}')
	case kArray:
		buf = append(buf, '[')
		for _, el := range v.array() {
			buf = appendCanonical(buf, el)
			buf = append(buf, ',')
		}
		return append(buf, ']')
	}
	return appendJSON(buf, v)
}
