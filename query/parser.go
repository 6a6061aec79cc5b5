package query

import (
	"math"
	"strings"
)

// maxDepth bounds expression nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

type parser struct {
	toks  []token
	pos   int
	depth int
	anon  int // unaliased subquery sources so far
}

// parseText parses a complete SELECT statement.
func parseText(text string) (*selectQuery, error) {
	buf := tokenPool.Get().(*[]token)
	p := &parser{toks: lexInto((*buf)[:0], text)}
	defer func() {
		clear(p.toks) // drop references to the text
		*buf = p.toks[:0]
		tokenPool.Put(buf)
	}()
	q, err := p.parseSelect()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, syntaxErrorAt(t)
	}
	return q, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) peekAt(n int) token {
	if p.pos+n < len(p.toks) {
		return p.toks[p.pos+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

// isKw reports whether the current token is the keyword kw.
func (p *parser) isKw(kw string) bool {
	t := p.toks[p.pos]
	return t.kind == tIdent && t.kw == kw
}

func (p *parser) isPunct(s string) bool {
	t := p.toks[p.pos]
	return t.kind == tPunct && t.text == s
}

func (p *parser) acceptKw(kw string) bool {
	if p.isKw(kw) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) acceptPunct(s string) bool {
	if p.isPunct(s) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) fail() error { return syntaxErrorAt(p.peek()) }

func (p *parser) expectKw(kw string) error {
	if !p.acceptKw(kw) {
		return p.fail()
	}
	return nil
}

func (p *parser) expectPunct(s string) error {
	if !p.acceptPunct(s) {
		return p.fail()
	}
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &Error{Code: CodeSyntax, Message: "The query is too deeply nested.", Start: p.peek().pos, End: p.peek().pos}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) parseSelect() (*selectQuery, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if err := p.expectKw("SELECT"); err != nil {
		return nil, err
	}
	q := &selectQuery{}
	if p.acceptKw("DISTINCT") {
		q.distinct = true
	}
	if p.acceptKw("TOP") {
		t := p.next()
		switch t.kind {
		case tNumber:
			q.top = &constExpr{numV(t.num)}
		case tParam:
			q.top = &paramExpr{t.text}
		default:
			return nil, syntaxErrorAt(t)
		}
	}
	switch {
	case p.acceptPunct("*"):
		q.star = true
	case p.acceptKw("VALUE"):
		q.isValue = true
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		q.items = []selectItem{{x: x}}
	default:
		for {
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			it := selectItem{x: x}
			if p.acceptKw("AS") {
				t := p.next()
				if t.kind != tIdent || reserved[t.kw] {
					return nil, syntaxErrorAt(t)
				}
				it.alias = t.text
			} else if t := p.peek(); t.kind == tIdent && !reserved[t.kw] {
				p.next()
				it.alias = t.text
			}
			q.items = append(q.items, it)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKw("FROM") {
		src, err := p.parseFromSource()
		if err != nil {
			return nil, err
		}
		q.from = append(q.from, src)
		for p.acceptKw("JOIN") {
			src, err := p.parseFromSource()
			if err != nil {
				return nil, err
			}
			q.from = append(q.from, src)
		}
	}
	if p.acceptKw("WHERE") {
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		q.where = x
	}
	if p.acceptKw("GROUP") {
		if err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			q.groupBy = append(q.groupBy, x)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKw("ORDER") {
		if err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			rank := p.atRank()
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			it := orderItem{x: x, rank: rank}
			switch {
			case rank:
			case p.acceptKw("DESC"):
				it.desc, it.explicit = true, true
			case p.acceptKw("ASC"):
				it.explicit = true
			}
			q.orderBy = append(q.orderBy, it)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if p.acceptKw("OFFSET") {
		x, err := p.parseCount()
		if err != nil {
			return nil, err
		}
		q.offset = x
		if err := p.expectKw("LIMIT"); err != nil {
			return nil, err
		}
		if q.limit, err = p.parseCount(); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// parseCount parses the operand of OFFSET or LIMIT: a number or a parameter.
func (p *parser) parseCount() (expr, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		return &constExpr{numV(t.num)}, nil
	case tParam:
		return &paramExpr{t.text}, nil
	}
	return nil, syntaxErrorAt(t)
}

func (p *parser) parseFromSource() (*fromSource, error) {
	t := p.peek()
	src := &fromSource{pos: t.pos}
	if t.kind == tIdent && !reserved[t.kw] && p.peekAt(1).kind == tIdent && p.peekAt(1).kw == "IN" {
		p.pos += 2
		src.alias = t.text
		src.in = true
		x, err := p.parsePostfix()
		if err != nil {
			return nil, err
		}
		src.x = x
		return src, nil
	}
	if p.isPunct("(") && p.peekAt(1).kind == tIdent && p.peekAt(1).kw == "SELECT" {
		p.next()
		sub, err := p.parseSelect()
		if err != nil {
			return nil, err
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		src.sub = sub
	} else {
		if t.kind != tIdent || (reserved[t.kw] && t.kw != "ROOT") {
			return nil, syntaxErrorAt(t)
		}
		x, err := p.parsePostfix()
		if err != nil {
			return nil, err
		}
		src.x = x
	}
	if p.acceptKw("AS") {
		a := p.next()
		if a.kind != tIdent || reserved[a.kw] {
			return nil, syntaxErrorAt(a)
		}
		src.alias = a.text
	} else if a := p.peek(); a.kind == tIdent && !reserved[a.kw] {
		p.next()
		src.alias = a.text
	}
	if src.alias == "" {
		switch x := src.x.(type) {
		case *refExpr:
			src.alias = x.name
		case *propExpr:
			src.alias = x.name
		case nil:
			// An unaliased subquery source: bind it under a name no
			// identifier can spell, so it is iterated but not referenced.
			p.anon++
			src.alias = "$from" + itoa(p.anon)
		default:
			return nil, semanticError(CodeSemantic, src.pos, p.peek().pos, "Alias is required for a FROM or JOIN source that is not a path.")
		}
	}
	return src, nil
}

// parseExpr parses a full scalar expression (lowest precedence: ?:).
func (p *parser) parseExpr() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	c, err := p.parseCoalesce()
	if err != nil {
		return nil, err
	}
	if p.acceptPunct("?") {
		a, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expectPunct(":"); err != nil {
			return nil, err
		}
		b, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		return &condExpr{c, a, b}, nil
	}
	return c, nil
}

// parseLeftAssoc parses operands joined by a left-associative operator:
// operand (op operand)*, where op reports (and consumes) the operator and
// join builds the node of two operands.
func parseLeftAssoc(operand func() (expr, error), op func() bool, join func(l, r expr) expr) (expr, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for op() {
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = join(l, r)
	}
	return l, nil
}

func (p *parser) parseCoalesce() (expr, error) {
	return parseLeftAssoc(p.parseOr, func() bool { return p.acceptPunct("??") },
		func(l, r expr) expr { return &coalesceExpr{l, r} })
}

func (p *parser) parseOr() (expr, error) {
	return parseLeftAssoc(p.parseAnd, func() bool { return p.acceptKw("OR") },
		func(l, r expr) expr { return &orExpr{l, r} })
}

func (p *parser) parseAnd() (expr, error) {
	return parseLeftAssoc(p.parsePredicate, func() bool { return p.acceptKw("AND") },
		func(l, r expr) expr { return &andExpr{l, r} })
}

// parsePredicate parses IN, LIKE and BETWEEN over binary expressions.
func (p *parser) parsePredicate() (expr, error) {
	x, err := p.parseBinary(1)
	if err != nil {
		return nil, err
	}
	for {
		not := false
		if p.isKw("NOT") {
			k := p.peekAt(1)
			if k.kind != tIdent || (k.kw != "IN" && k.kw != "LIKE" && k.kw != "BETWEEN") {
				return x, nil
			}
			p.next()
			not = true
		}
		switch {
		case p.acceptKw("IN"):
			if err := p.expectPunct("("); err != nil {
				return nil, err
			}
			var list []expr
			for {
				e, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				list = append(list, e)
				if !p.acceptPunct(",") {
					break
				}
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
			x = &inExpr{x: x, list: list, not: not}
		case p.acceptKw("LIKE"):
			pat, err := p.parseBinary(1)
			if err != nil {
				return nil, err
			}
			le := &likeExpr{x: x, pattern: pat, not: not}
			if p.acceptKw("ESCAPE") {
				if le.escape, err = p.parseBinary(1); err != nil {
					return nil, err
				}
			}
			x = le
		case p.acceptKw("BETWEEN"):
			lo, err := p.parseBinary(1)
			if err != nil {
				return nil, err
			}
			if err := p.expectKw("AND"); err != nil {
				return nil, err
			}
			hi, err := p.parseBinary(1)
			if err != nil {
				return nil, err
			}
			x = &betweenExpr{x: x, lo: lo, hi: hi, not: not}
		default:
			if not {
				return nil, p.fail()
			}
			return x, nil
		}
	}
}

// binaryPrec gives the precedence of each binary operator (higher binds tighter).
var binaryPrec = map[string]int{
	"||": 1,
	"|":  2,
	"^":  3,
	"&":  4,
	"=":  5, "!=": 5, "<>": 5,
	"<": 6, ">": 6, "<=": 6, ">=": 6,
	"<<": 7, ">>": 7, ">>>": 7,
	"+": 8, "-": 8,
	"*": 9, "/": 9, "%": 9,
}

func (p *parser) parseBinary(minPrec int) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tPunct {
			return l, nil
		}
		prec, ok := binaryPrec[t.text]
		if !ok || prec < minPrec {
			return l, nil
		}
		p.next()
		r, err := p.parseBinary(prec + 1)
		if err != nil {
			return nil, err
		}
		op := t.text
		if op == "<>" {
			op = "!="
		}
		l = &binaryExpr{op, l, r}
	}
}

func (p *parser) parseUnary() (expr, error) {
	t := p.peek()
	if (t.kind == tPunct && (t.text == "-" || t.text == "+" || t.text == "~")) || (t.kind == tIdent && t.kw == "NOT") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		op := t.text
		if t.kind == tIdent {
			op = "NOT"
		}
		if c, ok := x.(*constExpr); ok && c.v.k == kNumber && (op == "-" || op == "+") {
			if op == "-" {
				return &constExpr{numV(-c.v.n)}, nil
			}
			return c, nil
		}
		return &unaryExpr{op, x}, nil
	}
	return p.parsePostfix()
}

func (p *parser) parsePostfix() (expr, error) {
	x, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.acceptPunct("."):
			t := p.next()
			if t.kind != tIdent || reserved[t.kw] {
				return nil, syntaxErrorAt(t) // c.value must be written c["value"]
			}
			x = &propExpr{x, t.text}
		case p.acceptPunct("["):
			idx, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if err := p.expectPunct("]"); err != nil {
				return nil, err
			}
			if c, ok := idx.(*constExpr); ok && c.v.k == kString {
				x = &propExpr{x, c.v.str()}
			} else {
				x = &indexExpr{x, idx}
			}
		default:
			return x, nil
		}
	}
}

// aggregateNames lists the aggregate functions (upper case).
var aggregateNames = map[string]bool{"COUNT": true, "COUNTIF": true, "SUM": true, "AVG": true, "MIN": true, "MAX": true, "MAKELIST": true, "MAKESET": true}

func (p *parser) parsePrimary() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.next()
	switch t.kind {
	case tNumber:
		return &constExpr{numV(t.num)}, nil
	case tString:
		return &constExpr{strV(t.str)}, nil
	case tParam:
		return &paramExpr{t.text}, nil
	case tPunct:
		switch t.text {
		case "(":
			if p.isKw("SELECT") {
				q, err := p.parseSelect()
				if err != nil {
					return nil, err
				}
				if err := p.expectPunct(")"); err != nil {
					return nil, err
				}
				return &subqueryExpr{mode: 's', q: q}, nil
			}
			x, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
			return x, nil
		case "[":
			a := &arrayExpr{}
			if p.acceptPunct("]") {
				return a, nil
			}
			for {
				x, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				a.elems = append(a.elems, x)
				if !p.acceptPunct(",") {
					break
				}
			}
			if err := p.expectPunct("]"); err != nil {
				return nil, err
			}
			return a, nil
		case "{":
			o := &objectExpr{}
			if p.acceptPunct("}") {
				return o, nil
			}
			for {
				k := p.next()
				var key string
				switch k.kind {
				case tString:
					key = k.str
				case tIdent:
					key = k.text
				default:
					return nil, syntaxErrorAt(k)
				}
				if err := p.expectPunct(":"); err != nil {
					return nil, err
				}
				x, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, key)
				o.vals = append(o.vals, x)
				if !p.acceptPunct(",") {
					break
				}
			}
			if err := p.expectPunct("}"); err != nil {
				return nil, err
			}
			return o, nil
		}
		return nil, syntaxErrorAt(t)
	case tIdent:
		switch t.kw {
		case "TRUE":
			return &constExpr{trueValue}, nil
		case "FALSE":
			return &constExpr{falseVal}, nil
		case "NULL":
			return &constExpr{nullValue}, nil
		case "UNDEFINED":
			return &constExpr{undef}, nil
		case "EXISTS", "ARRAY":
			if p.isPunct("(") && p.peekAt(1).kind == tIdent && p.peekAt(1).kw == "SELECT" {
				p.next()
				q, err := p.parseSelect()
				if err != nil {
					return nil, err
				}
				if err := p.expectPunct(")"); err != nil {
					return nil, err
				}
				mode := byte('e')
				if t.kw == "ARRAY" {
					mode = 'a'
				}
				return &subqueryExpr{mode: mode, q: q}, nil
			}
			return nil, p.fail()
		case "UDF":
			if err := p.expectPunct("."); err != nil {
				return nil, err
			}
			n := p.next()
			if n.kind != tIdent {
				return nil, syntaxErrorAt(n)
			}
			if !p.isPunct("(") {
				return nil, p.fail()
			}
			args, err := p.parseArgs()
			if err != nil {
				return nil, err
			}
			return &callExpr{name: n.text, pos: t.pos, udf: true, args: args}, nil
		}
		if p.isPunct("(") {
			args, err := p.parseArgs()
			if err != nil {
				return nil, err
			}
			if aggregateNames[t.kw] {
				if len(args) != 1 {
					return nil, semanticError(CodeArity, t.pos, p.peek().pos, "The %s function requires 1 argument(s).", t.kw)
				}
				return &aggExpr{fn: t.kw, arg: args[0]}, nil
			}
			return &callExpr{name: t.text, pos: t.pos, args: args}, nil
		}
		if reserved[t.kw] {
			return nil, syntaxErrorAt(t)
		}
		switch t.text {
		case "NaN":
			return &constExpr{numV(math.NaN())}, nil
		case "Infinity":
			return &constExpr{numV(math.Inf(1))}, nil
		}
		return &refExpr{name: t.text, pos: t.pos}, nil
	}
	return nil, syntaxErrorAt(t)
}

func (p *parser) parseArgs() ([]expr, error) {
	p.next() // (
	var args []expr
	if p.acceptPunct(")") {
		return args, nil
	}
	for {
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		args = append(args, x)
		if !p.acceptPunct(",") {
			break
		}
	}
	if err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	return args, nil
}

// upper is strings.ToUpper, named for readability at call sites.
func upper(s string) string { return strings.ToUpper(s) }
