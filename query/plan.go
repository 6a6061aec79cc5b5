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
	pv, err := decodeParams(params)
	if err != nil {
		return nil, err
	}
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
	}
	return p, nil
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
