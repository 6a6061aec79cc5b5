package query

// rootFields returns the top-level document properties a query reads, so
// the decoder can skip the others; it returns nil when the query needs the
// whole document as a value (the alias passed to a function, compared, a
// FROM subquery over the documents, and so on). passthrough is true when
// the query also writes the document out unchanged (SELECT *, SELECT VALUE
// c, SELECT c): the decoder then keeps the document's text for that.
func rootFields(q *selectQuery) (fields map[string]bool, passthrough bool) {
	if len(q.from) == 0 {
		return map[string]bool{}, false
	}
	src := q.from[0]
	if src.sub != nil || !src.container {
		return nil, false
	}
	path, ok := containerPrefix(src.x)
	if !ok {
		return nil, false
	}
	u := &fieldUse{fields: map[string]bool{}}
	if len(path) > 0 {
		// FROM c.children ch / FROM x IN c.arr: only that subtree is read,
		// and the container name cannot be referenced again.
		u.fields[path[0]] = true
	} else {
		if src.in {
			return nil, false
		}
		u.rootIsAlias = true
	}
	u.query(q)
	if u.all {
		return nil, false
	}
	return u.fields, u.passthrough
}

// fieldUse collects the root properties referenced by a query tree.
type fieldUse struct {
	fields      map[string]bool
	all         bool
	rootIsAlias bool
	passthrough bool
}

// isRoot reports whether r, inside query q, names the top-level alias that
// holds the whole document.
func (u *fieldUse) isRoot(q *selectQuery, r *refExpr) bool {
	return u.rootIsAlias && q.depth-r.depth == 0 && r.slot == 0
}

func (u *fieldUse) query(q *selectQuery) {
	// The top level may write the document out as it is (SELECT *,
	// SELECT VALUE c, SELECT c AS x): that needs its text, not its members.
	// DISTINCT compares whole documents, so it needs them decoded.
	outputsRoot := q.depth == 0 && u.rootIsAlias && !q.distinct
	if q.star && q.depth == 0 && u.rootIsAlias {
		if !outputsRoot {
			u.all = true
			return
		}
		u.passthrough = true
	}
	for i, src := range q.from {
		switch {
		case src.sub != nil:
			u.query(src.sub)
		case i == 0 && src.container:
			// The container path was accounted for by rootFields.
		default:
			u.expr(q, src.x)
		}
	}
	for _, it := range q.items {
		if r, ok := it.x.(*refExpr); ok && outputsRoot && u.isRoot(q, r) {
			u.passthrough = true
			continue
		}
		u.expr(q, it.x)
	}
	for _, x := range []expr{q.top, q.where, q.offset, q.limit} {
		u.expr(q, x)
	}
	for _, g := range q.groupBy {
		u.expr(q, g)
	}
	for _, o := range q.orderBy {
		u.expr(q, o.x)
	}
}

func (u *fieldUse) expr(q *selectQuery, x expr) {
	if x == nil || u.all {
		return
	}
	switch n := x.(type) {
	case *refExpr:
		if u.isRoot(q, n) {
			u.all = true // the document itself is used as a value
		}
	case *rootExpr:
		u.all = true
	case *propExpr:
		if r, ok := n.x.(*refExpr); ok && u.isRoot(q, r) {
			u.fields[n.name] = true
			return
		}
		u.expr(q, n.x)
	case *indexExpr:
		u.expr(q, n.x)
		u.expr(q, n.idx)
	case *unaryExpr:
		u.expr(q, n.x)
	case *binaryExpr:
		u.expr(q, n.l)
		u.expr(q, n.r)
	case *andExpr:
		u.expr(q, n.l)
		u.expr(q, n.r)
	case *orExpr:
		u.expr(q, n.l)
		u.expr(q, n.r)
	case *coalesceExpr:
		u.expr(q, n.l)
		u.expr(q, n.r)
	case *condExpr:
		u.expr(q, n.c)
		u.expr(q, n.a)
		u.expr(q, n.b)
	case *betweenExpr:
		u.expr(q, n.x)
		u.expr(q, n.lo)
		u.expr(q, n.hi)
	case *inExpr:
		u.expr(q, n.x)
		for _, e := range n.list {
			u.expr(q, e)
		}
	case *likeExpr:
		u.expr(q, n.x)
		u.expr(q, n.pattern)
		u.expr(q, n.escape)
	case *callExpr:
		for _, a := range n.args {
			u.expr(q, a)
		}
	case *aggExpr:
		u.expr(q, n.arg)
	case *arrayExpr:
		for _, e := range n.elems {
			u.expr(q, e)
		}
	case *objectExpr:
		for _, e := range n.vals {
			u.expr(q, e)
		}
	case *subqueryExpr:
		u.query(n.q)
	}
}
