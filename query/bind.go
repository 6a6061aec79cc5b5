package query

import "strconv"

// scope is one query level's aliases during binding.
type scope struct {
	names  []string
	parent *scope
	q      *selectQuery
}

func (s *scope) lookup(name string) (depth, slot int, ok bool) {
	for d := 0; s != nil; d, s = d+1, s.parent {
		for i := len(s.names) - 1; i >= 0; i-- {
			if s.names[i] == name {
				return d, i, true
			}
		}
	}
	return 0, 0, false
}

// binder resolves names, function calls and aggregate slots in place.
type binder struct {
	params map[string]bool // parameters referenced anywhere
	udfs   []string        // user-defined functions called anywhere
	inRank bool            // binding the expression of ORDER BY RANK
}

func (b *binder) bindQuery(q *selectQuery, parent *scope, top bool) error {
	s := &scope{parent: parent, q: q}
	if parent != nil {
		q.depth = parent.q.depth + 1
	}
	for i, src := range q.from {
		switch {
		case src.sub != nil:
			// A subquery source sees the enclosing scopes but not its siblings
			// when it is the first source; a JOINed one sees earlier aliases.
			sp := parent
			if i > 0 {
				sp = s
			}
			if err := b.bindQuery(src.sub, sp, top && i == 0); err != nil {
				return err
			}
		case i == 0 && top:
			// The head identifier names the container: the current document.
			src.container = true
			if err := b.bindContainerPath(src.x); err != nil {
				return err
			}
			src.x = replaceHead(src.x)
		default:
			if err := b.bindExpr(src.x, s, false); err != nil {
				return err
			}
		}
		for _, n := range s.names {
			if n == src.alias {
				return semanticError(CodeSemantic, src.pos, src.pos+len(src.alias), "Duplicate alias '%s'.", src.alias)
			}
		}
		src.slot = len(s.names)
		s.names = append(s.names, src.alias)
	}
	q.nslots = len(s.names)
	if q.star {
		if len(q.from) == 0 {
			return semanticError(CodeSemantic, 0, 0, "'SELECT *' is not valid if FROM clause is omitted.")
		}
		if len(q.from) > 1 {
			return semanticError(CodeSemantic, 0, 0, "'SELECT *' is only valid with a single input set.")
		}
		if len(q.groupBy) > 0 {
			return semanticError(CodeSemantic, 0, 0, "'SELECT *' is not valid with GROUP BY.")
		}
	}
	if q.top != nil {
		if err := b.bindExpr(q.top, s, false); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	unnamed := 0
	for i := range q.items {
		it := &q.items[i]
		if err := b.bindExpr(it.x, s, true); err != nil {
			return err
		}
		if q.isValue {
			continue
		}
		if it.alias == "" {
			switch x := it.x.(type) {
			case *propExpr:
				it.alias = x.name
			case *refExpr:
				it.alias = x.name
			default:
				unnamed++
				it.alias = "$" + itoa(unnamed)
			}
		}
		if seen[it.alias] {
			return semanticError(CodeSemantic, 0, 0, "Duplicate alias '%s'.", it.alias)
		}
		seen[it.alias] = true
	}
	if q.where != nil {
		if err := b.bindExpr(q.where, s, false); err != nil {
			return err
		}
	}
	for _, g := range q.groupBy {
		if err := b.bindExpr(g, s, false); err != nil {
			return err
		}
	}
	if len(q.groupBy) > 0 || len(q.aggs) > 0 {
		// Grouped or aggregated: the select list may only hold aggregates,
		// GROUP BY expressions and constants.
		if len(q.groupBy) > 0 && len(q.orderBy) > 0 {
			return semanticError(CodeSemantic, 0, 0, "ORDER BY is not supported in queries with GROUP BY.")
		}
		keys := make(map[string]bool, len(q.groupBy))
		for _, g := range q.groupBy {
			keys[formatExpr(g)] = true
		}
		for _, it := range q.items {
			if bad := ungrouped(it.x, keys); bad != nil {
				return semanticError(CodeSemantic, 0, 0, "Property reference '%s' is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause.", sqlPath(bad))
			}
		}
	}
	for i, o := range q.orderBy {
		if err := b.bindOrderItem(q, s, o, i); err != nil {
			return err
		}
	}
	for _, x := range []expr{q.offset, q.limit} {
		if x != nil {
			if err := b.bindExpr(x, s, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// bindOrderItem binds ORDER BY item i: a property path, a vector search
// function (VectorDistance, and the gateway's _VectorScore and
// _FullTextScore), or the ranking of ORDER BY RANK, which stands alone.
func (b *binder) bindOrderItem(q *selectQuery, s *scope, o orderItem, i int) error {
	if o.rank {
		if len(q.orderBy) > 1 {
			return semanticError(CodeSemantic, 0, 0, "ORDER BY RANK cannot be combined with other ORDER BY items.")
		}
		if len(q.groupBy) > 0 || len(q.aggs) > 0 || q.distinct {
			return semanticError(CodeSemantic, 0, 0, "ORDER BY RANK is not supported with GROUP BY, aggregates or DISTINCT.")
		}
		call, ok := o.x.(*callExpr)
		if !ok || call.udf || (upper(call.name) != "FULLTEXTSCORE" && upper(call.name) != "RRF") {
			return semanticError(CodeSemantic, 0, 0, "ORDER BY RANK must be followed by a call of FullTextScore or RRF.")
		}
		b.inRank = true
		defer func() { b.inRank = false }()
		return b.bindExpr(o.x, s, false)
	}
	if call, ok := o.x.(*callExpr); ok && !call.udf {
		if err := unsupportedBuiltin(call.name, call.pos); err != nil {
			return err
		}
		switch upper(call.name) {
		case "VECTORDISTANCE", "_VECTORSCORE", "_FULLTEXTSCORE":
			if len(q.groupBy) > 0 || len(q.aggs) > 0 {
				return semanticError(CodeSemantic, 0, 0, "ORDER BY %s is not supported with GROUP BY or aggregates.", call.name)
			}
			return b.bindExpr(o.x, s, false)
		}
	}
	if !isPath(o.x) {
		return semanticError(CodeSemantic, 0, 0, "Unsupported ORDER BY clause. ORDER BY item expression could not be mapped to a document path.")
	}
	return b.bindExpr(o.x, s, false)
}

// bindContainerPath checks a container path (c, root, c.children[0], ...).
func (b *binder) bindContainerPath(x expr) error {
	switch x := x.(type) {
	case *refExpr:
		return nil
	case *propExpr:
		return b.bindContainerPath(x.x)
	case *indexExpr:
		if err := b.bindExpr(x.idx, nil, false); err != nil {
			return err
		}
		return b.bindContainerPath(x.x)
	}
	return semanticError(CodeSemantic, 0, 0, "Invalid FROM source: a container path is expected.")
}

// replaceHead swaps the head identifier of a path for the current document.
func replaceHead(x expr) expr {
	switch n := x.(type) {
	case *refExpr:
		return &rootExpr{}
	case *propExpr:
		n.x = replaceHead(n.x)
	case *indexExpr:
		n.x = replaceHead(n.x)
	}
	return x
}

func (b *binder) bindExpr(x expr, s *scope, allowAgg bool) error {
	switch n := x.(type) {
	case *constExpr, *rootExpr:
	case *paramExpr:
		if b.params == nil {
			b.params = map[string]bool{}
		}
		b.params[n.name] = true
	case *refExpr:
		d, slot, ok := s.lookup(n.name)
		if !ok {
			return semanticError(CodeUnresolved, n.pos, n.pos+len(n.name), "Identifier '%s' could not be resolved.", n.name)
		}
		n.depth, n.slot = d, slot
	case *propExpr:
		return b.bindExpr(n.x, s, allowAgg)
	case *indexExpr:
		if err := b.bindExpr(n.x, s, allowAgg); err != nil {
			return err
		}
		return b.bindExpr(n.idx, s, allowAgg)
	case *unaryExpr:
		return b.bindExpr(n.x, s, allowAgg)
	case *binaryExpr:
		return b.bindAll(s, allowAgg, n.l, n.r)
	case *andExpr:
		return b.bindAll(s, allowAgg, n.l, n.r)
	case *orExpr:
		return b.bindAll(s, allowAgg, n.l, n.r)
	case *betweenExpr:
		return b.bindAll(s, allowAgg, n.x, n.lo, n.hi)
	case *inExpr:
		if err := b.bindExpr(n.x, s, allowAgg); err != nil {
			return err
		}
		return b.bindAll(s, allowAgg, n.list...)
	case *likeExpr:
		if err := b.bindAll(s, allowAgg, n.x, n.pattern); err != nil {
			return err
		}
		if n.escape != nil {
			if err := b.bindExpr(n.escape, s, allowAgg); err != nil {
				return err
			}
		}
		if pc, ok := n.pattern.(*constExpr); ok && pc.v.k == kString {
			esc := rune(-1)
			if n.escape != nil {
				ec, ok := n.escape.(*constExpr)
				if !ok || ec.v.k != kString || len([]rune(ec.v.str())) != 1 {
					return nil
				}
				esc = []rune(ec.v.str())[0]
			}
			n.static = compileLike(pc.v.str(), esc)
		}
	case *condExpr:
		return b.bindAll(s, allowAgg, n.c, n.a, n.b)
	case *coalesceExpr:
		return b.bindAll(s, allowAgg, n.l, n.r)
	case *arrayExpr:
		return b.bindAll(s, allowAgg, n.elems...)
	case *objectExpr:
		return b.bindAll(s, allowAgg, n.vals...)
	case *callExpr:
		if n.udf {
			b.udfs = append(b.udfs, n.name)
		} else {
			fn, ok := lookupBuiltin(n.name)
			if !ok {
				if err := unsupportedBuiltin(n.name, n.pos); err != nil {
					return err
				}
				return semanticError(CodeUnknownFunction, n.pos, n.pos+len(n.name), "'%s' is not a recognized built-in function name.", n.name)
			}
			if len(n.args) < fn.minArgs || (fn.maxArgs >= 0 && len(n.args) > fn.maxArgs) {
				return semanticError(CodeArity, n.pos, n.pos+len(n.name), "The %s function requires %s argument(s).", upper(n.name), arityText(fn))
			}
			n.fn = fn
		}
		if err := b.bindAll(s, allowAgg, n.args...); err != nil {
			return err
		}
		if !n.udf && isSearchName(n.name) {
			return b.bindSearch(n, s, b.inRank)
		}
		return nil
	case *aggExpr:
		if !allowAgg || s == nil {
			return semanticError(CodeSemantic, 0, 0, "Aggregate function %s is not allowed in this context.", n.fn)
		}
		if err := b.bindExpr(n.arg, s, false); err != nil {
			return err
		}
		n.slot = len(s.q.aggs)
		s.q.aggs = append(s.q.aggs, n)
	case *subqueryExpr:
		return b.bindQuery(n.q, s, false)
	}
	return nil
}

func (b *binder) bindAll(s *scope, allowAgg bool, xs ...expr) error {
	for _, x := range xs {
		if err := b.bindExpr(x, s, allowAgg); err != nil {
			return err
		}
	}
	return nil
}

func arityText(fn *builtin) string {
	if fn.maxArgs == fn.minArgs {
		return itoa(fn.minArgs)
	}
	if fn.maxArgs < 0 {
		return "at least " + itoa(fn.minArgs)
	}
	return itoa(fn.minArgs) + " to " + itoa(fn.maxArgs)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

// ungrouped returns the first property reference in x that is neither a
// GROUP BY expression nor inside one or inside an aggregate, or nil.
func ungrouped(x expr, keys map[string]bool) expr {
	if keys[formatExpr(x)] {
		return nil
	}
	switch n := x.(type) {
	case *refExpr, *propExpr, *indexExpr:
		return x
	case *aggExpr, *constExpr, *paramExpr, *subqueryExpr:
		return nil
	case *unaryExpr:
		return ungrouped(n.x, keys)
	case *binaryExpr:
		return firstUngrouped(keys, n.l, n.r)
	case *andExpr:
		return firstUngrouped(keys, n.l, n.r)
	case *orExpr:
		return firstUngrouped(keys, n.l, n.r)
	case *coalesceExpr:
		return firstUngrouped(keys, n.l, n.r)
	case *condExpr:
		return firstUngrouped(keys, n.c, n.a, n.b)
	case *betweenExpr:
		return firstUngrouped(keys, n.x, n.lo, n.hi)
	case *inExpr:
		return firstUngrouped(keys, append([]expr{n.x}, n.list...)...)
	case *likeExpr:
		return firstUngrouped(keys, n.x, n.pattern, n.escape)
	case *callExpr:
		return firstUngrouped(keys, n.args...)
	case *arrayExpr:
		return firstUngrouped(keys, n.elems...)
	case *objectExpr:
		return firstUngrouped(keys, n.vals...)
	}
	return nil
}

func firstUngrouped(keys map[string]bool, xs ...expr) expr {
	for _, x := range xs {
		if x == nil {
			continue
		}
		if bad := ungrouped(x, keys); bad != nil {
			return bad
		}
	}
	return nil
}

// sqlPath renders a property path the way it was written (c.a.b, c["x"]).
func sqlPath(x expr) string {
	switch n := x.(type) {
	case *refExpr:
		return n.name
	case *propExpr:
		base := sqlPath(n.x)
		if isPlainIdent(n.name) {
			return base + "." + n.name
		}
		return base + "[" + strconv.Quote(n.name) + "]"
	case *indexExpr:
		return sqlPath(n.x) + "[" + formatExpr(n.idx) + "]"
	}
	return formatExpr(x)
}

func isPlainIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentPart(s[i]) {
			return false
		}
	}
	return true
}

// isPath reports whether x is an alias or a chain of property and constant
// index accesses on one, the only ORDER BY items the service accepts.
func isPath(x expr) bool {
	if c, ok := x.(*callExpr); ok && c.name == computedFn {
		return true // a computed property: a top-level path of its own
	}
	for {
		switch n := x.(type) {
		case *refExpr:
			return true
		case *propExpr:
			x = n.x
		case *indexExpr:
			if c, ok := n.idx.(*constExpr); !ok || c.v.k != kNumber {
				return false
			}
			x = n.x
		default:
			return false
		}
	}
}
