package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// TestAStreamedPageIsThePageItsFormerLoopGave: stream keeps its state in
// one streamPage and reads creation-ordered candidates from a slice (no
// iterator, closures or captured variables on the heap); every page of
// random streaming queries (index-served and scans, in a partition, a
// prefix of a hierarchical key and across partitions, with JOINs that give
// several rows per item, TOP, OFFSET and LIMIT, random page sizes and
// continuations) has the same items, continuation token, charge and
// counts as the loop over iterators it replaced (streamBefore, kept here
// verbatim, with scan's former body, scanBefore), and an invalid
// continuation the same error.
func TestAStreamedPageIsThePageItsFormerLoopGave(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	createContainer(t, e, `{"id":"h","partitionKey":{"paths":["/a","/b"],"kind":"MultiHash","version":2}}`)
	rng := rand.New(rand.NewPCG(42, 25))
	for i := range 120 {
		arr := make([]int, rng.IntN(4))
		for j := range arr {
			arr[j] = rng.IntN(5)
		}
		a, _ := json.Marshal(arr)
		id := fmt.Sprintf("%d", (i*37)%120)
		upsert(t, e, "c", fmt.Sprintf(`{"id":%q,"pk":"p%d","n":%d,"arr":%s}`, id, rng.IntN(3), rng.IntN(10), a))
		upsert(t, e, "h", fmt.Sprintf(`{"id":%q,"a":"a%d","b":"b%d","n":%d,"arr":%s}`, id, rng.IntN(2), rng.IntN(3), rng.IntN(10), a))
	}
	queries := []string{
		"SELECT * FROM c WHERE c.n = @n",
		"SELECT * FROM c",
		"SELECT c.id, t FROM c JOIN t IN c.arr WHERE c.n >= @n",
		"SELECT VALUE t FROM c JOIN t IN c.arr",
		"SELECT TOP 5 c.id FROM c WHERE c.n > @n",
		"SELECT c.id FROM c WHERE c.n < @n OFFSET 2 LIMIT 7",
		"SELECT c.id, t FROM c JOIN t IN c.arr WHERE c.n = @n OFFSET 1 LIMIT 3",
		"SELECT * FROM c WHERE c.id = '7' OR c.n = @n",
	}
	page := func(req QueryRequest, before bool) (*QueryResult, error) {
		e.queries.streamWith = nil
		if before {
			e.queries.streamWith = streamBefore
		}
		defer func() { e.queries.streamWith = nil }()
		return e.QueryItems(ctx, &req)
	}
	same := func(t *testing.T, what string, got, want *QueryResult, gerr, werr error) {
		t.Helper()
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%s: error %v, before %v", what, gerr, werr)
		}
		if gerr != nil {
			return
		}
		if g, w := fmt.Sprintf("%s", got.Items), fmt.Sprintf("%s", want.Items); g != w {
			t.Fatalf("%s: items %s, before %s", what, g, w)
		}
		if got.Continuation != want.Continuation || got.Charge != want.Charge {
			t.Fatalf("%s: continuation %q charge %v, before %q %v", what, got.Continuation, got.Charge, want.Continuation, want.Charge)
		}
		gm, wm := *got.Metrics, *want.Metrics
		if gm.RetrievedDocumentCount != wm.RetrievedDocumentCount || gm.RetrievedDocumentSize != wm.RetrievedDocumentSize ||
			gm.OutputDocumentCount != wm.OutputDocumentCount || gm.OutputDocumentSize != wm.OutputDocumentSize ||
			gm.IndexHitDocumentCount != wm.IndexHitDocumentCount || gm.IndexLookups != wm.IndexLookups {
			t.Fatalf("%s: metrics %+v, before %+v", what, gm, wm)
		}
	}
	pages := 0
	for round := range 300 {
		q := queries[rng.IntN(len(queries))]
		req := QueryRequest{Database: "db", Container: "c", Query: q, MaxItems: 1 + rng.IntN(12),
			Params: map[string]json.RawMessage{"@n": json.RawMessage(fmt.Sprint(rng.IntN(10)))}}
		switch rng.IntN(4) {
		case 0:
			req.PartitionKey, req.HasPartitionKey = StringKey(fmt.Sprintf("p%d", rng.IntN(3))), true
		case 1:
			req.Container = "h"
			req.PartitionKey, req.HasPartitionKey = StringKey(fmt.Sprintf("a%d", rng.IntN(2))), true
		case 2:
			req.Container = "h"
		default:
			req.SinglePartitionKeyRange = rng.IntN(2) == 0
		}
		what := fmt.Sprintf("round %d: %s in %s (%v), pages of %d", round, q, req.Container, req.PartitionKey, req.MaxItems)
		for n := 0; ; n++ {
			got, gerr := page(req, false)
			want, werr := page(req, true)
			same(t, fmt.Sprintf("%s, page %d", what, n), got, want, gerr, werr)
			pages++
			if gerr != nil || got.Continuation == "" {
				break
			}
			if rng.IntN(8) == 0 {
				// A token of another query, or none at all.
				bad := req
				bad.Continuation = []string{"e30", "x", base64.RawURLEncoding.EncodeToString([]byte(`{"k":"AAA"}`))}[rng.IntN(3)]
				got, gerr := page(bad, false)
				want, werr := page(bad, true)
				same(t, what+", a bad continuation", got, want, gerr, werr)
			}
			req.Continuation = got.Continuation
		}
	}
	t.Logf("%d pages compared", pages)
}

// streamBefore is stream as it was before streamPage: a loop over an
// iterator of candidates, creationOrderedBefore's when sorted by RID.
func streamBefore(qr *queryRunner, ctx context.Context, c *Container, snap storage.Reader, src source, x *query.Execution, plan *query.Plan, req *QueryRequest, deadline time.Time, _ *streamPage) (*QueryResult, error) {
	// Index candidates, and the items under a prefix of a hierarchical
	// key, have no stored creation order: they are sorted (creationOrdered).
	sortsByRID := (src.index != nil || c.partialScope(src.scope)) && !qr.noCreationOrder
	var tok streamToken
	var start []byte
	if req.Continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(req.Continuation)
		if err == nil && json.Unmarshal(raw, &tok) == nil && tok.End && req.fanOut {
			return finishPage(&QueryResult{Items: []json.RawMessage{}}, 0), nil
		}
		if err != nil || json.Unmarshal(raw, &tok) != nil ||
			!(src.contains(tok.Key) || sortsByRID && bytes.HasPrefix(tok.Key, keys.RIDPrefix(c.rid))) {
			return nil, BadRequest("Invalid Continuation Token: %q is not a continuation of this query. Re-run the query without it and iterate.", req.Continuation)
		}
		start = tok.Key
	}
	candidates := scanBefore(c, ctx, snap, src, start, qr.now().Unix())
	if sortsByRID {
		ordered, ok, err := creationOrderedBefore(c, ctx, snap, src, start, qr.now().Unix())
		if err != nil {
			return nil, err
		}
		if ok {
			candidates = ordered
		}
	}
	size := req.MaxItems
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	limit := -1 // rows the query may still return in total
	if plan.Top >= 0 {
		limit = plan.Top
	}
	if plan.Limit >= 0 && (limit < 0 || plan.Limit < limit) {
		limit = plan.Limit
	}
	offset := max(plan.Offset, 0)
	res := &QueryResult{Items: []json.RawMessage{}}
	total := 0
	progressed := false // past a row since the page started
	resumeAt := func(key []byte, pos []int) *QueryResult {
		tok.Key, tok.Pos = append([]byte(nil), key...), pos
		res.Continuation = encodeToken(tok)
		return finishPage(res, total)
	}
	for cand, err := range candidates {
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, queryError(err)
		}
		if limit >= 0 && tok.Produced >= limit {
			break
		}
		if progressed && !deadline.IsZero() && time.Now().After(deadline) {
			return resumeAt(cand.pos, nil), nil
		}
		var from []int
		if bytes.Equal(cand.pos, tok.Key) {
			from = tok.Pos
		}
		next, err := x.RowsFrom(cand.item.doc, from, func(row json.RawMessage) bool {
			if len(res.Items) == size || (limit >= 0 && tok.Produced >= limit) {
				return false
			}
			if tok.Skipped < offset {
				tok.Skipped++
				return true
			}
			res.Items = append(res.Items, row)
			total += len(row)
			tok.Produced++
			return true
		})
		if (errors.Is(err, query.ErrTimeBudget) || errors.Is(err, errNoCostlySlot)) &&
			(progressed || len(res.Items) > 0 || !samePosition(next, from)) {
			// A row's own evaluation ran out of time, or waited for a
			// costly query's slot past it: the page ends before that row.
			return resumeAt(cand.pos, next), nil
		}
		if err != nil {
			return nil, queryError(err)
		}
		if next != nil {
			if limit >= 0 && tok.Produced >= limit {
				return finishPage(res, total), nil
			}
			return resumeAt(cand.pos, next), nil
		}
		progressed = true
		tok.Key, tok.Pos = nil, nil
	}
	if req.fanOut && len(res.Items) == size && (limit < 0 || tok.Produced < limit) && len(c.ranges().Ranges) == 1 {
		// The service's gateway ends a full page of a query that spans
		// partitions with a continuation, without looking for a next row:
		// the page after it is empty and has none. It serves such a query
		// itself only for a container of one physical partition; with more
		// it gives the SDKs the plan, and they page each range, never
		// showing an empty last page: so a container of several ranges,
		// whose spanning queries Orrery answers whole, ends its last page
		// without a continuation.
		tok.End = true
		res.Continuation = encodeToken(tok)
	}
	return finishPage(res, total), nil
}

// creationOrderedBefore is creationOrdered as it was: an iterator over the sorted candidates.
func creationOrderedBefore(c *Container, ctx context.Context, r storage.Reader, src source, start []byte, now int64) (iter.Seq2[candidate, error], bool, error) {
	resuming := start != nil
	if resuming && !bytes.HasPrefix(start, keys.RIDPrefix(c.rid)) {
		return nil, false, nil
	}
	var cands []candidate
	held := 0
	// The source read in its own key order (order keys would list a
	// prefix's partitions one after another).
	for cand, err := range scanBefore(c, ctx, r, source{scope: src.scope, bounds: src.bounds, index: src.index, narrowed: src.narrowed, stats: src.stats}, nil, now) {
		if err != nil {
			return nil, false, err
		}
		if !resuming && (len(cands) == maxOrderedCandidates || held > maxOrderedBytes) {
			return nil, false, nil
		}
		held += len(cand.item.doc)
		if src.index == nil {
			// Read straight from the iterator, which reuses its buffers.
			item := *cand.item
			item.key, item.doc = bytes.Clone(item.key), bytes.Clone(item.doc)
			cand.item = &item
		}
		cand.pos = keys.RIDKey(c.rid, binary.BigEndian.AppendUint64(nil, cand.item.rid))
		cands = append(cands, cand)
	}
	slices.SortFunc(cands, func(a, b candidate) int { return bytes.Compare(a.pos, b.pos) })
	return func(yield func(candidate, error) bool) {
		for _, cand := range cands {
			if start != nil && bytes.Compare(cand.pos, start) < 0 {
				continue
			}
			if !yield(cand, nil) {
				return
			}
		}
	}, true, nil
}

// scanBefore is scan as it was before scanEach: an iterator that read the
// scope's key range whatever the source.
func scanBefore(c *Container, ctx context.Context, r storage.Reader, src source, start []byte, now int64) iter.Seq2[candidate, error] {
	return func(yield func(candidate, error) bool) {
		if src.narrowed != nil && src.index == nil {
			src.narrowed(ctx, r, src, start, now, yield)
			return
		}
		lower, upper := c.keyRange(src.scope, src.bounds)
		if src.order != nil {
			lower, upper = src.order, storage.PrefixEnd(src.order)
		}
		ranges := []keyRange{{lower, upper}}
		reverse := false
		if src.index != nil {
			ranges, reverse = src.index.ranges, src.index.reverse
		}
		if reverse {
			for i := len(ranges) - 1; i >= 0; i-- {
				if !c.scanRange(ctx, r, src, ranges[i].lower, ranges[i].upper, true, now, yield) {
					return
				}
			}
			return
		}
		for _, rg := range ranges {
			lower := rg.lower
			if start != nil {
				if bytes.Compare(start, rg.upper) >= 0 {
					continue
				}
				if bytes.Compare(start, lower) > 0 {
					lower = start
				}
			}
			if !c.scanRange(ctx, r, src, lower, rg.upper, false, now, yield) {
				return
			}
		}
	}
}
