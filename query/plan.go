package query

import (
	"encoding/json"
	"strings"
)

// Plan is what the engine needs to know to execute a query well.
type Plan struct {
	// Streaming is true when rows can be produced document by document
	// (Execution.Rows): the query ranges over the documents (it has a FROM
	// that is not a subquery) and has no ORDER BY, aggregate, GROUP BY or
	// DISTINCT. TOP, OFFSET and LIMIT are then applied by the caller.
	Streaming bool
	// NeedsQueryPlan is true for queries a Cosmos gateway cannot serve across
	// partitions without a client-side query plan: ORDER BY, aggregates,
	// DISTINCT, GROUP BY, TOP or OFFSET/LIMIT.
	NeedsQueryPlan bool
	// Aggregates, GroupBy, Distinct and SelectValue describe the SELECT.
	Aggregates  bool
	GroupBy     bool
	Distinct    bool
	SelectValue bool
	// OrderBy lists the ORDER BY keys in order.
	OrderBy []OrderKey
	// Top, Offset and Limit are the resolved counts, -1 when absent.
	Top, Offset, Limit int
	// Filters are WHERE conjuncts an index can serve. Each one is implied by
	// the WHERE clause, so the engine may pre-select candidates with any of
	// them, but it must still evaluate the full query on the candidates.
	Filters []Filter
	// Vector is set when the query's only ORDER BY key is VectorDistance of
	// a document path and a constant vector: a vector index of the path may
	// supply the candidates (the closest items that pass the filters),
	// which the execution then scores and orders exactly.
	Vector *VectorSearch
	// FullText lists the full-text functions called with a document path
	// and constant keywords (FullTextContains, FullTextContainsAll,
	// FullTextContainsAny in WHERE; FullTextScore: its statistics). A
	// full-text index may pre-select the candidates of those Required.
	FullText []TextSearch
	// Rank is set for ORDER BY RANK: its scoring components, in order, and
	// RRF's weights (nil: all 1). The execution ranks exactly over the
	// documents it is given; an index may narrow them to each component's
	// best candidates, as the service does.
	Rank *RankSearch
	// Spatial lists the WHERE conjuncts a spatial index can serve
	// (ST_DISTANCE(path, constant) < r, ST_WITHIN, ST_INTERSECTS): like
	// Filters, each is implied by the WHERE clause.
	Spatial []SpatialFilter
}

// VectorSearch is a VectorDistance between a document path and a constant.
type VectorSearch struct {
	Path   []string
	Vector []float64
	// BruteForce is VectorDistance's third argument: search exactly.
	BruteForce bool
	// DistanceFunction and DataType come from the options argument ("" when
	// it names none: the policy's apply); SearchListSizeMultiplier too (0
	// when not given).
	DistanceFunction         string
	DataType                 string
	SearchListSizeMultiplier int
	// Explicit is true when ASC or DESC was written (Descending then says
	// which); without them the closest come first.
	Explicit, Descending bool
}

// TextSearch is a full-text function of a document path.
type TextSearch struct {
	// Function is the function's name: FullTextContains,
	// FullTextContainsAll, FullTextContainsAny or FullTextScore.
	Function string
	Path     []string
	Keywords []string
	// Required is true for a FullTextContains, FullTextContainsAll or
	// FullTextContainsAny that is a conjunct of the WHERE clause (not under
	// OR, NOT or any other operator): every row the query returns has it
	// true, so the items holding its keywords (all of them for
	// FullTextContainsAll, any for FullTextContainsAny) are a superset of
	// the query's. The execution still evaluates it on each candidate.
	Required bool
}

// RankSearch is ORDER BY RANK's scoring: each component is a FullTextScore
// (Text) or a VectorDistance (Vector).
type RankSearch struct {
	Components []RankComponent
	Weights    []float64
	// Fused is true for RRF (even of one component): the order is by the
	// fusion of each component's ranks, not by a score.
	Fused bool
}

// RankComponent is one scoring function of ORDER BY RANK.
type RankComponent struct {
	Text   *TextSearch
	Vector *VectorSearch
}

// OrderKey is one ORDER BY key.
type OrderKey struct {
	// Path is the document property path (segments from the document root),
	// or nil when the key is not a plain property path of the document.
	Path       []string
	Descending bool
}

// FilterOp is the comparison of an index filter.
type FilterOp int

// The index filter operators.
const (
	FilterEq         FilterOp = iota + 1 // Path = Values[0]
	FilterLt                             // Path < Values[0]
	FilterLe                             // Path <= Values[0]
	FilterGt                             // Path > Values[0]
	FilterGe                             // Path >= Values[0]
	FilterBetween                        // Values[0] <= Path <= Values[1]
	FilterIn                             // Path equals one of Values
	FilterStartsWith                     // Path is a string starting with the string Values[0]
)

var filterOpNames = [...]string{"", "=", "<", "<=", ">", ">=", "BETWEEN", "IN", "STARTSWITH"}

// String returns the operator as written in SQL.
func (op FilterOp) String() string {
	if op > 0 && int(op) < len(filterOpNames) {
		return filterOpNames[op]
	}
	return "?"
}

// Filter is an index-usable predicate on one document property path.
// Values are JSON constants with parameters already substituted.
type Filter struct {
	Path   []string
	Op     FilterOp
	Values []json.RawMessage
}

// String renders the filter for logs and tests, e.g. `a.b IN 1,2`.
func (f Filter) String() string {
	vals := make([]string, len(f.Values))
	for i, v := range f.Values {
		vals[i] = string(v)
	}
	return strings.Join(f.Path, ".") + " " + f.Op.String() + " " + strings.Join(vals, ",")
}

// Plan analyses the query with the given parameter values.
func (q *Query) Plan(params map[string]json.RawMessage) (*Plan, error) {
	pv, err := DecodeParams(params)
	if err != nil {
		return nil, err
	}
	return q.PlanParams(pv)
}

// PlanParams is Plan with parameter values DecodeParams decoded.
func (q *Query) PlanParams(params Params) (*Plan, error) {
	pv := params.vals
	sq := q.q
	c := &evalCtx{params: pv}
	lim := sq.limits(c)
	if c.err != nil {
		return nil, c.err
	}
	p := &Plan{
		Streaming:   sq.streaming() && len(sq.from) > 0 && sq.from[0].sub == nil,
		Aggregates:  len(sq.aggs) > 0,
		GroupBy:     len(sq.groupBy) > 0,
		Distinct:    sq.distinct,
		SelectValue: sq.isValue,
		Top:         lim.top, Offset: lim.offset, Limit: lim.limit,
	}
	p.NeedsQueryPlan = !sq.streaming() || sq.top != nil || sq.offset != nil
	a := analyzer{q: sq, c: c}
	for _, o := range sq.orderBy {
		path, _ := a.docPath(o.x)
		p.OrderBy = append(p.OrderBy, OrderKey{Path: path, Descending: o.desc})
	}
	if sq.where != nil {
		p.Filters = a.conjuncts(sq.where, nil)
		p.Spatial = a.spatialConjuncts(sq.where, nil)
	}
	a.search(p)
	return p, nil
}

// search fills in the plan's vector and full-text searches.
func (a analyzer) search(p *Plan) {
	sq := a.q
	if len(sq.orderBy) == 1 && !sq.orderBy[0].rank {
		if v := a.vectorSearch(sq.orderBy[0].x); v != nil {
			v.Explicit, v.Descending = sq.orderBy[0].explicit, sq.orderBy[0].desc
			p.Vector = v
		}
	}
	required := map[*callExpr]bool{}
	var conjuncts func(x expr)
	conjuncts = func(x expr) {
		switch n := x.(type) {
		case *andExpr:
			conjuncts(n.l)
			conjuncts(n.r)
		case *callExpr:
			if n.search != nil && !n.udf {
				required[n] = true
			}
		}
	}
	if sq.where != nil {
		conjuncts(sq.where)
	}
	var walk func(x expr)
	walk = func(x expr) {
		call, ok := x.(*callExpr)
		if ok && call.search != nil {
			switch call.search.kind {
			case skContains, skContainsAll, skContainsAny, skScore:
				if t := a.textSearch(call); t != nil {
					t.Required = required[call] && call.search.kind != skScore
					p.FullText = append(p.FullText, *t)
				}
			}
		}
		forEachChild(x, walk)
	}
	if sq.where != nil {
		walk(sq.where)
	}
	if len(sq.orderBy) == 1 && sq.orderBy[0].rank {
		call := sq.orderBy[0].x.(*callExpr)
		comps := []*callExpr{call}
		r := &RankSearch{}
		if call.search.kind == skRRF {
			comps, r.Weights, r.Fused = call.search.components, call.search.weights, true
		}
		for _, c := range comps {
			if c.search.kind == skScore {
				t := a.textSearch(c)
				if t != nil {
					p.FullText = append(p.FullText, *t)
				}
				r.Components = append(r.Components, RankComponent{Text: t})
			} else {
				r.Components = append(r.Components, RankComponent{Vector: a.vectorSearch(c)})
			}
		}
		p.Rank = r
	}
}

// vectorSearch describes a VectorDistance of a document path and a
// constant, or returns nil.
func (a analyzer) vectorSearch(x expr) *VectorSearch {
	call, ok := x.(*callExpr)
	if !ok || call.search == nil || call.search.kind != skVectorDistance || call.search.path == nil {
		return nil
	}
	sc := call.search
	other := call.args[1-sc.pathArg]
	raw, ok := a.constant(other)
	if !ok {
		return nil
	}
	var vec []float64
	if json.Unmarshal(raw, &vec) != nil {
		return nil
	}
	v := &VectorSearch{Path: sc.path, Vector: vec, BruteForce: sc.bruteForce, DataType: sc.dataType, SearchListSizeMultiplier: sc.listMult}
	if sc.metric != 0 {
		v.DistanceFunction = [...]string{"", "cosine", "dotproduct", "euclidean"}[sc.metric]
	}
	return v
}

// textSearch describes a full-text function of a document path with
// constant keywords, or returns nil.
func (a analyzer) textSearch(call *callExpr) *TextSearch {
	sc := call.search
	if sc.path == nil {
		return nil
	}
	t := &TextSearch{Function: sc.name, Path: sc.path}
	for _, arg := range call.args[1:] {
		raw, ok := a.constant(arg)
		if !ok {
			return nil
		}
		var one string
		var many []string
		switch {
		case json.Unmarshal(raw, &one) == nil:
			t.Keywords = append(t.Keywords, one)
		case json.Unmarshal(raw, &many) == nil:
			t.Keywords = append(t.Keywords, many...)
		default:
			return nil
		}
	}
	return t
}

// forEachChild calls fn on each direct sub-expression of x (not into
// subqueries).
func forEachChild(x expr, fn func(expr)) {
	switch n := x.(type) {
	case *propExpr:
		fn(n.x)
	case *indexExpr:
		fn(n.x)
		fn(n.idx)
	case *unaryExpr:
		fn(n.x)
	case *binaryExpr:
		fn(n.l)
		fn(n.r)
	case *andExpr:
		fn(n.l)
		fn(n.r)
	case *orExpr:
		fn(n.l)
		fn(n.r)
	case *coalesceExpr:
		fn(n.l)
		fn(n.r)
	case *condExpr:
		fn(n.c)
		fn(n.a)
		fn(n.b)
	case *betweenExpr:
		fn(n.x)
		fn(n.lo)
		fn(n.hi)
	case *inExpr:
		fn(n.x)
		for _, e := range n.list {
			fn(e)
		}
	case *likeExpr:
		fn(n.x)
		fn(n.pattern)
		if n.escape != nil {
			fn(n.escape)
		}
	case *callExpr:
		for _, e := range n.args {
			fn(e)
		}
	case *arrayExpr:
		for _, e := range n.elems {
			fn(e)
		}
	case *objectExpr:
		for _, e := range n.vals {
			fn(e)
		}
	}
}

// analyzer extracts index filters from a bound query.
type analyzer struct {
	q *selectQuery
	c *evalCtx
}

// docPath returns the document property path x denotes, if any: a chain of
// property accesses on the alias of the first FROM source.
func (a analyzer) docPath(x expr) ([]string, bool) {
	if name, ok := computedPath(x); ok {
		return []string{name}, true
	}
	var rev []string
	for {
		switch n := x.(type) {
		case *propExpr:
			rev = append(rev, n.name)
			x = n.x
			continue
		case *refExpr:
			if n.depth != 0 || n.slot != 0 || len(a.q.from) == 0 {
				return nil, false
			}
			src := a.q.from[0]
			if !src.container || src.in {
				return nil, false
			}
			prefix, ok := containerPrefix(src.x)
			if !ok {
				return nil, false
			}
			path := append([]string{}, prefix...)
			for i := len(rev) - 1; i >= 0; i-- {
				path = append(path, rev[i])
			}
			return path, true
		}
		return nil, false
	}
}

// containerPrefix returns the property path of a container source (empty
// for FROM c).
func containerPrefix(x expr) ([]string, bool) {
	switch n := x.(type) {
	case *rootExpr:
		return []string{}, true
	case *propExpr:
		p, ok := containerPrefix(n.x)
		if !ok {
			return nil, false
		}
		return append(p, n.name), true
	}
	return nil, false
}

// constant returns the JSON of a literal or supplied parameter.
func (a analyzer) constant(x expr) (json.RawMessage, bool) {
	var v value
	switch n := x.(type) {
	case *constExpr:
		v = n.v
	case *paramExpr:
		v = a.c.params[n.name]
	case *arrayExpr, *objectExpr:
		if !isConstant(x) {
			return nil, false // it reads the document: not a constant
		}
		v = n.eval(a.c, &env{})
		if a.c.err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	if !v.defined() || (v.k == kNumber && !isFinite(v.n)) {
		return nil, false // NaN and Infinity have no JSON form
	}
	return encodeJSON(v), true
}

func isConstant(x expr) bool {
	switch n := x.(type) {
	case *constExpr, *paramExpr:
		return true
	case *arrayExpr:
		for _, e := range n.elems {
			if !isConstant(e) {
				return false
			}
		}
		return true
	case *objectExpr:
		for _, e := range n.vals {
			if !isConstant(e) {
				return false
			}
		}
		return true
	}
	return false
}

var flipped = map[string]FilterOp{"<": FilterGt, "<=": FilterGe, ">": FilterLt, ">=": FilterLe, "=": FilterEq}
var direct = map[string]FilterOp{"<": FilterLt, "<=": FilterLe, ">": FilterGt, ">=": FilterGe, "=": FilterEq}

// conjuncts appends the index filters implied by x being true.
func (a analyzer) conjuncts(x expr, out []Filter) []Filter {
	switch n := x.(type) {
	case *andExpr:
		return a.conjuncts(n.r, a.conjuncts(n.l, out))
	case *orExpr:
		if f, ok := a.disjunction(n); ok {
			return append(out, f)
		}
	case *binaryExpr:
		if op, ok := direct[n.op]; ok {
			if path, ok := a.docPath(n.l); ok {
				if v, ok := a.constant(n.r); ok {
					return append(out, Filter{Path: path, Op: op, Values: []json.RawMessage{v}})
				}
			}
			if path, ok := a.docPath(n.r); ok {
				if v, ok := a.constant(n.l); ok {
					return append(out, Filter{Path: path, Op: flipped[n.op], Values: []json.RawMessage{v}})
				}
			}
		}
	case *betweenExpr:
		if path, ok := a.docPath(n.x); ok && !n.not {
			lo, ok1 := a.constant(n.lo)
			hi, ok2 := a.constant(n.hi)
			if ok1 && ok2 {
				return append(out, Filter{Path: path, Op: FilterBetween, Values: []json.RawMessage{lo, hi}})
			}
		}
	case *inExpr:
		if path, ok := a.docPath(n.x); ok && !n.not {
			vals := make([]json.RawMessage, 0, len(n.list))
			for _, item := range n.list {
				v, ok := a.constant(item)
				if !ok {
					if _, isParam := item.(*paramExpr); isParam {
						continue // a missing parameter matches nothing
					}
					return out
				}
				vals = append(vals, v)
			}
			return append(out, Filter{Path: path, Op: FilterIn, Values: vals})
		}
	case *callExpr:
		if n.udf || len(n.args) == 0 {
			return out
		}
		switch upper(n.name) {
		case "STARTSWITH":
			if len(n.args) == 3 {
				if c, ok := n.args[2].(*constExpr); !ok || c.v.k != kBool || c.v.b {
					return out
				}
			}
			if path, ok := a.docPath(n.args[0]); ok {
				if v, ok := a.constant(n.args[1]); ok && len(v) > 0 && v[0] == '"' {
					return append(out, Filter{Path: path, Op: FilterStartsWith, Values: []json.RawMessage{v}})
				}
			}
		case "IS_NULL":
			if path, ok := a.docPath(n.args[0]); ok {
				return append(out, Filter{Path: path, Op: FilterEq, Values: []json.RawMessage{json.RawMessage("null")}})
			}
		}
	default:
		if path, ok := a.docPath(x); ok {
			return append(out, Filter{Path: path, Op: FilterEq, Values: []json.RawMessage{json.RawMessage("true")}})
		}
	}
	return out
}

// disjunction turns an OR whose every branch pins the same path to
// constants (c.id = 1 OR (c.id = 2 AND ...)) into one IN filter.
func (a analyzer) disjunction(x *orExpr) (Filter, bool) {
	var branches [][]Filter
	var collect func(x expr)
	collect = func(x expr) {
		if o, ok := x.(*orExpr); ok {
			collect(o.l)
			collect(o.r)
			return
		}
		branches = append(branches, a.conjuncts(x, nil))
	}
	collect(x)
	for _, cand := range branches[0] {
		if cand.Op != FilterEq && cand.Op != FilterIn {
			continue
		}
		var vals []json.RawMessage
		all := true
		for _, br := range branches {
			found := false
			for _, f := range br {
				if (f.Op == FilterEq || f.Op == FilterIn) && samePath(f.Path, cand.Path) {
					vals = append(vals, f.Values...)
					found = true
					break
				}
			}
			if !found {
				all = false
				break
			}
		}
		if all {
			return Filter{Path: cand.Path, Op: FilterIn, Values: vals}, true
		}
	}
	return Filter{}, false
}

func samePath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
