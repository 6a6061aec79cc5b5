package query

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// queryGen builds random queries from the grammar's pieces, so that every
// clause and operator meets every other in shapes a byte-level fuzzer
// rarely reaches.
type queryGen struct {
	r *rand.Rand
}

func (g *queryGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *queryGen) path() string {
	return g.pick("c.a", "c.b", "c.n", "c.s", "c.arr", "c.o", "c.o.x", "c.arr[0]", `c["a"]`, "c.missing", "t", "t.k", "c")
}

func (g *queryGen) literal() string {
	return g.pick("1", "-2.5", "0", "'x'", `"y"`, "true", "false", "null", "undefined", "[1, 'a']", `{"k": 1}`, "@p", "@q", "NaN")
}

func (g *queryGen) expr(depth int) string {
	if depth <= 0 {
		if g.r.IntN(2) == 0 {
			return g.path()
		}
		return g.literal()
	}
	d := depth - 1
	switch g.r.IntN(14) {
	case 0:
		return g.expr(d) + " " + g.pick("+", "-", "*", "/", "%", "||", "&", "|", "^", "<<", ">>", ">>>") + " " + g.expr(d)
	case 1:
		return g.expr(d) + " " + g.pick("=", "!=", "<", "<=", ">", ">=") + " " + g.expr(d)
	case 2:
		return g.expr(d) + " " + g.pick("AND", "OR") + " " + g.expr(d)
	case 3:
		return g.pick("NOT ", "-", "~", "+") + g.expr(d)
	case 4:
		return g.expr(d) + " ? " + g.expr(d) + " : " + g.expr(d)
	case 5:
		return g.expr(d) + " ?? " + g.expr(d)
	case 6:
		return g.expr(d) + g.pick(" ", " NOT ") + "IN (" + g.expr(d) + ", " + g.literal() + ")"
	case 7:
		return g.expr(d) + g.pick(" ", " NOT ") + "BETWEEN " + g.literal() + " AND " + g.literal()
	case 8:
		return g.expr(d) + " LIKE " + g.pick("'a%'", "'_'", "'[a-c]%'", "@q") + g.pick("", " ESCAPE '!'")
	case 9:
		fn := g.pick("ABS", "LOWER", "CONCAT", "IS_DEFINED", "ARRAY_LENGTH", "ARRAY_CONTAINS", "STARTSWITH", "SUBSTRING",
			"ToString", "StringToNumber", "IIF", "ARRAY_SLICE", "DateTimeAdd", "ROUND", "SetUnion", "IntAdd", "ObjectToArray")
		args := []string{}
		for i := 0; i < 1+g.r.IntN(3); i++ {
			args = append(args, g.expr(d))
		}
		return fn + "(" + strings.Join(args, ", ") + ")"
	case 10:
		return "[" + g.expr(d) + ", " + g.expr(d) + "]"
	case 11:
		return `{"k": ` + g.expr(d) + `, "j": ` + g.expr(d) + "}"
	case 12:
		return g.pick("EXISTS", "ARRAY", "") + "(SELECT VALUE x FROM x IN c.arr WHERE " + g.expr(d) + ")"
	default:
		return "(" + g.expr(d) + ")"
	}
}

func (g *queryGen) query() string {
	switch g.r.IntN(6) {
	case 0:
		key := g.pick("c.s", "c.n", "c.o.x", "LOWER(c.s)", "c.a")
		return "SELECT " + key + " AS k, " + g.pick("COUNT", "SUM", "AVG", "MIN", "MAX", "MAKELIST", "MAKESET") +
			"(" + g.expr(1) + ") AS agg FROM c" + g.pick("", " JOIN t IN c.arr") + g.pick("", " WHERE "+g.expr(2)) + " GROUP BY " + key
	case 1:
		return "SELECT VALUE " + g.expr(2) + " FROM c JOIN (SELECT VALUE x FROM x IN c.arr WHERE " + g.expr(2) + ") t" +
			g.pick("", " WHERE "+g.expr(2))
	case 2:
		return "SELECT " + g.pick("*", "VALUE t", "VALUE COUNT(1)") + " FROM (SELECT " + g.pick("VALUE c", "VALUE c.arr", "DISTINCT VALUE c.s") +
			" FROM c" + g.pick("", " WHERE "+g.expr(2)) + ") t"
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	if g.r.IntN(5) == 0 {
		b.WriteString("DISTINCT ")
	}
	if g.r.IntN(6) == 0 {
		b.WriteString("TOP " + g.pick("2", "@n") + " ")
	}
	agg := g.r.IntN(5) == 0
	switch g.r.IntN(4) {
	case 0:
		b.WriteString("*")
	case 1:
		if agg {
			b.WriteString("VALUE " + g.pick("COUNT", "SUM", "AVG", "MIN", "MAX") + "(" + g.expr(1) + ")")
		} else {
			b.WriteString("VALUE " + g.expr(2))
		}
	default:
		b.WriteString(g.expr(2) + " AS v1, " + g.expr(1) + " AS v2")
	}
	b.WriteString(" FROM c")
	if g.r.IntN(3) == 0 {
		b.WriteString(" JOIN t IN c.arr")
	}
	if g.r.IntN(4) != 0 {
		b.WriteString(" WHERE " + g.expr(3))
	}
	if g.r.IntN(4) == 0 {
		b.WriteString(" ORDER BY " + g.pick("c.n", "c.s", "c.o.x", "t") + g.pick("", " DESC"))
	}
	if g.r.IntN(5) == 0 {
		b.WriteString(" OFFSET " + g.pick("1", "@n") + " LIMIT " + g.pick("2", "@n"))
	}
	return b.String()
}

// TestRandomQueries runs generated queries through Parse, Plan and Execute:
// nothing may panic, failures must be *Error (or the documented runtime
// errors), and partial decoding must agree with full decoding.
func TestRandomQueries(t *testing.T) {
	g := &queryGen{r: rand.New(rand.NewPCG(1, 2))}
	docs := docsOf(
		`{"id":"1","a":1,"b":"x","n":3,"s":"abc","arr":[1,{"k":"v"},"a"],"o":{"x":[1,2]}}`,
		`{"id":"2","a":"1","n":-1.5,"s":"a%","arr":[],"o":{"x":null},"extra":{"deep":[1,2,3]}}`,
		`{"id":"3","n":null,"arr":[{"k":1},{"k":2}],"o":"str"}`,
	)
	params := map[string]json.RawMessage{"@p": json.RawMessage(`[1,2]`), "@q": json.RawMessage(`"a%"`), "@n": json.RawMessage(`1`)}
	opts := Options{Params: params, Now: corpusNow}
	parsed := 0
	n := 3000
	if testing.Short() {
		n = 300
	}
	if s := os.Getenv("QUERY_RANDOM_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for i := 0; i < n; i++ {
		text := g.query()
		q, err := Parse(text)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("Parse(%q): %T %v", text, err, err)
			}
			continue
		}
		parsed++
		if _, err := q.Plan(params); err != nil {
			t.Fatalf("Plan(%q): %v", text, err)
		}
		res, err := q.Execute(docs, opts)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("Execute(%q): %T %v", text, err, err)
			}
		}
		if p, _ := q.Plan(params); err == nil && p.Streaming {
			// Rows document by document, with the plan's OFFSET/LIMIT/TOP
			// applied by the caller, must give Execute's answer.
			x, _ := q.Prepare(opts)
			var streamed []json.RawMessage
			var rowErr error
			for doc := range docs {
				rows, err := x.Rows(doc)
				if err != nil {
					rowErr = err
					break
				}
				streamed = append(streamed, rows...)
			}
			if rowErr == nil {
				streamed = applyLimits(streamed, p)
				if joinRaw(streamed) != joinRaw(res) {
					t.Fatalf("%q: Rows gave %s, Execute %s", text, joinRaw(streamed), joinRaw(res))
				}
			}
		}
		if q.fields != nil {
			full := *q
			full.fields = nil
			fres, ferr := full.Execute(docs, opts)
			if (err == nil) != (ferr == nil) || joinRaw(res) != joinRaw(fres) {
				t.Fatalf("%q: partial decoding %s (%v), full %s (%v)", text, joinRaw(res), err, joinRaw(fres), ferr)
			}
		}
	}
	t.Logf("%d of %d generated queries parsed", parsed, n)
	if parsed < n/3 {
		t.Fatalf("only %d of %d generated queries parsed; the generator has drifted from the grammar", parsed, n)
	}
}

// applyLimits applies a plan's OFFSET, LIMIT and TOP the way an engine
// paging with Rows does.
func applyLimits(rows []json.RawMessage, p *Plan) []json.RawMessage {
	if p.Offset > 0 {
		rows = rows[min(p.Offset, len(rows)):]
	}
	if p.Limit >= 0 {
		rows = rows[:min(p.Limit, len(rows))]
	}
	if p.Top >= 0 {
		rows = rows[:min(p.Top, len(rows))]
	}
	return rows
}
