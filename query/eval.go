package query

import (
	"context"
	"encoding/json"
	"math"
	"time"
)

// env holds one query level's bound aliases while a row is evaluated.
type env struct {
	vals   []value
	aggs   []value
	root   value
	parent *env
	// pos, when set, tracks the position of the row being evaluated: the
	// ordinal of each FROM source's current element (RowsFrom). from, while
	// set, is the position to resume at; it is cleared once passed.
	pos    []int
	from   []int
	posBuf [4]int // pos for up to four sources, without an allocation
}

// evalCtx is the per-execution state shared by every expression.
type evalCtx struct {
	params map[string]value
	udf    UDFResolver
	now    time.Time
	err    error
	// stack holds function arguments during calls. It starts nil in every
	// copy of a prepared context, so concurrent executions never share it.
	stack []value
	// shapes caches the prepared geometries of the spatial functions' lines
	// and polygons by a hash of their value (funcs_spatial.go); like stack,
	// each copy starts without one.
	shapes      map[uint64]cachedShape
	shapePoints int
	// planar: the spatial functions compute on the plane (Options).
	planar bool

	// ctx cancels the execution; deadline is its time budget (zero: none),
	// and expired is set once a tick finds it past.
	ctx      context.Context
	deadline time.Time
	expired  bool
	ticks    uint32
	// mem accounts for what a run holds; each run has its own.
	mem       memAccount
	maxMemory int64
	pool      *MemoryPool
	// heavy is the execution's gate to costly work, shared by its runs.
	heavy *heavyGate
	// progressed is set once a row of the document RowsFrom tracks has been
	// evaluated; stopped once that loop stopped between rows for the budget.
	progressed bool
	stopped    bool
	// matched counts rows that passed WHERE; shared by the execution's runs
	// (nil in contexts that do not count).
	matched *matchCount
	// search is the container's side of vector and full-text search (nil:
	// none); keywords caches the analysis of full-text keywords for one run
	// (nil until needed, so runs never share it).
	search   SearchContext
	keywords map[keywordKey][]Term
	// rankCuts are what the documents of a narrowed ORDER BY RANK run hold
	// of each component's best (ExecuteRanked); rankExact is set to
	// whether its answer is the one over the whole source.
	rankCuts  []RankCut
	rankExact *bool
}

// matchCount is the number of rows an execution found to pass its WHERE.
type matchCount struct {
	root *selectQuery // the query whose WHERE counts, not its subqueries'
	n    int64
}

// fail records the first runtime error; evaluation yields undefined after it.
func (c *evalCtx) fail(err error) value {
	if c.err == nil {
		c.err = err
	}
	return undef
}

func (x *constExpr) eval(*evalCtx, *env) value     { return x.v }
func (x *rootExpr) eval(_ *evalCtx, e *env) value  { return e.root }
func (x *paramExpr) eval(c *evalCtx, _ *env) value { return c.params[x.name] }

func (x *refExpr) eval(_ *evalCtx, e *env) value {
	for d := x.depth; d > 0; d-- {
		e = e.parent
	}
	return e.vals[x.slot]
}

func (x *propExpr) eval(c *evalCtx, e *env) value {
	v := x.x.eval(c, e)
	if v.k != kObject {
		return undef
	}
	return v.object().get(x.name)
}

func (x *indexExpr) eval(c *evalCtx, e *env) value {
	v := x.x.eval(c, e)
	i := x.idx.eval(c, e)
	switch {
	case v.k == kArray && i.k == kNumber:
		if i.n >= 0 && i.n < float64(len(v.array())) && i.n == math.Trunc(i.n) {
			return v.array()[int(i.n)]
		}
	case v.k == kObject && i.k == kString:
		return v.object().get(i.str())
	}
	return undef
}

func (x *unaryExpr) eval(c *evalCtx, e *env) value {
	v := x.x.eval(c, e)
	switch x.op {
	case "NOT":
		if v.k == kBool {
			return boolV(!v.b)
		}
	case "-":
		if v.k == kNumber {
			return numV(-v.n)
		}
	case "+":
		if v.k == kNumber {
			return v
		}
	case "~":
		if v.k == kNumber {
			return numV(float64(^toInt32(v.n)))
		}
	}
	return undef
}

// toInt32 converts like JavaScript's ToInt32.
func toInt32(f float64) int32 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return int32(uint32(int64(math.Mod(math.Trunc(f), 4294967296))))
}

func (x *binaryExpr) eval(c *evalCtx, e *env) value {
	l := x.l.eval(c, e)
	r := x.r.eval(c, e)
	return binaryOp(x.op, l, r)
}

func binaryOp(op string, l, r value) value {
	switch op {
	case "=":
		if !l.defined() || !r.defined() || l.k != r.k {
			return undef
		}
		return boolV(equalValues(l, r))
	case "!=":
		if !l.defined() || !r.defined() || l.k != r.k {
			return undef
		}
		return boolV(!equalValues(l, r))
	case "<", "<=", ">", ">=":
		if !l.defined() || l.k != r.k || l.k == kArray || l.k == kObject {
			return undef
		}
		cmp := compareOrder(l, r)
		switch op {
		case "<":
			return boolV(cmp < 0)
		case "<=":
			return boolV(cmp <= 0)
		case ">":
			return boolV(cmp > 0)
		}
		return boolV(cmp >= 0)
	case "||":
		if l.k == kString && r.k == kString {
			return strV(l.str() + r.str())
		}
		return undef
	}
	if l.k != kNumber || r.k != kNumber {
		return undef
	}
	a, b := l.n, r.n
	var f float64
	switch op {
	case "+":
		f = a + b
	case "-":
		f = a - b
	case "*":
		f = a * b
	case "/":
		f = a / b
	case "%":
		f = math.Mod(a, b)
	case "&":
		f = float64(toInt32(a) & toInt32(b))
	case "|":
		f = float64(toInt32(a) | toInt32(b))
	case "^":
		f = float64(toInt32(a) ^ toInt32(b))
	case "<<":
		f = float64(toInt32(a) << (uint32(toInt32(b)) & 31))
	case ">>":
		f = float64(toInt32(a) >> (uint32(toInt32(b)) & 31))
	case ">>>":
		f = float64(uint32(toInt32(a)) >> (uint32(toInt32(b)) & 31))
	default:
		return undef
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return undef
	}
	return numV(f)
}

func (x *andExpr) eval(c *evalCtx, e *env) value {
	l := x.l.eval(c, e)
	if l.k == kBool && !l.b {
		return falseVal
	}
	r := x.r.eval(c, e)
	if r.k == kBool && !r.b {
		return falseVal
	}
	if l.isTrue() && r.isTrue() {
		return trueValue
	}
	return undef
}

func (x *orExpr) eval(c *evalCtx, e *env) value {
	l := x.l.eval(c, e)
	if l.isTrue() {
		return trueValue
	}
	r := x.r.eval(c, e)
	if r.isTrue() {
		return trueValue
	}
	if l.k == kBool && r.k == kBool {
		return falseVal
	}
	return undef
}

func (x *betweenExpr) eval(c *evalCtx, e *env) value {
	v := x.x.eval(c, e)
	lo := binaryOp(">=", v, x.lo.eval(c, e))
	hi := binaryOp("<=", v, x.hi.eval(c, e))
	if lo.k != kBool || hi.k != kBool {
		return undef
	}
	return boolV((lo.b && hi.b) != x.not)
}

func (x *inExpr) eval(c *evalCtx, e *env) value {
	v := x.x.eval(c, e)
	if !v.defined() {
		return undef
	}
	found := false
	for _, item := range x.list {
		iv := item.eval(c, e)
		if iv.k == v.k && equalValues(v, iv) {
			found = true
			break
		}
	}
	return boolV(found != x.not)
}

func (x *likeExpr) eval(c *evalCtx, e *env) value {
	v := x.x.eval(c, e)
	p := x.pattern.eval(c, e)
	if v.k != kString || p.k != kString {
		return undef
	}
	var esc rune = -1
	if x.escape != nil {
		ev := x.escape.eval(c, e)
		if ev.k != kString {
			return undef
		}
		rs := []rune(ev.str())
		if len(rs) != 1 {
			return c.fail(runtimeError("The ESCAPE character must be a single character."))
		}
		esc = rs[0]
	}
	lp := x.static
	if lp == nil || lp.src != p.str() || lp.esc != esc {
		lp = compileLike(p.str(), esc)
	}
	return boolV(lp.match(v.str()) != x.not)
}

func (x *condExpr) eval(c *evalCtx, e *env) value {
	if x.c.eval(c, e).isTrue() {
		return x.a.eval(c, e)
	}
	return x.b.eval(c, e)
}

func (x *coalesceExpr) eval(c *evalCtx, e *env) value {
	if l := x.l.eval(c, e); l.defined() {
		return l
	}
	return x.r.eval(c, e)
}

func (x *arrayExpr) eval(c *evalCtx, e *env) value {
	out := make([]value, 0, len(x.elems))
	for _, el := range x.elems {
		if v := el.eval(c, e); v.defined() {
			out = append(out, v)
		}
	}
	return arrV(out)
}

func (x *objectExpr) eval(c *evalCtx, e *env) value {
	o := &object{keys: make([]string, 0, len(x.keys)), vals: make([]value, 0, len(x.keys))}
	for i, k := range x.keys {
		if v := x.vals[i].eval(c, e); v.defined() {
			o.set(k, v)
		}
	}
	return objV(o)
}

func (x *aggExpr) eval(_ *evalCtx, e *env) value {
	if x.slot < len(e.aggs) {
		return e.aggs[x.slot]
	}
	return undef
}

func (x *callExpr) eval(c *evalCtx, e *env) value {
	// Arguments live on the execution's stack so calls do not allocate;
	// nested calls push above them and pop before this call reads them.
	base := len(c.stack)
	for _, a := range x.args {
		v := a.eval(c, e)
		c.stack = append(c.stack, v)
	}
	args := c.stack[base:len(c.stack):len(c.stack)]
	var r value
	switch {
	case x.udf:
		r = c.callUDF(x.name, args)
	case x.search != nil:
		r = x.search.eval(c, args)
	default:
		r = x.fn.call(c, args)
	}
	clear(c.stack[base:])
	c.stack = c.stack[:base]
	return r
}

func (c *evalCtx) callUDF(name string, args []value) value {
	if c.udf == nil {
		return c.fail(runtimeError("Unknown function 'udf.%s'.", name))
	}
	raw := make([]json.RawMessage, len(args))
	for i, a := range args {
		if a.defined() {
			raw[i] = encodeJSON(a)
		}
	}
	out, err := c.udf.Call(name, raw)
	if err != nil {
		return c.fail(err)
	}
	if len(out) == 0 {
		return undef
	}
	v, err := decodeJSON(out)
	if err != nil {
		return c.fail(runtimeError("The function 'udf.%s' returned invalid JSON.", name))
	}
	return v
}

func (x *subqueryExpr) eval(c *evalCtx, e *env) value {
	switch x.mode {
	case 'e':
		found := false
		x.q.run(c, e, nil, func(value) bool { found = true; return false })
		return boolV(found)
	case 'a':
		// The array is charged while it grows, which stops a runaway one;
		// once built it is part of the row, which is charged if kept.
		out := []value{}
		var held int64
		x.q.run(c, e, nil, func(v value) bool {
			n := sizeValue + sizeOf(v)
			held += n
			c.charge(n)
			out = append(out, v)
			return c.err == nil
		})
		c.uncharge(held)
		if c.err != nil {
			return undef
		}
		return arrV(out)
	}
	res := undef
	x.q.run(c, e, nil, func(v value) bool { res = v; return false })
	return res
}
