package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// The query runner: a page of a query over a container's items, read from
// a snapshot (a client's query) or a partition transaction's batch (a
// stored procedure's), through the indexes, the search indexes and the
// cursors of whole evaluations. It holds what a query needs, not the
// engine; Open builds it.

// queryRunner runs the engine's queries (Engine.QueryItems, and the
// queries of stored procedures).
type queryRunner struct {
	store storage.Store
	seam  querySeam
	// search is the containers' search indexes, durable the barrier a
	// page's answer waits at (the writes it read are durable).
	search  *searchIndexes
	durable *durability
	now     func() time.Time
	// udfs runs the user-defined functions a query calls (udf.go).
	udfs udfRuntime
	// cursors keep the results of whole evaluations between pages.
	cursors *cursorCache
	// budget is the time budget of one page, maxMemory what one query may
	// hold: unbounded when 0 or less (Options.QueryTimeBudget and
	// QueryMemoryLimit, their defaults given).
	budget    time.Duration
	maxMemory int64
	// pool is the memory all queries share; nil: unbounded.
	pool *query.MemoryPool
	// costlySlots admits costly queries; nil: no bound.
	costlySlots chan struct{}
	// serveCrossPartition is Options.ServeCrossPartitionQueries.
	serveCrossPartition bool
	// noCreationOrder reads scans in key order, as before creation order
	// (only the benchmark of creation order sets it: withoutCreationOrder).
	noCreationOrder bool
	// streamWith, when set, evaluates streaming pages in place of stream:
	// only the test holding stream to its former body sets it.
	streamWith func(qr *queryRunner, ctx context.Context, c *Container, snap storage.Reader, src source, x *query.Execution, plan *query.Plan, req *QueryRequest, deadline time.Time, p *streamPage) (*QueryResult, error)
}

// querySeam is what a query needs of the seam: whether a container a
// request resolved is still current, and the snapshot a page reads.
type querySeam interface {
	current(c *Container) bool
	itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (*Container, storage.Snapshot, [][]byte, uint64, error)
}

// costlySlot is a page's claim on one of the slots that bound how many
// costly queries run at once (Options.MaxCostlyQueries).
type costlySlot struct {
	slots    chan struct{}
	ctx      context.Context
	deadline time.Time
	held     bool
}

// errNoCostlySlot answers a costly query that found no free slot within
// its page's time budget.
var errNoCostlySlot = &Error{Status: 429, Code: "TooManyRequests",
	Message: "Request rate is large: too many costly queries are running, and none finished within this page's time budget. Retry the query later."}

// Enter waits for a slot, until ctx ends or the page's budget is spent: a
// costlySlot is the query.Gate of a page's execution.
func (s *costlySlot) Enter() error {
	var expired <-chan time.Time
	if !s.deadline.IsZero() {
		t := time.NewTimer(time.Until(s.deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case s.slots <- struct{}{}:
		s.held = true
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	case <-expired:
		return errNoCostlySlot
	}
}

// release frees the slot if the page took one.
func (s *costlySlot) release() {
	if s.held {
		<-s.slots
		s.held = false
	}
}

// deadline is the end of the time budget of a page that starts now;
// zero when pages are unbounded.
func (qr *queryRunner) deadline() time.Time {
	if qr.budget <= 0 {
		return time.Time{}
	}
	return time.Now().Add(qr.budget)
}

// memoryLimit is what one query may hold; 0 means unbounded.
func (qr *queryRunner) memoryLimit() int64 { return max(qr.maxMemory, 0) }

// msgCrossPartitionDisabled is the service's answer to a query that spans
// partitions from a client that did not enable cross-partition queries.
const msgCrossPartitionDisabled = "Cross partition query is required but disabled. Please set x-ms-documentdb-query-enablecrosspartition to true, " +
	"specify x-ms-documentdb-partitionkey, or revise your query to avoid this exception."

// msgCrossPartition is the service's answer to a cross-partition query that
// its gateway cannot serve without a client-side query plan.
const msgCrossPartition = "The provided cross partition query can not be directly served by the gateway. " +
	"This is a first chance (internal) exception that all newer clients will know how to handle gracefully. " +
	"This exception is traced, but unless you see it bubble up as an exception (which only happens on older SDK clients), then you can safely ignore this message."

// page runs a query page: Engine.QueryItems.
func (qr *queryRunner) page(ctx context.Context, req *QueryRequest) (*QueryResult, error) {
	bounds := pageBounds{deadline: qr.deadline()}
	ps := &pageState{slot: costlySlot{slots: qr.costlySlots, ctx: ctx, deadline: bounds.deadline}}
	defer ps.slot.release()
	if qr.costlySlots != nil {
		bounds.heavy = &ps.slot
	}
	bounds.run = &ps.run
	// On a shared store the snapshot's first round trip checks the
	// catalog version and reads the session token (itemsSnapshot).
	c, snap, watermark, err := qr.snapshot(ctx, req)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	// The search indexes of a shared store catch up with the snapshot.
	ctx = qr.search.withQuerySnapshot(ctx, watermark)
	if !req.HasPartitionKey {
		q, err := c.cachedQuery(req.Query)
		if err != nil {
			return nil, err
		}
		pv, err := query.DecodeParams(req.Params)
		if err != nil {
			return nil, queryError(err)
		}
		plan, err := q.PlanParams(pv)
		if err != nil {
			return nil, queryError(err)
		}
		own := *req
		own.params, own.paramsDecoded = pv, true
		req = &own
		if pk, ok := c.pinnedPartitionKey(plan); ok {
			// The filter names one logical partition (or, on a hierarchical
			// key, a prefix of them): the query is single-partition, as the
			// service's gateway treats it.
			pinned := *req
			pinned.PartitionKey, pinned.HasPartitionKey = pk, true
			req = &pinned
		} else if req.CrossPartitionDisabled && !req.SinglePartitionKeyRange {
			return nil, &Error{Status: 400, Code: "BadRequest", Message: msgCrossPartitionDisabled}
		} else if plan.NeedsQueryPlan && !req.SinglePartitionKeyRange && !qr.serveCrossPartition {
			return nil, &Error{Status: 400, SubStatus: SubStatusCrossPartitionQuery, Code: "BadRequest", Message: msgCrossPartition}
		}
	}
	if !req.HasPartitionKey && !req.SinglePartitionKeyRange && req.PartitionKeyRangeID == "" {
		spanning := *req
		spanning.fanOut = true
		req = &spanning
	}
	lower, perr := c.scope(req.PartitionKey, req.HasPartitionKey)
	if perr != nil {
		return nil, perr
	}
	if req.UDF == nil && containsUDFCall(req.Query) {
		udfs := qr.udfs.resolver(ctx, c)
		defer udfs.close()
		req.UDF = udfs
	}
	res, err := qr.queryIn(ctx, c, snap, lower, req, qr.cursors, bounds)
	if err != nil {
		return nil, err
	}
	qr.durable.barrier()
	res.SessionLSN = sessionLSN(watermark)
	res.Container = c
	return res, nil
}

// pageBounds are what one page of a query keeps to: the end of its time
// budget (zero: none), and the wait for a costly query's slot (nil: none);
// run, when set, is where the page's evaluation keeps its metrics and
// search context and streaming state (nil: queryIn allocates them).
type pageBounds struct {
	deadline time.Time
	heavy    query.Gate
	run      *queryRun
}

// pageState is what a page holds for its length, in one allocation: its
// claim on a costly query's slot, its metrics and its search context.
// Nothing reuses it: the metrics go out with the page's result.
type pageState struct {
	slot costlySlot
	run  queryRun
}

// queryRun is what one evaluation of a query holds: the metrics it
// records, the search context its execution reads and, for a streaming
// query, its page's state (whose result is the page's).
type queryRun struct {
	m      QueryMetrics
	search searchContext
	stream streamPage
}

// snapshot is the seam's itemsSnapshot for a query page: on an engine alone on
// its store it starts from the container the request resolved
// (QueryRequest.Resolved) unless it was replaced or deleted since; on a
// shared store the snapshot's round trip checks the catalog as ever.
func (qr *queryRunner) snapshot(ctx context.Context, req *QueryRequest) (*Container, storage.Snapshot, uint64, error) {
	if c := req.resolved(); c != nil && qr.seam.current(c) {
		snap, err := qr.store.NewSnapshot(ctx)
		if err != nil {
			return nil, nil, 0, err
		}
		return c, snap, 0, nil
	}
	c, snap, _, watermark, err := qr.seam.itemsSnapshot(ctx, req.Database, req.Container, nil, 0)
	return c, snap, watermark, err
}

// queryIn runs a query over the items under scope as r sees them: a snapshot
// for client queries, a transaction's batch for stored procedures. Queries
// evaluated whole keep their results in cursors for the next pages; nil
// evaluates every page anew. The query stops when ctx ends, and keeps to the
// page's bounds.
func (qr *queryRunner) queryIn(ctx context.Context, c *Container, r storage.Reader, scope []byte, req *QueryRequest, cursors *cursorCache, bounds pageBounds) (*QueryResult, error) {
	start := time.Now()
	run := bounds.run
	if run == nil {
		run = new(queryRun)
	}
	m := &run.m
	res, x, err := qr.run(ctx, c, r, scope, req, cursors, bounds, run)
	if err != nil {
		return nil, err
	}
	m.finish(start, res.Items, x)
	res.Metrics = m
	res.Charge = m.charge()
	return res, nil
}

// run is queryIn, recording what it measures in m; it returns the
// execution that evaluated the page, nil when a cursor served it.
func (qr *queryRunner) run(ctx context.Context, c *Container, r storage.Reader, scope []byte, req *QueryRequest, cursors *cursorCache, bounds pageBounds, run *queryRun) (*QueryResult, *query.Execution, error) {
	m := &run.m
	compile := time.Now()
	q, err := c.cachedQuery(req.Query)
	if err != nil {
		return nil, nil, err
	}
	pv, err := req.decodedParams()
	if err != nil {
		return nil, nil, queryError(err)
	}
	plan, err := q.PlanParams(pv)
	if err != nil {
		return nil, nil, queryError(err)
	}
	if err := c.checkCompositeOrder(plan); err != nil {
		return nil, nil, err
	}
	epks, berr := c.partitionBounds(!bytes.Equal(scope, keys.ItemContainerPrefix(c.rid)), req.PartitionKeyRangeID, req.MinEPK, req.MaxEPK)
	if berr != nil {
		return nil, nil, berr
	}
	// A filter on the partition key of a query already scoped to that
	// partition selects nothing the scope does not: leave it to the
	// evaluation, so the scope is read in creation order.
	filters := plan.Filters
	if !bytes.Equal(scope, keys.ItemContainerPrefix(c.rid)) {
		filters = c.withoutPartitionKeyFilters(filters)
	}
	ix, ixOK := c.chooseIndex(&query.Plan{Filters: filters})
	var spatialUse []IndexUse
	if !ixOK {
		ix, spatialUse, ixOK = c.chooseSpatialIndex(plan)
	}
	oix, complete, oixOK := c.orderIndex(plan)
	var util *IndexUtilization
	if req.IndexMetrics {
		switch {
		case !plan.Streaming && oixOK:
			util = c.indexUtilization(plan, oix.filters, true)
		case ixOK:
			util = c.indexUtilization(plan, ix.filters, false)
		default:
			util = c.indexUtilization(plan, nil, false)
		}
		if ixOK && !(!plan.Streaming && oixOK) {
			util.UtilizedSingle = append(util.UtilizedSingle, spatialUse...)
		}
	}
	c.searchUtilization(plan, util)
	var fingerprint string
	if !plan.Streaming && cursors != nil {
		fingerprint = queryFingerprint(c, scope, epks, req)
		if id := wholeTokenCursor(req.Continuation); id != "" {
			if results, ok := cursors.get(id, fingerprint); ok {
				m.CompileTime = time.Since(compile)
				res, err := pageWhole(results, req.MaxItems, req.Continuation, cursors, fingerprint, id)
				if res != nil {
					res.IndexUtilization = util
				}
				return res, nil, err
			}
		}
	}
	x, err := q.Prepare(query.Options{Decoded: pv, UDF: req.UDF, Now: qr.now(), PlanarSpatial: c.planarSpatial(),
		Context: ctx, Deadline: bounds.deadline, MaxMemory: qr.memoryLimit(), Pool: qr.pool, Heavy: bounds.heavy,
		Search: qr.search.searchContextIn(&run.search, ctx, c, r, m)})
	if err != nil {
		return nil, nil, queryError(err)
	}
	m.CompileTime = time.Since(compile)
	src := source{scope: scope, bounds: epks, stats: m}
	switch {
	case ixOK:
		src.index = ix
	case !plan.Aggregates && !plan.GroupBy && !qr.noCreationOrder:
		// Without ORDER BY the service returns documents in creation order,
		// and with it ties in that order.
		src.order = c.orderScope(scope)
	}
	var res *QueryResult
	if plan.Streaming {
		if _, err := qr.search.narrowByFullText(ctx, c, r, &src, plan, util); err != nil {
			return nil, nil, err
		}
		stream := (*queryRunner).stream
		if qr.streamWith != nil {
			stream = qr.streamWith
		}
		res, err = stream(qr, ctx, c, r, src, x, plan, req, bounds.deadline, &run.stream)
	} else {
		var results []json.RawMessage
		if vres, used, verr := qr.search.vectorQuery(ctx, c, r, src, plan, x, &util); used {
			results, err = vres, verr
		} else if oixOK {
			results, err = qr.top(ctx, c, r, source{scope: scope, bounds: epks, index: oix, stats: m}, complete, x, plan)
		} else if narrowed, nerr := qr.search.narrowByFullText(ctx, c, r, &src, plan, util); nerr != nil {
			err = nerr
		} else {
			var used bool
			whole := func(r storage.Reader, src source) ([]json.RawMessage, error) { return qr.whole(ctx, c, r, src, x) }
			if results, used, err = qr.search.rankQuery(ctx, c, r, src, narrowed, plan, x, whole, util, !qr.noCreationOrder); !used && err == nil {
				if results, used, err = qr.search.rrfQuery(ctx, c, r, src, narrowed, plan, x, util, !qr.noCreationOrder); !used && err == nil {
					results, err = qr.whole(ctx, c, r, src, x)
				}
			}
		}
		if err == nil {
			res, err = pageWhole(results, req.MaxItems, req.Continuation, cursors, fingerprint, "")
		}
	}
	if err != nil {
		return nil, nil, err
	}
	res.IndexUtilization = util
	return res, x, nil
}

// queryFingerprint identifies what a whole evaluation computed: the
// container, the scope, the query text and its parameters.
func queryFingerprint(c *Container, scope []byte, bounds epkBounds, req *QueryRequest) string {
	var b strings.Builder
	b.Write(c.rid)
	b.WriteByte(0)
	b.Write(scope)
	b.WriteByte(0)
	b.WriteString(EPKHex(bounds.min))
	b.WriteByte(0)
	b.WriteString(EPKHex(bounds.max))
	b.WriteByte(0)
	b.WriteString(req.Query)
	names := make([]string, 0, len(req.Params))
	for n := range req.Params {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b.WriteByte(0)
		b.WriteString(n)
		b.WriteByte(0)
		b.Write(req.Params[n])
	}
	return b.String()
}

// whole evaluates a query over its whole source, read in creation
// order (index candidates too, within creationOrdered's bound), so that
// ORDER BY ties and DISTINCT come in the service's order.
func (qr *queryRunner) whole(ctx context.Context, c *Container, snap storage.Reader, src source, x *query.Execution) ([]json.RawMessage, error) {
	results, err := x.Execute(sourceDocs(ctx, c, snap, src, qr.now().Unix(), !qr.noCreationOrder))
	if err != nil {
		return nil, queryError(err)
	}
	return results, nil
}

// top answers a top-N query ordered by one indexed path: it evaluates
// the query over growing prefixes of the index's order until the prefix
// yields every row the query returns. Rows past the prefix cannot sort
// before it, and the prefix never ends inside a run of equal values, so the
// answer is the one a full evaluation gives. When the index does not list
// every possible item (see orderIndex) and runs out first, it evaluates the
// whole source instead.
func (qr *queryRunner) top(ctx context.Context, c *Container, snap storage.Reader, src source, complete bool, x *query.Execution, plan *query.Plan) ([]json.RawMessage, error) {
	want := plan.Top
	if plan.Limit >= 0 && (want < 0 || plan.Limit < want) {
		want = plan.Limit
	}
	need := want + max(plan.Offset, 0)
	now := qr.now().Unix()
	type ranked struct {
		run int // the index of its run of equal values
		rid uint64
		doc []byte
	}
	for k := 2*need + 16; ; k *= 4 {
		var docs []ranked
		var lastValue []byte
		exhausted := true
		run := 0
		for cand, err := range c.scan(ctx, snap, src, nil, now) {
			if err != nil {
				return nil, err
			}
			rest := cand.pos[src.index.base:]
			value := rest[:indexValueLen(rest)]
			if !bytes.Equal(value, lastValue) {
				if len(docs) >= k {
					exhausted = false
					break
				}
				run++
			}
			lastValue = append(lastValue[:0], value...)
			docs = append(docs, ranked{run, cand.item.rid, cand.item.doc})
		}
		// Equal values in creation order, as the service breaks ties.
		slices.SortStableFunc(docs, func(a, b ranked) int {
			if a.run != b.run {
				return a.run - b.run
			}
			return cmp.Compare(a.rid, b.rid)
		})
		results, err := x.Execute(func(yield func([]byte, error) bool) {
			for _, d := range docs {
				if !yield(d.doc, nil) {
					return
				}
			}
		})
		if err != nil {
			return nil, queryError(err)
		}
		if len(results) >= want || (exhausted && complete) {
			return results, nil
		}
		if exhausted {
			whole := source{scope: src.scope, bounds: src.bounds, stats: src.stats}
			if !qr.noCreationOrder {
				whole.order = c.orderScope(src.scope)
			}
			return qr.whole(ctx, c, snap, whole, x)
		}
	}
}

// streamToken is the continuation of a streaming query: where to resume in
// the source and how far TOP, OFFSET and LIMIT have got.
type streamToken struct {
	// Key is the storage key of the next document to evaluate.
	Key []byte `json:"k"`
	// Pos is the row of that document to resume at (query.RowsFrom's
	// position); none: its first.
	Pos []int `json:"p,omitempty"`
	// Skipped counts rows skipped for OFFSET; Produced counts rows returned.
	Skipped  int `json:"o,omitempty"`
	Produced int `json:"n,omitempty"`
	// End marks the continuation of a full last page of a query that spans
	// partitions: the next page is empty and has none.
	End bool `json:"e,omitempty"`
}

// stream evaluates a streaming query row by row, only as far as one
// page needs or its time budget allows: once the deadline has passed it
// ends the page at the next row with a continuation, provided the page got
// past at least one row; a page that cannot is answered 408.
// The page's state is held in *p, made for this one page (nil: stream
// allocates it).
func (qr *queryRunner) stream(ctx context.Context, c *Container, snap storage.Reader, src source, x *query.Execution, plan *query.Plan, req *QueryRequest, deadline time.Time, p *streamPage) (*QueryResult, error) {
	// Index candidates, and the items under a prefix of a hierarchical
	// key, have no stored creation order: they are sorted (creationOrdered).
	sortsByRID := (src.index != nil || c.partialScope(src.scope)) && !qr.noCreationOrder
	if p == nil {
		p = new(streamPage)
	}
	*p = streamPage{ctx: ctx, x: x, deadline: deadline, res: QueryResult{Items: []json.RawMessage{}}}
	var start []byte
	if req.Continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(req.Continuation)
		if err == nil && json.Unmarshal(raw, &p.tok) == nil && p.tok.End && req.fanOut {
			return finishPage(&QueryResult{Items: []json.RawMessage{}}, 0), nil
		}
		if err != nil || json.Unmarshal(raw, &p.tok) != nil ||
			!(src.contains(p.tok.Key) || sortsByRID && bytes.HasPrefix(p.tok.Key, keys.RIDPrefix(c.rid))) {
			return nil, BadRequest("Invalid Continuation Token: %q is not a continuation of this query. Re-run the query without it and iterate.", req.Continuation)
		}
		start = p.tok.Key
	}
	p.size = req.MaxItems
	if p.size <= 0 {
		p.size = DefaultPageSize
	}
	p.size = min(p.size, MaxPageSize)
	p.limit = -1 // rows the query may still return in total
	if plan.Top >= 0 {
		p.limit = plan.Top
	}
	if plan.Limit >= 0 && (p.limit < 0 || plan.Limit < p.limit) {
		p.limit = plan.Limit
	}
	p.offset = max(plan.Offset, 0)
	p.emit = p.row
	ordered, ok := []candidate(nil), false
	if sortsByRID {
		var err error
		if ordered, ok, err = c.creationOrderedIn(&p.load, ctx, snap, src, start, qr.now().Unix()); err != nil {
			return nil, err
		}
	}
	if ok {
		for _, cand := range ordered {
			if !p.visit(cand, nil) {
				break
			}
		}
	} else {
		c.scanEach(ctx, snap, src, start, qr.now().Unix(), p.visit)
	}
	p.x, p.ctx, p.emit = nil, nil, nil
	p.load = orderedLoad{} // its candidates are read
	if p.err != nil {
		return nil, p.err
	}
	res := &p.res
	if p.ended {
		return finishPage(res, p.total), nil
	}
	if req.fanOut && len(res.Items) == p.size && (p.limit < 0 || p.tok.Produced < p.limit) && len(c.ranges().Ranges) == 1 {
		// The service's gateway ends a full page of a query that spans
		// partitions with a continuation, without looking for a next row:
		// the page after it is empty and has none. It serves such a query
		// itself only for a container of one physical partition; with more
		// it gives the SDKs the plan, and they page each range, never
		// showing an empty last page: so a container of several ranges,
		// whose spanning queries Orrery answers whole, ends its last page
		// without a continuation.
		p.tok.End = true
		res.Continuation = encodeToken(p.tok)
	}
	return finishPage(res, p.total), nil
}

// streamPage is one page of stream: its state in one place, which its
// candidates' visits and their rows' callback share (one allocation, where
// a loop over an iterator and its closures moved each variable to the
// heap).
type streamPage struct {
	ctx                 context.Context
	x                   *query.Execution
	tok                 streamToken
	res                 QueryResult
	total               int
	size, limit, offset int
	progressed          bool // past a row since the page started
	deadline            time.Time
	emit                func(json.RawMessage) bool // p.row, made once
	ended               bool                       // the page ends at the candidate visited last
	err                 error
	// load is creationOrdered's state, when the page sorts its candidates.
	load orderedLoad
}

// visit evaluates one candidate; false ends the candidates.
func (p *streamPage) visit(cand candidate, err error) bool {
	if err != nil {
		p.err = err
		return false
	}
	if err := p.ctx.Err(); err != nil {
		p.err = queryError(err)
		return false
	}
	if p.limit >= 0 && p.tok.Produced >= p.limit {
		return false
	}
	if p.progressed && !p.deadline.IsZero() && time.Now().After(p.deadline) {
		p.resumeAt(cand.pos, nil)
		return false
	}
	var from []int
	if bytes.Equal(cand.pos, p.tok.Key) {
		from = p.tok.Pos
	}
	next, err := p.x.RowsFrom(cand.item.doc, from, p.emit)
	if (errors.Is(err, query.ErrTimeBudget) || errors.Is(err, errNoCostlySlot)) &&
		(p.progressed || len(p.res.Items) > 0 || !samePosition(next, from)) {
		// A row's own evaluation ran out of time, or waited for a
		// costly query's slot past it: the page ends before that row.
		p.resumeAt(cand.pos, next)
		return false
	}
	if err != nil {
		p.err = queryError(err)
		return false
	}
	if next != nil {
		if p.limit >= 0 && p.tok.Produced >= p.limit {
			p.ended = true
			return false
		}
		p.resumeAt(cand.pos, next)
		return false
	}
	p.progressed = true
	p.tok.Key, p.tok.Pos = nil, nil
	return true
}

// row takes one row of the page, or refuses it (false) when the page is full.
func (p *streamPage) row(row json.RawMessage) bool {
	if len(p.res.Items) == p.size || (p.limit >= 0 && p.tok.Produced >= p.limit) {
		return false
	}
	if p.tok.Skipped < p.offset {
		p.tok.Skipped++
		return true
	}
	p.res.Items = append(p.res.Items, row)
	p.total += len(row)
	p.tok.Produced++
	return true
}

// resumeAt ends the page with a continuation at a candidate's row.
func (p *streamPage) resumeAt(key []byte, pos []int) {
	p.tok.Key, p.tok.Pos = append([]byte(nil), key...), pos
	p.res.Continuation = encodeToken(p.tok)
	p.ended = true
}

// samePosition reports whether two row positions name the same row; nil
// names the first.
func samePosition(a, b []int) bool {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return false
		}
	}
	return true
}

func encodeToken(tok streamToken) string {
	raw, _ := json.Marshal(tok)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func finishPage(res *QueryResult, total int) *QueryResult {
	res.Charge = 2.5 + float64(total)/1024*0.2
	return res
}

// wholeTokenCursor returns the cursor a continuation of a whole evaluation
// names, "" when none.
func wholeTokenCursor(continuation string) string {
	raw, err := base64.RawURLEncoding.DecodeString(continuation)
	if err != nil {
		return ""
	}
	_, id, _ := strings.Cut(string(raw), ".")
	return id
}

// pageWhole cuts a page out of complete results. The continuation is the
// offset of the next page and, when cursors keep the results, the cursor's
// id ("offset.id"); id is the cursor the results came from, "" when they
// were just evaluated. The cursor is dropped with the last page.
func pageWhole(results []json.RawMessage, maxItems int, continuation string, cursors *cursorCache, fingerprint, id string) (*QueryResult, error) {
	start := 0
	if continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(continuation)
		offset, _, _ := strings.Cut(string(raw), ".")
		n, cerr := strconv.Atoi(offset)
		if err != nil || cerr != nil || n < 0 || n > len(results) {
			return nil, BadRequest("Invalid Continuation Token: %q is not a continuation of this query. Re-run the query without it and iterate.", continuation)
		}
		start = n
	}
	size := maxItems
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	end := min(start+size, len(results))
	res := &QueryResult{Items: results[start:end]}
	total := 0
	for _, r := range res.Items {
		total += len(r)
	}
	res.Charge = 2.5 + float64(total)/1024*0.2
	switch {
	case end < len(results):
		token := strconv.Itoa(end)
		if id == "" && cursors != nil {
			id = cursors.put(fingerprint, results)
		}
		if id != "" {
			token += "." + id
		}
		res.Continuation = base64.RawURLEncoding.EncodeToString([]byte(token))
	case id != "":
		cursors.drop(id)
	}
	return res, nil
}

// cachedQuery is parseQuery on c, answered from c's cache of parsed queries
// when it has text.
func (c *Container) cachedQuery(text string) (*query.Query, error) {
	qc := &c.queries
	qc.mu.RLock()
	q := qc.m[text]
	qc.mu.RUnlock()
	if q != nil {
		return q, nil
	}
	q, err := c.parseQuery(text)
	if err != nil || len(text) > queryCacheMaxText {
		return q, err
	}
	qc.mu.Lock()
	if qc.m == nil || len(qc.m) >= queryCacheEntries {
		qc.m = make(map[string]*query.Query)
	}
	qc.m[text] = q
	qc.mu.Unlock()
	return q, nil
}

// containsUDFCall reports whether text may call a user-defined function:
// it has "udf." in any case (strings.ToLower would copy every query).
func containsUDFCall(text string) bool {
	for i := 0; i+4 <= len(text); i++ {
		if text[i+3] == '.' && strings.EqualFold(text[i:i+3], "udf") {
			return true
		}
	}
	return false
}
