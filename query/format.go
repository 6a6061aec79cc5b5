package query

import (
	"strconv"
	"strings"
)

// formatExpr renders an expression as canonical query text. Two expressions
// with the same rendering are the same expression, which GROUP BY
// validation relies on.
func formatExpr(x expr) string {
	var b strings.Builder
	writeExpr(&b, x)
	return b.String()
}

func writeExpr(b *strings.Builder, x expr) {
	switch n := x.(type) {
	case *constExpr:
		if n.v.k == kUndefined {
			b.WriteString("undefined")
		} else {
			b.Write(encodeJSON(n.v))
		}
	case *refExpr:
		b.WriteString(n.name)
	case *rootExpr:
		b.WriteString("ROOT")
	case *paramExpr:
		b.WriteString(n.name)
	case *propExpr:
		writeExpr(b, n.x)
		b.WriteByte('[')
		b.WriteString(strconv.Quote(n.name))
		b.WriteByte(']')
	case *indexExpr:
		writeExpr(b, n.x)
		b.WriteByte('[')
		writeExpr(b, n.idx)
		b.WriteByte(']')
	case *unaryExpr:
		b.WriteString("(" + n.op + " ")
		writeExpr(b, n.x)
		b.WriteByte(')')
	case *binaryExpr:
		writeInfix(b, n.op, n.l, n.r)
	case *andExpr:
		writeInfix(b, "AND", n.l, n.r)
	case *orExpr:
		writeInfix(b, "OR", n.l, n.r)
	case *coalesceExpr:
		writeInfix(b, "??", n.l, n.r)
	case *condExpr:
		b.WriteByte('(')
		writeExpr(b, n.c)
		b.WriteString(" ? ")
		writeExpr(b, n.a)
		b.WriteString(" : ")
		writeExpr(b, n.b)
		b.WriteByte(')')
	case *betweenExpr:
		b.WriteByte('(')
		writeExpr(b, n.x)
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" BETWEEN ")
		writeExpr(b, n.lo)
		b.WriteString(" AND ")
		writeExpr(b, n.hi)
		b.WriteByte(')')
	case *inExpr:
		b.WriteByte('(')
		writeExpr(b, n.x)
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN ")
		writeList(b, n.list)
		b.WriteByte(')')
	case *likeExpr:
		b.WriteByte('(')
		writeExpr(b, n.x)
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" LIKE ")
		writeExpr(b, n.pattern)
		if n.escape != nil {
			b.WriteString(" ESCAPE ")
			writeExpr(b, n.escape)
		}
		b.WriteByte(')')
	case *callExpr:
		if n.udf {
			b.WriteString("udf." + n.name)
		} else {
			b.WriteString(upper(n.name))
		}
		writeList(b, n.args)
	case *aggExpr:
		b.WriteString(n.fn)
		writeList(b, []expr{n.arg})
	case *arrayExpr:
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, e)
		}
		b.WriteByte(']')
	case *objectExpr:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(k) + ": ")
			writeExpr(b, n.vals[i])
		}
		b.WriteByte('}')
	case *subqueryExpr:
		switch n.mode {
		case 'e':
			b.WriteString("EXISTS")
		case 'a':
			b.WriteString("ARRAY")
		}
		b.WriteString("(SELECT ...)")
	}
}

func writeInfix(b *strings.Builder, op string, l, r expr) {
	b.WriteByte('(')
	writeExpr(b, l)
	b.WriteString(" " + op + " ")
	writeExpr(b, r)
	b.WriteByte(')')
}

func writeList(b *strings.Builder, xs []expr) {
	b.WriteByte('(')
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		writeExpr(b, x)
	}
	b.WriteByte(')')
}
