package query

import (
	"encoding/json"
	"strings"
)

// Computed properties are a container's named expressions over its items:
// `SELECT VALUE <expr> FROM c` under a top-level name. A query that reads
// root.name (c.name, c["name"]) reads the expression instead, wherever it
// appears (SELECT, WHERE, ORDER BY, GROUP BY, subqueries that do not hide
// the root alias); SELECT * and SELECT c never show them, as in the service.

// MaxComputedProperties is how many computed properties a container may
// have.
const MaxComputedProperties = 20

// computedFn is the internal function a computed property reference is
// rewritten to: $COMPUTED(<expr>, "<name>", <indexed>). Its name cannot be
// written in query text, so only the rewrite produces it.
const computedFn = "$COMPUTED"

func init() {
	builtins[computedFn] = &builtin{name: computedFn, minArgs: 3, maxArgs: 3,
		fn: func(_ *evalCtx, args []value) value { return args[0] }}
}

// ComputedProperty is one computed property definition.
type ComputedProperty struct {
	Name  string
	Query string
	// Indexed tells the planner the engine keeps an index of the values at
	// the path /Name, so filters and ORDER BY on the property may use it.
	Indexed bool

	alias string // the definition's FROM alias
	q     *Query // the definition, for Evaluate
}

// reservedComputedNames are the system properties a computed property may
// not be named after.
var reservedComputedNames = map[string]bool{"id": true, "_rid": true, "_ts": true, "_etag": true, "_self": true, "_attachments": true, "_lsn": true}

// nondeterministic are the functions a computed property may not call.
var nondeterministic = map[string]bool{"GETCURRENTDATETIME": true, "GETCURRENTTIMESTAMP": true, "GETCURRENTTICKS": true, "RAND": true,
	"GETCURRENTDATETIMESTATIC": true, "GETCURRENTTICKSSTATIC": true, "GETCURRENTTIMESTAMPSTATIC": true}

func computedError(name, format string, args ...any) error {
	return semanticError(CodeSemantic, 0, 0, "Computed property '%s': "+format, append([]any{name}, args...)...)
}

// ParseComputedProperty checks a computed property definition as the
// service does and compiles it.
func ParseComputedProperty(name, text string) (*ComputedProperty, error) {
	switch {
	case name == "":
		return nil, semanticError(CodeSemantic, 0, 0, "A computed property must have a non-empty name.")
	case reservedComputedNames[name]:
		return nil, computedError(name, "the name of a system property cannot be the name of a computed property.")
	case strings.ContainsAny(name, "/.[]\"'"):
		return nil, computedError(name, "computed properties are top-level: the name cannot be a nested path.")
	}
	sq, err := parseText(text)
	if err != nil {
		return nil, computedError(name, "the query is invalid: %v", err)
	}
	switch {
	case !sq.isValue || len(sq.items) != 1:
		return nil, computedError(name, "the query must project its value with SELECT VALUE.")
	case len(sq.from) != 1 || sq.from[0].sub != nil || sq.from[0].in:
		return nil, computedError(name, "the query must have a FROM clause naming the container (FROM c) and no JOIN.")
	case sq.where != nil, len(sq.groupBy) > 0, len(sq.orderBy) > 0, sq.top != nil, sq.distinct, sq.offset != nil, sq.limit != nil:
		return nil, computedError(name, "the query cannot use WHERE, GROUP BY, ORDER BY, TOP, DISTINCT or OFFSET LIMIT.")
	}
	if _, ok := sq.from[0].x.(*refExpr); !ok {
		return nil, computedError(name, "the FROM clause must name the container itself (FROM c), not a path in it.")
	}
	var bad string
	walkExpr(sq.items[0].x, func(x expr) {
		switch n := x.(type) {
		case *subqueryExpr:
			bad = "subqueries"
		case *aggExpr:
			bad = "aggregate functions"
		case *callExpr:
			up := upper(n.name)
			switch {
			case n.udf:
				bad = "user-defined functions"
			case nondeterministic[up]:
				bad = "non-deterministic functions such as " + up
			case strings.HasPrefix(up, "ST_"):
				bad = "spatial functions"
			case up == "COUNT" || up == "SUM" || up == "AVG" || up == "MIN" || up == "MAX":
				bad = "aggregate functions"
			}
		}
	})
	if bad != "" {
		return nil, computedError(name, "the query cannot use %s.", bad)
	}
	q, err := Parse(text)
	if err != nil {
		return nil, computedError(name, "the query is invalid: %v", err)
	}
	return &ComputedProperty{Name: name, Query: text, alias: sq.from[0].alias, q: q}, nil
}

// Uses reports whether the definition reads the root property name (which
// the service refuses when name is another computed property).
func (cp *ComputedProperty) Uses(name string) bool {
	def, err := parseText(cp.Query)
	if err != nil {
		return false
	}
	found := false
	walkExpr(def.items[0].x, func(x expr) {
		if p, ok := x.(*propExpr); ok {
			if r, ok := p.x.(*refExpr); ok && r.name == cp.alias && p.name == name {
				found = true
			}
		}
	})
	return found
}

// Evaluate computes the property for one document: its JSON, or ok false
// when it is undefined.
func (cp *ComputedProperty) Evaluate(doc []byte) (json.RawMessage, bool, error) {
	x, err := cp.q.Prepare(Options{})
	if err != nil {
		return nil, false, err
	}
	rows, err := x.Rows(doc)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return rows[0], true, nil
}

// ParseComputed parses a query for a container with computed properties:
// references to them on the root alias read their expressions.
func ParseComputed(text string, cps []*ComputedProperty) (*Query, error) {
	if len(cps) == 0 {
		return Parse(text)
	}
	return parse(text, func(sq *selectQuery) error { return substituteComputed(sq, cps) })
}

// substituteComputed rewrites root.<computed name> in the top-level query.
func substituteComputed(sq *selectQuery, cps []*ComputedProperty) error {
	if len(sq.from) == 0 || sq.from[0].sub != nil || sq.from[0].in {
		return nil
	}
	if _, ok := sq.from[0].x.(*refExpr); !ok {
		return nil // FROM c.children: the root alias is not the item
	}
	byName := make(map[string]*ComputedProperty, len(cps))
	for _, cp := range cps {
		byName[cp.Name] = cp
	}
	s := &substituter{root: sq.from[0].alias, cps: byName}
	s.query(sq, true)
	return s.err
}

type substituter struct {
	root string
	cps  map[string]*ComputedProperty
	err  error
}

// query rewrites the clauses of q; top is the top-level query, where the
// index may serve a reference.
func (s *substituter) query(q *selectQuery, top bool) {
	for i, src := range q.from {
		if !top && src.alias == s.root {
			return // the root alias is hidden here
		}
		if src.sub != nil {
			s.query(src.sub, false)
		} else if i > 0 || !top {
			src.x = s.expr(src.x, false)
		}
	}
	for i := range q.items {
		it := &q.items[i]
		if p, ok := it.x.(*propExpr); ok && it.alias == "" && !q.isValue && s.computed(p) != nil {
			it.alias = p.name // SELECT c.cp names its output cp
		}
		it.x = s.expr(it.x, top)
	}
	q.top = s.expr(q.top, false)
	q.where = s.expr(q.where, top)
	for i := range q.groupBy {
		q.groupBy[i] = s.expr(q.groupBy[i], false)
	}
	for i := range q.orderBy {
		q.orderBy[i].x = s.expr(q.orderBy[i].x, top)
	}
	q.offset = s.expr(q.offset, false)
	q.limit = s.expr(q.limit, false)
}

// computed returns the computed property p reads, or nil.
func (s *substituter) computed(p *propExpr) *ComputedProperty {
	if r, ok := p.x.(*refExpr); ok && r.name == s.root {
		return s.cps[p.name]
	}
	return nil
}

func (s *substituter) expr(x expr, top bool) expr {
	if x == nil {
		return nil
	}
	return mapExpr(x, func(x expr) expr {
		switch n := x.(type) {
		case *propExpr:
			cp := s.computed(n)
			if cp == nil {
				return nil
			}
			def, err := parseText(cp.Query)
			if err != nil {
				s.err = err
				return x
			}
			body := mapExpr(def.items[0].x, func(y expr) expr {
				if r, ok := y.(*refExpr); ok && r.name == cp.alias {
					return &refExpr{name: s.root, pos: r.pos}
				}
				return nil
			})
			return &callExpr{name: computedFn, args: []expr{body, &constExpr{v: strV(cp.Name)}, &constExpr{v: boolV(top && cp.Indexed)}}}
		case *subqueryExpr:
			s.query(n.q, false)
			return x
		}
		return nil
	})
}

// computedPath returns the name of the computed property a rewritten
// reference reads, when the index may serve it.
func computedPath(x expr) (string, bool) {
	c, ok := x.(*callExpr)
	if !ok || c.name != computedFn || len(c.args) != 3 {
		return "", false
	}
	name, _ := c.args[1].(*constExpr)
	indexed, _ := c.args[2].(*constExpr)
	if name == nil || indexed == nil || indexed.v.k != kBool || !indexed.v.b {
		return "", false
	}
	return name.v.str(), true
}

// mapExpr rebuilds x bottom-up through f: where f returns non-nil, that
// node replaces the one given (and its children are not visited).
func mapExpr(x expr, f func(expr) expr) expr {
	if x == nil {
		return nil
	}
	if r := f(x); r != nil {
		return r
	}
	m := func(y expr) expr { return mapExpr(y, f) }
	ms := func(ys []expr) {
		for i := range ys {
			ys[i] = m(ys[i])
		}
	}
	switch n := x.(type) {
	case *propExpr:
		n.x = m(n.x)
	case *indexExpr:
		n.x, n.idx = m(n.x), m(n.idx)
	case *unaryExpr:
		n.x = m(n.x)
	case *binaryExpr:
		n.l, n.r = m(n.l), m(n.r)
	case *andExpr:
		n.l, n.r = m(n.l), m(n.r)
	case *orExpr:
		n.l, n.r = m(n.l), m(n.r)
	case *betweenExpr:
		n.x, n.lo, n.hi = m(n.x), m(n.lo), m(n.hi)
	case *inExpr:
		n.x = m(n.x)
		ms(n.list)
	case *likeExpr:
		n.x, n.pattern, n.escape = m(n.x), m(n.pattern), m(n.escape)
	case *condExpr:
		n.c, n.a, n.b = m(n.c), m(n.a), m(n.b)
	case *coalesceExpr:
		n.l, n.r = m(n.l), m(n.r)
	case *callExpr:
		ms(n.args)
	case *aggExpr:
		n.arg = m(n.arg)
	case *arrayExpr:
		ms(n.elems)
	case *objectExpr:
		ms(n.vals)
	}
	return x
}

// walkExpr calls f on x and every expression under it, subqueries included.
func walkExpr(x expr, f func(expr)) {
	mapExpr(x, func(y expr) expr {
		f(y)
		if sq, ok := y.(*subqueryExpr); ok {
			for _, it := range sq.q.items {
				walkExpr(it.x, f)
			}
			walkExpr(sq.q.where, f)
		}
		return nil
	})
}
