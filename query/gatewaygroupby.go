package query

import (
	"encoding/json"
	"strconv"
	"strings"
)

// groupByAggregateTypes names the aggregates as the gateway's
// groupByAliasToAggregateType does, for those whose partial results the
// SDKs' GROUP BY pipelines merge.
var groupByAggregateTypes = map[string]string{
	"COUNT":   "Count",
	"COUNTIF": "CountIf",
	"SUM":     "Sum",
	"MIN":     "Min",
	"MAX":     "Max",
	"AVG":     "Average",
	// Each range's list or set; the SDK concatenates the lists and
	// unions the sets.
	"MAKELIST": "MakeList",
	"MAKESET":  "MakeSet",
}

// groupByInfo is the gateway's QueryInfo for a GROUP BY query.
type groupByInfo struct {
	DistinctType                string             `json:"distinctType"`
	Top                         *int               `json:"top"`
	Offset                      *int               `json:"offset"`
	Limit                       *int               `json:"limit"`
	OrderBy                     []string           `json:"orderBy"`
	OrderByExpressions          []string           `json:"orderByExpressions"`
	GroupByExpressions          []string           `json:"groupByExpressions"`
	GroupByAliases              []string           `json:"groupByAliases"`
	Aggregates                  []string           `json:"aggregates"`
	GroupByAliasToAggregateType map[string]*string `json:"groupByAliasToAggregateType"`
	RewrittenQuery              string             `json:"rewrittenQuery"`
	HasSelectValue              bool               `json:"hasSelectValue"`
	DCountInfo                  json.RawMessage    `json:"dCountInfo"`
	HasNonStreamingOrderBy      bool               `json:"hasNonStreamingOrderBy"`
}

// GroupByGateway returns the gateway's plan for a GROUP BY query, for an
// SDK that lists the GroupBy query feature: the GROUP BY expressions, the
// projected aliases with the aggregate each one merges (null for a grouped
// value), and the rewritten query the SDK sends to every partition key
// range. Each row of that query carries groupByItems (the group's key) and
// a payload holding, per alias, the grouped value or the partial aggregate
// as the gateway writes it: {"item": COUNT(x)}, {"item": SUM(x)},
// {"item": {"min": MIN(x), "count": COUNT(x)}} (so that a range whose group
// saw no value says so), {"item": {"sum": SUM(x), "count": COUNT(x)}} for
// AVG, {"item": MAKELIST(x)} and {"item": MAKESET(x)}. The SDK merges the ranges' rows per group; an alias whose aggregate
// saw no value anywhere is then present with no value, as with the service.
//
// It returns nil for other queries and for GROUP BY shapes whose rewrite
// this package does not reproduce (SELECT VALUE, SELECT *, DISTINCT,
// ORDER BY, TOP, OFFSET LIMIT, JOIN, aggregates inside expressions): the
// caller then plans as before. A plan with MakeList or MakeSet is for an
// SDK that lists the ListAndSetAggregate query feature.
func (q *Query) GroupByGateway(params map[string]json.RawMessage) (*GatewayPlan, error) {
	sq := q.q
	if len(sq.groupBy) == 0 || sq.isValue || sq.star || sq.distinct || len(sq.orderBy) > 0 ||
		sq.top != nil || sq.offset != nil || sq.limit != nil || len(sq.from) != 1 || sq.from[0].sub != nil || sq.from[0].in {
		return nil, nil
	}
	if _, ok := sq.from[0].x.(*rootExpr); !ok {
		return nil, nil
	}
	if _, err := q.Plan(params); err != nil {
		return nil, err
	}
	g := gatewayWriter{alias: sq.from[0].alias}
	info := groupByInfo{
		DistinctType: "None", OrderBy: []string{}, OrderByExpressions: []string{},
		Aggregates: []string{}, DCountInfo: json.RawMessage("null"),
		GroupByAliasToAggregateType: map[string]*string{},
	}
	var keys strings.Builder
	keys.WriteByte('[')
	for i, x := range sq.groupBy {
		if hasAggregate(x) {
			return nil, nil
		}
		e := g.expr(x)
		info.GroupByExpressions = append(info.GroupByExpressions, e)
		if i > 0 {
			keys.WriteString(", ")
		}
		keys.WriteString(`{"item": ` + e + `}`)
	}
	keys.WriteByte(']')

	var payload strings.Builder
	payload.WriteByte('{')
	for i, it := range sq.items {
		if _, dup := info.GroupByAliasToAggregateType[it.alias]; dup {
			return nil, nil
		}
		if i > 0 {
			payload.WriteString(", ")
		}
		payload.WriteString(strconv.Quote(it.alias) + ": ")
		info.GroupByAliases = append(info.GroupByAliases, it.alias)
		agg, ok := it.x.(*aggExpr)
		if !ok {
			if hasAggregate(it.x) {
				return nil, nil
			}
			info.GroupByAliasToAggregateType[it.alias] = nil
			payload.WriteString(g.expr(it.x))
			continue
		}
		kind, ok := groupByAggregateTypes[agg.fn]
		if !ok || hasAggregate(agg.arg) {
			return nil, nil
		}
		info.GroupByAliasToAggregateType[it.alias] = &kind
		arg := g.expr(agg.arg)
		switch agg.fn {
		case "MIN", "MAX":
			payload.WriteString(`{"item": {"` + strings.ToLower(agg.fn) + `": ` + agg.fn + "(" + arg + `), "count": COUNT(` + arg + `)}}`)
		case "AVG":
			payload.WriteString(`{"item": {"sum": SUM(` + arg + `), "count": COUNT(` + arg + `)}}`)
		default:
			payload.WriteString(`{"item": ` + agg.fn + "(" + arg + `)}`)
		}
	}
	payload.WriteByte('}')

	var b strings.Builder
	b.WriteString("SELECT " + keys.String() + " AS groupByItems, " + payload.String() + " AS payload\nFROM " + g.alias + "\n")
	if sq.where != nil {
		b.WriteString("WHERE " + g.expr(sq.where) + "\n")
	}
	b.WriteString("GROUP BY ")
	for i, e := range info.GroupByExpressions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e)
	}
	if g.bad {
		return nil, nil
	}
	info.RewrittenQuery = b.String()
	raw, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	return &GatewayPlan{QueryInfo: raw}, nil
}

// hasAggregate reports whether x holds an aggregate call.
func hasAggregate(x expr) bool {
	found := false
	walkExpr(x, func(y expr) {
		if _, ok := y.(*aggExpr); ok {
			found = true
		}
	})
	return found
}
