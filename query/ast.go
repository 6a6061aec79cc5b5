package query

// expr is a node of a scalar expression tree.
type expr interface {
	eval(c *evalCtx, e *env) value
}

type (
	// constExpr is a literal.
	constExpr struct{ v value }
	// refExpr names a FROM alias; depth and slot are filled in by the binder.
	refExpr struct {
		name        string
		pos         int
		depth, slot int
	}
	// rootExpr is the current document (the container named in FROM).
	rootExpr struct{}
	// paramExpr is an @parameter.
	paramExpr struct{ name string }
	// propExpr is x.name or x["name"].
	propExpr struct {
		x    expr
		name string
	}
	// indexExpr is x[expr] with a computed index.
	indexExpr struct{ x, idx expr }
	// unaryExpr is -x, +x, ~x or NOT x.
	unaryExpr struct {
		op string
		x  expr
	}
	// binaryExpr is an arithmetic, bitwise, comparison or string operator.
	binaryExpr struct {
		op   string
		l, r expr
	}
	// andExpr and orExpr are the three-valued logical operators.
	andExpr struct{ l, r expr }
	orExpr  struct{ l, r expr }
	// betweenExpr is x [NOT] BETWEEN lo AND hi.
	betweenExpr struct {
		x, lo, hi expr
		not       bool
	}
	// inExpr is x [NOT] IN (list).
	inExpr struct {
		x    expr
		list []expr
		not  bool
	}
	// likeExpr is x [NOT] LIKE pattern [ESCAPE esc].
	likeExpr struct {
		x, pattern, escape expr
		not                bool
		static             *likePattern // compiled at bind time for a constant pattern
	}
	// condExpr is c ? a : b.
	condExpr struct{ c, a, b expr }
	// coalesceExpr is l ?? r.
	coalesceExpr struct{ l, r expr }
	// callExpr is a built-in or user-defined function call.
	callExpr struct {
		name string
		pos  int
		udf  bool
		fn   *builtin
		args []expr
		// search is set by the binder for vector, full-text and hybrid
		// search functions, which are evaluated through it.
		search *searchCall
	}
	// aggExpr is an aggregate call; slot indexes the group's results.
	aggExpr struct {
		fn   string
		arg  expr
		slot int
	}
	// arrayExpr is an array literal.
	arrayExpr struct{ elems []expr }
	// objectExpr is an object literal; keys keep their written order.
	objectExpr struct {
		keys []string
		vals []expr
	}
	// subqueryExpr is (SELECT ...), EXISTS(SELECT ...) or ARRAY(SELECT ...).
	subqueryExpr struct {
		mode byte // 's' scalar, 'e' exists, 'a' array
		q    *selectQuery
	}
)

// selectQuery is one SELECT statement (the top level or a subquery).
type selectQuery struct {
	distinct bool
	top      expr
	star     bool
	isValue  bool
	items    []selectItem
	from     []*fromSource
	where    expr
	groupBy  []expr
	orderBy  []orderItem
	offset   expr
	limit    expr

	// Filled in by the binder.
	nslots int
	aggs   []*aggExpr
	depth  int
}

// selectItem is one projected expression and its output property name.
type selectItem struct {
	x     expr
	alias string
}

// orderItem is one ORDER BY key.
type orderItem struct {
	x    expr
	desc bool
	// explicit is true when ASC or DESC was written; rank marks ORDER BY
	// RANK (a FullTextScore or RRF ranking).
	explicit bool
	rank     bool
}

// fromSource is one FROM or JOIN source.
type fromSource struct {
	alias string
	pos   int
	in    bool // alias IN collection: iterate the array's elements
	x     expr // collection expression; nil when sub is set
	sub   *selectQuery
	slot  int
	// container is true for the first FROM source of the top-level query,
	// whose head identifier names the container (evaluated as rootExpr).
	container bool
}
