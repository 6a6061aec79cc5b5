package query

import (
	"encoding/json"
	"strconv"
	"strings"
)

// GatewayPlan is the part of the gateway's query plan (the service's
// PartitionedQueryExecutionInfo) that the SDKs' query pipelines read for
// vector and hybrid search: QueryInfo for an ORDER BY VectorDistance (the
// non-streaming ORDER BY: hasNonStreamingOrderBy, the sort direction the
// distance function gives, the rewritten query that returns each item's
// _rid, orderByItems and payload), HybridSearchQueryInfo for ORDER BY RANK
// (the global statistics query, a component query per scoring function with
// the gateway's placeholders for the statistics, the weights, skip and
// take). Exactly one is set. The caller adds queryRanges.
type GatewayPlan struct {
	QueryInfo             json.RawMessage
	HybridSearchQueryInfo json.RawMessage
}

// GatewayOptions are what the plan depends on besides the query.
type GatewayOptions struct {
	// Embedding returns the policy's embedding at a path (nil: none), which
	// sets the direction of an ORDER BY VectorDistance without a
	// distanceFunction option.
	Embedding func(path []string) (Embedding, bool)
	// SkipOrderByRewrite gives the hybrid plan's newer form, for clients
	// that list the HybridSearchSkipOrderByRewrite query feature: component
	// queries that project their scores and need no merge by the client.
	SkipOrderByRewrite bool
}

// Placeholders of the gateway's rewritten queries, which the SDKs replace.
const (
	orderByFilterPlaceholder = "{documentdb-formattableorderbyquery-filter}"
	totalDocumentsHolder     = "{documentdb-formattablehybridsearchquery-totaldocumentcount}"
	totalWordsHolder         = "{documentdb-formattablehybridsearchquery-totalwordcount-%d}"
	hitCountsHolder          = "{documentdb-formattablehybridsearchquery-hitcountsarray-%d}"
	// maxScore is the score a component gives an item it has none for, as
	// the gateway writes it.
	maxScore = "1.79769e+308"
)

// Gateway returns the gateway's plan for a vector or hybrid search query,
// or nil when the query is neither (or has a shape the gateway rewrites in
// ways this package does not, such as JOINs: the caller then plans as
// before).
func (q *Query) Gateway(params map[string]json.RawMessage, opt GatewayOptions) (*GatewayPlan, error) {
	p, err := q.Plan(params)
	if err != nil {
		return nil, err
	}
	sq := q.q
	if len(sq.orderBy) != 1 || len(sq.from) != 1 || sq.from[0].sub != nil || sq.from[0].in || len(sq.groupBy) > 0 || len(sq.aggs) > 0 {
		return nil, nil
	}
	if _, ok := sq.from[0].x.(*rootExpr); !ok {
		return nil, nil
	}
	g := gatewayWriter{alias: sq.from[0].alias, opt: opt}
	if sq.orderBy[0].rank {
		return g.hybrid(sq, p)
	}
	sc := searchCallOf(sq.orderBy[0].x)
	if sc == nil || sc.kind != skVectorDistance {
		return nil, nil
	}
	return g.vectorOrder(sq, p)
}

// gatewayWriter renders expressions as the gateway writes them.
type gatewayWriter struct {
	alias string
	opt   GatewayOptions
	bad   bool // an expression it cannot render
}

func (g *gatewayWriter) metric(sc *searchCall) vectorMetric {
	if sc.metric != 0 {
		return sc.metric
	}
	if g.opt.Embedding != nil && sc.path != nil {
		if e, ok := g.opt.Embedding(sc.path); ok {
			if m, ok := parseMetric(e.DistanceFunction); ok {
				return m
			}
		}
	}
	return metricCosine
}

type orderedInfo struct {
	Top                         *int            `json:"top"`
	Offset                      *int            `json:"offset"`
	Limit                       *int            `json:"limit"`
	OrderBy                     []string        `json:"orderBy"`
	OrderByExpressions          []string        `json:"orderByExpressions"`
	GroupByExpressions          []string        `json:"groupByExpressions"`
	GroupByAliases              []string        `json:"groupByAliases"`
	Aggregates                  []string        `json:"aggregates"`
	GroupByAliasToAggregateType struct{}        `json:"groupByAliasToAggregateType"`
	RewrittenQuery              string          `json:"rewrittenQuery"`
	HasSelectValue              bool            `json:"hasSelectValue"`
	DCountInfo                  json.RawMessage `json:"dCountInfo"`
	HasNonStreamingOrderBy      bool            `json:"hasNonStreamingOrderBy"`
}

// queryInfo is the gateway's QueryInfo, distinctType first as it writes it.
type queryInfo struct {
	DistinctType string `json:"distinctType"`
	orderedInfo
}

// MarshalJSON writes the QueryInfo with the empty lists and nulls the
// gateway writes.
func (i queryInfo) MarshalJSON() ([]byte, error) {
	type plain struct {
		DistinctType string `json:"distinctType"`
		orderedInfo
	}
	if i.OrderBy == nil {
		i.OrderBy = []string{}
	}
	if i.OrderByExpressions == nil {
		i.OrderByExpressions = []string{}
	}
	i.GroupByExpressions, i.GroupByAliases, i.Aggregates = []string{}, []string{}, []string{}
	i.DCountInfo = json.RawMessage("null")
	return json.Marshal(plain(i))
}

func intPtr(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

// vectorOrder plans ORDER BY VectorDistance.
func (g *gatewayWriter) vectorOrder(sq *selectQuery, p *Plan) (*GatewayPlan, error) {
	o := sq.orderBy[0]
	sc := searchCallOf(o.x)
	expr := g.expr(o.x)
	desc := g.metric(sc).higherIsCloser()
	suffix := ""
	if o.explicit {
		desc = o.desc
		suffix = map[bool]string{true: " DESC", false: " ASC"}[o.desc]
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	if p.Top >= 0 {
		b.WriteString("TOP " + strconv.Itoa(p.Top) + " ")
	}
	b.WriteString(g.alias + "._rid, [{\"item\": " + expr + "}] AS orderByItems, " + g.payload(sq) + " AS payload\nFROM " + g.alias + "\n")
	b.WriteString(g.where(sq))
	b.WriteString("ORDER BY " + expr + suffix)
	if p.Limit >= 0 {
		b.WriteString("\nOFFSET 0 LIMIT " + strconv.Itoa(max(p.Offset, 0)+p.Limit))
	}
	if g.bad {
		return nil, nil
	}
	info := queryInfo{DistinctType: "None"}
	if sq.distinct {
		info.DistinctType = "Ordered"
	}
	info.Top, info.Offset, info.Limit = intPtr(p.Top), intPtr(p.Offset), intPtr(p.Limit)
	info.OrderBy = []string{direction(desc)}
	info.OrderByExpressions = []string{expr}
	info.RewrittenQuery = b.String()
	info.HasSelectValue = sq.isValue
	info.HasNonStreamingOrderBy = true
	raw, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	return &GatewayPlan{QueryInfo: raw}, nil
}

func direction(desc bool) string {
	if desc {
		return "Descending"
	}
	return "Ascending"
}

// where renders the WHERE clause with the placeholder the SDK fills in.
func (g *gatewayWriter) where(sq *selectQuery) string {
	if sq.where == nil {
		return "WHERE (" + orderByFilterPlaceholder + ")\n"
	}
	return "WHERE ((" + g.expr(sq.where) + ") AND " + orderByFilterPlaceholder + ")\n"
}

// payload renders what the query projects.
func (g *gatewayWriter) payload(sq *selectQuery) string {
	switch {
	case sq.star:
		return g.alias
	case sq.isValue:
		return g.expr(sq.items[0].x)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, it := range sq.items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(it.alias) + ": " + g.expr(it.x))
	}
	b.WriteByte('}')
	return b.String()
}

type hybridInfo struct {
	GlobalStatisticsQuery             string          `json:"globalStatisticsQuery"`
	ComponentQueryInfos               []queryInfo     `json:"componentQueryInfos"`
	ComponentWithoutPayloadQueryInfos []queryInfo     `json:"componentWithoutPayloadQueryInfos"`
	ProjectionQueryInfo               json.RawMessage `json:"projectionQueryInfo"`
	ComponentWeights                  []float64       `json:"componentWeights"`
	Skip                              *int            `json:"skip"`
	Take                              *int            `json:"take"`
	RequiresGlobalStatistics          bool            `json:"requiresGlobalStatistics"`
}

// hybrid plans ORDER BY RANK.
func (g *gatewayWriter) hybrid(sq *selectQuery, p *Plan) (*GatewayPlan, error) {
	call := sq.orderBy[0].x.(*callExpr)
	comps := []*callExpr{call}
	var weights []float64
	if call.search.kind == skRRF {
		comps, weights = call.search.components, call.search.weights
	}
	take := p.Top
	if take < 0 {
		take = p.Limit
	}
	skip := p.Offset
	top := 12 * (max(skip, 0) + max(take, 0))
	type comp struct {
		score, fallback string
		desc            bool
	}
	var cs []comp
	var stats []string
	for i, c := range comps {
		neg := weights != nil && weights[i] < 0
		if c.search.kind == skScore {
			j := len(stats)
			kws := g.keywords(c)
			var hits []string
			for _, kw := range kws {
				hits = append(hits, "COUNTIF(FullTextContains("+g.expr(c.args[0])+", "+kw+"))")
			}
			stats = append(stats, "{\"totalWordCount\": SUM(_FullTextWordCount("+g.expr(c.args[0])+")), \"hitCounts\": ["+strings.Join(hits, ", ")+"]}")
			score := "_FullTextScore(" + g.expr(c.args[0]) + ", [" + strings.Join(kws, ", ") + "], " + totalDocumentsHolder + ", " +
				strings.Replace(totalWordsHolder, "%d", strconv.Itoa(j), 1) + ", " + strings.Replace(hitCountsHolder, "%d", strconv.Itoa(j), 1) + ")"
			fallback := "-1"
			if neg {
				fallback = maxScore
			}
			cs = append(cs, comp{score: score, fallback: fallback, desc: !neg})
			continue
		}
		args := []string{g.expr(c.args[0]), g.expr(c.args[1])}
		if len(c.args) > 3 {
			args = append(args, g.expr(c.args[3]))
		}
		score := "_VectorScore(" + strings.Join(args, ", ") + ")"
		desc := g.metric(c.search).higherIsCloser()
		if neg {
			desc = !desc
		}
		fallback := "-" + maxScore
		if !desc {
			fallback = maxScore
		}
		cs = append(cs, comp{score: score, fallback: fallback, desc: desc})
	}
	natural := func(i int) bool {
		c := comps[i]
		if c.search.kind == skScore {
			return true
		}
		return g.metric(c.search).higherIsCloser()
	}
	var scores, scoresNegated []string
	for _, c := range cs {
		s := "(" + c.score + " ?? " + c.fallback + ")"
		scores = append(scores, s)
		// The newer form's client ranks every projected score highest
		// first: a component ranked lowest first (a distance, or a
		// negative weight) is projected negated.
		if !c.desc {
			s = "(-1 * " + s + ")"
		}
		scoresNegated = append(scoresNegated, s)
	}
	info := hybridInfo{
		GlobalStatisticsQuery:             "SELECT COUNT(1) AS documentCount, [" + strings.Join(stats, ", ") + "] AS fullTextStatistics\nFROM " + g.alias,
		ComponentWithoutPayloadQueryInfos: []queryInfo{},
		ProjectionQueryInfo:               json.RawMessage("null"),
		ComponentWeights:                  []float64{},
		Skip:                              intPtr(skip),
		Take:                              intPtr(take),
		RequiresGlobalStatistics:          len(stats) > 0,
	}
	for _, w := range weights {
		if w < 0 {
			w = -w
		}
		info.ComponentWeights = append(info.ComponentWeights, w)
	}
	// One component needs no fusion: its clients merge the ranges' answers
	// by its ORDER BY, which only the older form gives them.
	skipRewrite := g.opt.SkipOrderByRewrite && len(cs) > 1
	for i, c := range cs {
		suffix := ""
		switch {
		case comps[i].search.kind == skScore && c.desc:
			suffix = " DESC"
		case c.desc != natural(i):
			suffix = map[bool]string{true: " DESC", false: " ASC"}[c.desc]
		}
		ci := queryInfo{DistinctType: "None"}
		var b strings.Builder
		if take < 0 {
			// Neither TOP nor LIMIT: every matching row is ranked (the
			// client allowed an unbounded non-streaming query).
			b.WriteString("SELECT " + g.alias + "._rid, ")
		} else {
			b.WriteString("SELECT TOP " + strconv.Itoa(top) + " " + g.alias + "._rid, ")
		}
		if skipRewrite {
			b.WriteString(g.payload(sq) + " AS payload, [" + strings.Join(scoresNegated, ", ") + "] AS componentScores\nFROM " + g.alias + "\n")
			if sq.where != nil {
				b.WriteString("WHERE " + g.expr(sq.where) + "\n")
			}
			b.WriteString("ORDER BY " + c.score + suffix)
		} else {
			if take >= 0 {
				ci.Top = intPtr(top)
			}
			ci.OrderBy = []string{direction(c.desc)}
			ci.OrderByExpressions = []string{c.score}
			ci.HasNonStreamingOrderBy = true
			b.WriteString("[{\"item\": " + c.score + "}] AS orderByItems, {\"payload\": " + g.payload(sq) + ", \"componentScores\": [" + strings.Join(scores, ", ") + "]} AS payload\nFROM " + g.alias + "\n")
			b.WriteString(g.where(sq))
			b.WriteString("ORDER BY " + c.score + suffix)
		}
		ci.RewrittenQuery = b.String()
		info.ComponentQueryInfos = append(info.ComponentQueryInfos, ci)
	}
	if g.bad {
		return nil, nil
	}
	raw, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	return &GatewayPlan{HybridSearchQueryInfo: raw}, nil
}

// keywords renders FullTextScore's keywords, as strings.
func (g *gatewayWriter) keywords(c *callExpr) []string {
	var out []string
	for _, a := range c.args[1:] {
		if arr, ok := a.(*arrayExpr); ok {
			for _, e := range arr.elems {
				out = append(out, g.expr(e))
			}
			continue
		}
		out = append(out, g.expr(a))
	}
	return out
}

// expr renders x as the gateway writes expressions.
func (g *gatewayWriter) expr(x expr) string {
	var b strings.Builder
	g.write(&b, x)
	return b.String()
}

func (g *gatewayWriter) write(b *strings.Builder, x expr) {
	switch n := x.(type) {
	case *constExpr:
		if n.v.k == kUndefined {
			b.WriteString("undefined")
		} else {
			b.Write(encodeJSON(n.v))
		}
	case *rootExpr:
		b.WriteString(g.alias)
	case *refExpr:
		b.WriteString(n.name)
	case *paramExpr:
		b.WriteString(n.name)
	case *propExpr:
		g.write(b, n.x)
		if isPlainIdent(n.name) && !reserved[upper(n.name)] {
			b.WriteString("." + n.name)
		} else {
			b.WriteString("[" + string(appendString(nil, n.name)) + "]")
		}
	case *indexExpr:
		g.write(b, n.x)
		b.WriteByte('[')
		g.write(b, n.idx)
		b.WriteByte(']')
	case *unaryExpr:
		if n.op == "NOT" {
			b.WriteString("(NOT ")
		} else {
			b.WriteString("(" + n.op)
		}
		g.write(b, n.x)
		b.WriteByte(')')
	case *binaryExpr:
		g.infix(b, n.op, n.l, n.r)
	case *andExpr:
		g.infix(b, "AND", n.l, n.r)
	case *orExpr:
		g.infix(b, "OR", n.l, n.r)
	case *coalesceExpr:
		g.infix(b, "??", n.l, n.r)
	case *condExpr:
		b.WriteByte('(')
		g.write(b, n.c)
		b.WriteString(" ? ")
		g.write(b, n.a)
		b.WriteString(" : ")
		g.write(b, n.b)
		b.WriteByte(')')
	case *betweenExpr:
		b.WriteByte('(')
		g.write(b, n.x)
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" BETWEEN ")
		g.write(b, n.lo)
		b.WriteString(" AND ")
		g.write(b, n.hi)
		b.WriteByte(')')
	case *inExpr:
		b.WriteByte('(')
		g.write(b, n.x)
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" IN ")
		g.list(b, "(", ")", n.list)
		b.WriteByte(')')
	case *likeExpr:
		b.WriteByte('(')
		g.write(b, n.x)
		if n.not {
			b.WriteString(" NOT")
		}
		b.WriteString(" LIKE ")
		g.write(b, n.pattern)
		if n.escape != nil {
			b.WriteString(" ESCAPE ")
			g.write(b, n.escape)
		}
		b.WriteByte(')')
	case *callExpr:
		switch {
		case n.udf:
			b.WriteString("udf." + n.name)
		case n.search != nil:
			b.WriteString(n.search.name)
		case n.name == computedFn:
			g.bad = true
		default:
			b.WriteString(n.name)
		}
		g.list(b, "(", ")", n.args)
	case *aggExpr:
		b.WriteString(n.fn)
		g.list(b, "(", ")", []expr{n.arg})
	case *arrayExpr:
		g.list(b, "[", "]", n.elems)
	case *objectExpr:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.Write(appendString(nil, k))
			b.WriteString(": ")
			g.write(b, n.vals[i])
		}
		b.WriteByte('}')
	default:
		g.bad = true // subqueries: the gateway's rewrite is not reproduced
	}
}

func (g *gatewayWriter) infix(b *strings.Builder, op string, l, r expr) {
	b.WriteByte('(')
	g.write(b, l)
	b.WriteString(" " + op + " ")
	g.write(b, r)
	b.WriteByte(')')
}

func (g *gatewayWriter) list(b *strings.Builder, open, close string, xs []expr) {
	b.WriteString(open)
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		g.write(b, x)
	}
	b.WriteString(close)
}
