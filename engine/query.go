package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"iter"
	"sort"
	"strings"

	"github.com/orrery-db/orrery/query"
)

// The public API of queries: a page of a container's items (QueryItems,
// which the engine's queryRunner answers: queryrunner.go), and a page of a
// feed of resources.

// QueryItems runs a query over the items of a container, of one logical
// partition, or of one partition key range, and returns a page of results.
//
// Streaming queries (no ORDER BY, aggregates, GROUP BY or DISTINCT) read the
// source only as far as the page needs and resume from the continuation;
// others are evaluated whole and paged by position. The results of a whole
// evaluation are kept in a cursor while the client pages through them, so
// every page of one continuation chain comes from the same evaluation (see
// cursorCache).
//
// The query stops when ctx ends, and each page has a time budget (see
// Options.QueryTimeBudget) and a memory bound (Options.QueryMemoryLimit).
func (e *Engine) QueryItems(ctx context.Context, req *QueryRequest) (*QueryResult, error) {
	return e.queries.page(ctx, req)
}

// PageResources returns a page of a read feed of resources sorted by id:
// up to maxItems (DefaultPageSize when 0) of those after the id the
// continuation names. Resuming after an id rather than at a position keeps
// a feed read page by page from listing one twice or skipping one when
// others are created or deleted between its pages.
func PageResources(list []*Resource, maxItems int, continuation string) (*QueryResult, error) {
	start := 0
	if continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(continuation)
		after, ok := strings.CutPrefix(string(raw), "after:")
		if err != nil || !ok {
			return nil, BadRequest("Invalid Continuation Token: %q is not a continuation of this feed. Re-run it without it and iterate.", continuation)
		}
		start = sort.Search(len(list), func(i int) bool { return list[i].ID > after })
	}
	size := maxItems
	if size <= 0 {
		size = DefaultPageSize
	}
	end := min(start+min(size, MaxPageSize), len(list))
	res := &QueryResult{Charge: 1}
	for _, r := range list[start:end] {
		res.Items = append(res.Items, r.Body)
		res.Charge += float64(len(r.Body)) / 1024 * 0.2
	}
	if end < len(list) {
		res.Continuation = base64.RawURLEncoding.EncodeToString([]byte("after:" + list[end-1].ID))
	}
	return res, nil
}

// QueryResources runs a query over a feed of resources (databases,
// containers, offers) and returns a page of its results.
func QueryResources(list []*Resource, text string, params map[string]json.RawMessage, maxItems int, continuation string) (*QueryResult, error) {
	q, err := parseQuery(text)
	if err != nil {
		return nil, err
	}
	var docs iter.Seq2[[]byte, error] = func(yield func([]byte, error) bool) {
		for _, r := range list {
			if !yield(r.Body, nil) {
				return
			}
		}
	}
	results, err := q.Execute(docs, query.Options{Params: params})
	if err != nil {
		return nil, queryError(err)
	}
	return pageWhole(results, maxItems, continuation, nil, "", "")
}
