package query

// rootFields returns the top-level document properties a query reads, so
// the decoder can skip the others; it returns nil when the query needs the
// whole document (SELECT *, the alias used as a value, a FROM subquery over
// the documents, and so on).
func rootFields(q *selectQuery) map[string]bool {
	if len(q.from) == 0 {
		return map[string]bool{}
	}
	src := q.from[0]
	if src.sub != nil || !src.container {
		return nil
	}
	path, ok := containerPrefix(src.x)
	if !ok {
		return nil
	}
	u := &fieldUse{fields: map[string]bool{}}
	if len(path) > 0 {
		// FROM c.children ch / FROM x IN c.arr: only that subtree is read,
		// and the container name cannot be referenced again.
		u.fields[path[0]] = true
	} else {
		if src.in {
			return nil
		}
		u.rootIsAlias = true
	}
	u.query(q)
	if u.all {
		return nil
	}
	return u.fields
}

// fieldUse collects the root properties referenced by a query tree.
type fieldUse struct {
	fields      map[string]bool
	all         bool
	rootIsAlias bool
}

// isRoot reports whether r, inside query q, names the top-level alias that
// holds the whole document.
func (u *fieldUse) isRoot(q *selectQuery, r *refExpr) bool {
	return u.rootIsAlias && q.depth-r.depth == 0 && r.slot == 0
}

func (u *fieldUse) query(q *selectQuery) {
	if q.star && q.depth == 0 && u.rootIsAlias {
		u.all = true
		return
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
