package server

import (
	"encoding/json"
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// querySpec is the body of a query request.
type querySpec struct {
	Query      string `json:"query"`
	Parameters []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	} `json:"parameters"`
}

func (r *request) querySpec() (*querySpec, map[string]json.RawMessage, error) {
	var q querySpec
	if err := json.Unmarshal(r.body, &q); err != nil {
		return nil, nil, badRequest("The query body is not valid JSON: %v", err)
	}
	if q.Query == "" {
		return nil, nil, badRequest("The query body has no query text.")
	}
	params := make(map[string]json.RawMessage, len(q.Parameters))
	for _, p := range q.Parameters {
		v := p.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		params[p.Name] = v
	}
	return &q, params, nil
}

// passThroughPlan is the query plan Orrery answers plan requests with: the
// server executes every query completely, so the client pipeline has nothing
// to rewrite, order or aggregate.
const passThroughPlan = `{"partitionedQueryExecutionInfoVersion":2,"queryInfo":{"distinctType":"None","top":null,"offset":null,"limit":null,"orderBy":[],"orderByExpressions":[],"groupByExpressions":[],"groupByAliases":[],"aggregates":[],"groupByAliasToAggregateType":{},"rewrittenQuery":"","hasSelectValue":false,"dCountInfo":null,"hasNonStreamingOrderBy":false},"queryRanges":[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]}`

// queryPlan answers a query plan request on a container's items.
func (s *Server) queryPlan(r *request) error {
	if _, err := s.containerOf(r); err != nil {
		return err
	}
	if _, _, err := r.querySpec(); err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, []byte(passThroughPlan), "", 1)
	return nil
}

// queryItems answers a query over a container's items.
func (s *Server) queryItems(r *request) error {
	c, err := s.containerOf(r)
	if err != nil {
		return err
	}
	spec, params, err := r.querySpec()
	if err != nil {
		return err
	}
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	n, err := r.maxItemCount()
	if err != nil {
		return err
	}
	oneRange, err := r.partitionKeyRange()
	if err != nil {
		return err
	}
	res, err := s.eng.QueryItems(&engine.QueryRequest{
		Database: c.Database().ID, Container: c.ID, Query: spec.Query, Params: params,
		PartitionKey: pk, HasPartitionKey: hasPK, SinglePartitionKeyRange: oneRange,
		MaxItems: n, Continuation: r.Header.Get("x-ms-continuation"),
	})
	if e, ok := engine.AsError(err); ok && e.SubStatus == engine.SubStatusCrossPartitionQuery {
		// Like the service's gateway, hand the refused client the query plan:
		// the JavaScript SDK switches to its query pipeline only when the 400
		// carries one, and then re-sends the query to partition key range 0,
		// which the engine serves.
		withPlan := *e
		withPlan.AdditionalErrorInfo = passThroughPlan
		return &withPlan
	}
	if err != nil {
		return err
	}
	s.setSession(r)
	r.writeFeed(c.RID, "Documents", rawItems(res.Items), res.Continuation, res.Charge)
	return nil
}

// queryResources answers a query over a feed of resources (databases,
// containers, offers).
func (s *Server) queryResources(r *request, rid, key string, list []*engine.Resource) error {
	spec, params, err := r.querySpec()
	if err != nil {
		return err
	}
	n, err := r.maxItemCount()
	if err != nil {
		return err
	}
	res, err := engine.QueryResources(list, spec.Query, params, n, r.Header.Get("x-ms-continuation"))
	if err != nil {
		return err
	}
	r.writeFeed(rid, key, rawItems(res.Items), res.Continuation, res.Charge)
	return nil
}

func rawItems(items []json.RawMessage) [][]byte {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}
