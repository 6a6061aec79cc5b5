package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// querySpec is the body of a query request.
type querySpec struct {
	Query      string           `json:"query"`
	Parameters []queryParameter `json:"parameters"`
	// own holds the first parameters scanQuerySpec reads, in the spec's
	// allocation (json.Unmarshal leaves it unused).
	own [2]queryParameter
}

type queryParameter struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

func (r *request) querySpec() (*querySpec, map[string]json.RawMessage, error) {
	// One scan checks that the body is JSON and that a parameter's value
	// is read as an item's would be: a number beyond a double or a
	// property named twice is refused (perr), not read one way here and
	// another by the client that sent it.
	valid, perr := engine.ValidPayload(r.body)
	q, err := decodeQuerySpec(r.body, valid)
	if err != nil {
		return nil, nil, badRequest("The query body is not valid JSON: %v", err)
	}
	if q.Query == "" {
		return nil, nil, badRequest("The query body has no query text.")
	}
	if perr != nil {
		return nil, nil, perr
	}
	params := make(map[string]json.RawMessage, len(q.Parameters))
	for _, p := range q.Parameters {
		v := p.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		params[p.Name] = v
	}
	return q, params, nil
}

// passThroughPlan is the query plan Orrery answers plan requests with: the
// server executes every query completely, so the client pipeline has nothing
// to rewrite, order or aggregate.
const passThroughPlan = `{"partitionedQueryExecutionInfoVersion":2,"queryInfo":{"distinctType":"None","top":null,"offset":null,"limit":null,"orderBy":[],"orderByExpressions":[],"groupByExpressions":[],"groupByAliases":[],"aggregates":[],"groupByAliasToAggregateType":{},"rewrittenQuery":"","hasSelectValue":false,"dCountInfo":null,"hasNonStreamingOrderBy":false},"queryRanges":[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]}`

// wholeContainerMarker starts the query text of the plans Orrery gives for
// containers with several partition key ranges (see planFor).
const wholeContainerMarker = "-- orrery: whole container\n"

// planFor is the query plan for q in c. With one partition key range it is
// passThroughPlan. With several, a client pipeline would send the query to
// every range and concatenate the answers, which is wrong for ORDER BY,
// aggregates, DISTINCT, TOP and OFFSET, since the plan asks it to merge
// nothing: so the plan targets only the range holding the start of the key
// space and rewrites the query with wholeContainerMarker, for which that
// range answers for the whole container, complete and ordered.
//
// A vector or hybrid search query gets the gateway's plan instead
// (searchPlan), which the SDKs' pipelines for them need.
func planFor(c *engine.Container, q string, params map[string]json.RawMessage, features string) string {
	if plan, ok := searchPlan(c, q, params, features); ok {
		return plan
	}
	if plan, ok := groupByPlan(c, q, params, features); ok {
		return plan
	}
	if ranges, _ := c.PartitionKeyRanges(); len(ranges) == 1 {
		return passThroughPlan
	}
	rewritten, _ := json.Marshal(wholeContainerMarker + q)
	plan := strings.Replace(passThroughPlan, `"rewrittenQuery":""`, `"rewrittenQuery":`+string(rewritten), 1)
	return strings.Replace(plan, `"queryRanges":[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]`,
		`"queryRanges":[{"min":"","max":"","isMinInclusive":true,"isMaxInclusive":true}]`, 1)
}

// groupByPlan returns the gateway's plan for a GROUP BY query, for an SDK
// whose pipeline lists the GroupBy feature: it sends the rewritten query to
// every partition key range and merges the groups, so that groups whose
// aggregates saw no value have the service's shape (the alias present,
// without a value). Other clients, and GROUP BY shapes the plan does not
// cover (engine.Container.GroupByPlan), get the plan of planFor, for which
// the server answers the query whole.
func groupByPlan(c *engine.Container, q string, params map[string]json.RawMessage, features string) (string, bool) {
	if !hasQueryFeature(features, "GroupBy") {
		return "", false
	}
	gp := c.GroupByPlan(q, params)
	if gp == nil || !hasQueryFeature(features, "ListAndSetAggregate") && mergesListsOrSets(gp.QueryInfo) {
		return "", false
	}
	plan := struct {
		Version     int             `json:"partitionedQueryExecutionInfoVersion"`
		QueryInfo   json.RawMessage `json:"queryInfo"`
		QueryRanges json.RawMessage `json:"queryRanges"`
	}{Version: 2, QueryInfo: gp.QueryInfo,
		QueryRanges: json.RawMessage(`[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]`)}
	out, err := json.Marshal(plan)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// mergesListsOrSets reports whether a GROUP BY plan has the SDK merge
// MAKELIST or MAKESET results.
func mergesListsOrSets(queryInfo json.RawMessage) bool {
	var info struct {
		Types map[string]*string `json:"groupByAliasToAggregateType"`
	}
	_ = json.Unmarshal(queryInfo, &info)
	for _, t := range info.Types {
		if t != nil && (*t == "MakeList" || *t == "MakeSet") {
			return true
		}
	}
	return false
}

// hasQueryFeature reports whether the supported query features header
// value lists name.
func hasQueryFeature(features, name string) bool {
	for _, f := range strings.Split(features, ",") {
		if strings.EqualFold(strings.TrimSpace(f), name) {
			return true
		}
	}
	return false
}

// supportedQueryFeatures is the header in which an SDK lists the query
// plan features its pipeline handles.
const supportedQueryFeatures = "X-Ms-Cosmos-Supported-Query-Features"

// searchPlan returns the gateway's plan for a vector or hybrid search query
// (the non-streaming ORDER BY of VectorDistance, or ORDER BY RANK), for an
// SDK whose pipeline runs it: it sends the rewritten queries to every
// partition key range and merges their answers, as it does with the
// service. A client that does not list the NonStreamingOrderBy (or
// HybridSearch) feature gets no such plan: the server then answers the
// query whole, as it does any other.
func searchPlan(c *engine.Container, q string, params map[string]json.RawMessage, features string) (string, bool) {
	has := func(name string) bool { return hasQueryFeature(features, name) }
	gp := c.GatewayPlan(q, params, has("HybridSearchSkipOrderByRewrite"))
	if gp == nil {
		return "", false
	}
	plan := struct {
		Version               int             `json:"partitionedQueryExecutionInfoVersion"`
		QueryInfo             json.RawMessage `json:"queryInfo,omitempty"`
		HybridSearchQueryInfo json.RawMessage `json:"hybridSearchQueryInfo,omitempty"`
		QueryRanges           json.RawMessage `json:"queryRanges"`
	}{Version: 2, QueryInfo: gp.QueryInfo, HybridSearchQueryInfo: gp.HybridSearchQueryInfo,
		QueryRanges: json.RawMessage(`[{"min":"","max":"FF","isMinInclusive":true,"isMaxInclusive":false}]`)}
	switch {
	case plan.QueryInfo != nil && !has("NonStreamingOrderBy"):
		return "", false
	case plan.HybridSearchQueryInfo != nil && !has("HybridSearch"):
		return "", false
	}
	out, err := json.Marshal(plan)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// queryPlan answers a query plan request on a container's items.
func (s *Server) queryPlan(r *request) error {
	c, err := s.containerOf(r)
	if err != nil {
		return err
	}
	spec, params, err := r.querySpec()
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, []byte(planFor(c, spec.Query, params, r.Header.Get(supportedQueryFeatures))), "", 1)
	return nil
}

// queryItems answers a query over a container's items. The container
// comes from the engine's cache: on a shared store the page's own first
// round trip checks the catalog (and brings the cache up to date), and
// reads the session token.
func (s *Server) queryItems(r *request) error {
	ctx := r.Context()
	ref, err := s.itemContainerRef(r)
	if err != nil {
		return err
	}
	c := ref.Container()
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
	rangeID := r.partitionKeyRangeID()
	scopedRange, minEPK, maxEPK := rangeID, header(r.Header, "X-Ms-Start-Epk"), header(r.Header, "X-Ms-End-Epk")
	if rangeID != "" && !hasPK && strings.HasPrefix(spec.Query, wholeContainerMarker) {
		// A pipeline following planFor: the range answers for the container.
		if !c.HasPartitionKeyRange(rangeID) {
			// Gone by the cache: only if the cache is current.
			if c, err = s.containerOf(r); err != nil {
				return err
			}
			ref = engine.ContainerRef{} // looked up again
			if !c.HasPartitionKeyRange(rangeID) {
				return engine.PartitionKeyRangeGone(rangeID)
			}
		}
		scopedRange, minEPK, maxEPK = "", "", ""
	}
	res, err := s.eng.QueryItems(r.Context(), &engine.QueryRequest{
		Database: c.Database().ID, Container: c.ID, Query: spec.Query, Params: params,
		PartitionKey: pk, HasPartitionKey: hasPK, SinglePartitionKeyRange: rangeID != "",
		PartitionKeyRangeID: scopedRange, MinEPK: minEPK, MaxEPK: maxEPK,
		MaxItems: n, Continuation: header(r.Header, "X-Ms-Continuation"),
		IndexMetrics: wantsIndexMetrics(r),
		// The Go SDK leaves the header out when cross-partition queries
		// are disabled; the service then refuses a query that spans them.
		CrossPartitionDisabled: !headerBool(r.Header, "X-Ms-Documentdb-Query-Enablecrosspartition"),
		Resolved:               ref,
	})
	cur := c
	if err == nil && res.Container != nil {
		cur = res.Container
	} else if cc, cerr := s.eng.CachedContainer(ctx, c.Database().ID, c.ID); cerr == nil {
		cur = cc
	}
	if cur != c {
		// The page found the cache stale and reloaded it.
		c = cur
		r.setContentPath(c)
	}
	if e, ok := engine.AsError(err); ok && e.SubStatus == engine.SubStatusCrossPartitionQuery {
		// Like the service's gateway, hand the refused client the query plan:
		// the JavaScript SDK switches to its query pipeline only when the 400
		// carries one, and then re-sends the query to partition key range 0,
		// which the engine serves.
		withPlan := *e
		withPlan.AdditionalErrorInfo = planFor(c, spec.Query, params, r.Header.Get(supportedQueryFeatures))
		return &withPlan
	}
	if err != nil {
		return err
	}
	if err := s.setSessionLSN(r, res.SessionLSN); err != nil {
		return err
	}
	r.setQueryMetricsHeaders(res)
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
	res, err := engine.QueryResources(list, spec.Query, params, n, header(r.Header, "X-Ms-Continuation"))
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
