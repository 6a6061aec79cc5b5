package engine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"iter"
	"strconv"

	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// QueryRequest is a SQL query over a container's items.
type QueryRequest struct {
	Database  string
	Container string
	Query     string
	// Params maps parameter names to their JSON values.
	Params map[string]json.RawMessage
	// PartitionKey scopes the query to one logical partition when HasPartitionKey.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	// MaxItems is the page size; zero or less means the default.
	MaxItems     int
	Continuation string
	// SinglePartitionKeyRange is true when the client scoped the query to one
	// partition key range (x-ms-documentdb-partitionkeyrangeid), as query
	// pipelines do after asking for a query plan.
	SinglePartitionKeyRange bool
	// UDF resolves udf.name calls; nil when the container has none.
	UDF query.UDFResolver
}

// QueryResult is one page of query results.
type QueryResult struct {
	Items        []json.RawMessage
	Continuation string
	Charge       float64
}

// parseQuery parses a query, mapping syntax errors to 400.
func parseQuery(text string) (*query.Query, error) {
	q, err := query.Parse(text)
	if err != nil {
		var qe *query.Error
		if errors.As(err, &qe) {
			return nil, BadRequest("%s", qe.Error())
		}
		return nil, BadRequest("%v", err)
	}
	return q, nil
}

// queryError maps an execution error to 400 unless it is a storage failure.
func queryError(err error) error {
	var qe *query.Error
	if errors.As(err, &qe) {
		return BadRequest("%s", qe.Error())
	}
	return err
}

// msgCrossPartition is the service's answer to a cross-partition query that
// its gateway cannot serve without a client-side query plan.
const msgCrossPartition = "The provided cross partition query can not be directly served by the gateway. " +
	"This is a first chance (internal) exception that all newer clients will know how to handle gracefully. " +
	"This exception is traced, but unless you see it bubble up as an exception (which only happens on older SDK clients), then you can safely ignore this message."

// QueryItems runs a query over the items of a container, of one logical
// partition, or of one partition key range, and returns a page of results.
//
// Streaming queries (no ORDER BY, aggregates, GROUP BY or DISTINCT) read the
// source only as far as the page needs and resume from the continuation;
// others are evaluated whole and paged by position.
func (e *Engine) QueryItems(req *QueryRequest) (*QueryResult, error) {
	c, err := e.Container(req.Database, req.Container)
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(req.Query)
	if err != nil {
		return nil, err
	}
	plan, err := q.Plan(req.Params)
	if err != nil {
		return nil, queryError(err)
	}
	if !req.HasPartitionKey && !req.SinglePartitionKeyRange && plan.NeedsQueryPlan && !e.opts.ServeCrossPartitionQueries {
		return nil, &Error{Status: 400, SubStatus: SubStatusCrossPartitionQuery, Code: "BadRequest", Message: msgCrossPartition}
	}
	lower, perr := c.scope(req.PartitionKey, req.HasPartitionKey)
	if perr != nil {
		return nil, perr
	}
	x, err := q.Prepare(query.Options{Params: req.Params, UDF: req.UDF, Now: e.now()})
	if err != nil {
		return nil, queryError(err)
	}
	snap := e.store.NewSnapshot()
	defer snap.Close()
	var res *QueryResult
	if plan.Streaming {
		res, err = e.streamQuery(c, snap, lower, x, plan, req)
	} else {
		res, err = e.wholeQuery(c, snap, lower, x, req)
	}
	if err != nil {
		return nil, err
	}
	e.durable.barrier()
	return res, nil
}

// items yields the live items under a key prefix from start on, with their keys.
func (c *Container) items(r storage.Reader, start, upper []byte, now int64) iter.Seq2[*storedItem, error] {
	return func(yield func(*storedItem, error) bool) {
		it, err := r.NewIterator(start, upper, false)
		if err != nil {
			yield(nil, err)
			return
		}
		defer it.Close()
		for it.Next() {
			s, err := decodeItem(it.Key(), it.Value())
			if err != nil {
				yield(nil, err)
				return
			}
			if c.expired(s, now) {
				continue
			}
			if !yield(s, nil) {
				return
			}
		}
		if err := it.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// wholeQuery evaluates a query over its whole source and cuts a page.
func (e *Engine) wholeQuery(c *Container, snap storage.Reader, lower []byte, x *query.Execution, req *QueryRequest) (*QueryResult, error) {
	docs := func(yield func([]byte, error) bool) {
		for s, err := range c.items(snap, lower, storage.PrefixEnd(lower), e.now().Unix()) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(s.doc, nil) {
				return
			}
		}
	}
	results, err := x.Execute(docs)
	if err != nil {
		return nil, queryError(err)
	}
	return pageResults(results, req.MaxItems, req.Continuation)
}

// streamToken is the continuation of a streaming query: where to resume in
// the source and how far TOP, OFFSET and LIMIT have got.
type streamToken struct {
	// Key is the storage key of the next document to evaluate.
	Key []byte `json:"k"`
	// Skip is how many of that document's rows were already returned.
	Skip int `json:"s,omitempty"`
	// Skipped counts rows skipped for OFFSET; Produced counts rows returned.
	Skipped  int `json:"o,omitempty"`
	Produced int `json:"n,omitempty"`
}

// streamQuery evaluates a streaming query document by document, only as far
// as one page needs.
func (e *Engine) streamQuery(c *Container, snap storage.Reader, lower []byte, x *query.Execution, plan *query.Plan, req *QueryRequest) (*QueryResult, error) {
	var tok streamToken
	start := lower
	if req.Continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(req.Continuation)
		if err != nil || json.Unmarshal(raw, &tok) != nil || !bytes.HasPrefix(tok.Key, lower) {
			return nil, BadRequest("The continuation token %q is invalid for this query.", req.Continuation)
		}
		start = tok.Key
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
	for s, err := range c.items(snap, start, storage.PrefixEnd(lower), e.now().Unix()) {
		if err != nil {
			return nil, err
		}
		if limit >= 0 && tok.Produced >= limit {
			break
		}
		rows, err := x.Rows(s.doc)
		if err != nil {
			return nil, queryError(err)
		}
		skip := 0
		if bytes.Equal(s.key, tok.Key) {
			skip = tok.Skip
		}
		for i := skip; i < len(rows); i++ {
			if len(res.Items) == size || (limit >= 0 && tok.Produced >= limit) {
				if limit < 0 || tok.Produced < limit {
					tok.Key, tok.Skip = append([]byte(nil), s.key...), i
					res.Continuation = encodeToken(tok)
				}
				return finishPage(res, total), nil
			}
			if tok.Skipped < offset {
				tok.Skipped++
				continue
			}
			res.Items = append(res.Items, rows[i])
			total += len(rows[i])
			tok.Produced++
		}
		tok.Key, tok.Skip = nil, 0
	}
	return finishPage(res, total), nil
}

func encodeToken(tok streamToken) string {
	raw, _ := json.Marshal(tok)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func finishPage(res *QueryResult, total int) *QueryResult {
	res.Charge = 2.5 + float64(total)/1024*0.2
	return res
}

// pageResults cuts a page out of complete results; the continuation is the
// offset of the next page.
func pageResults(results []json.RawMessage, maxItems int, continuation string) (*QueryResult, error) {
	start := 0
	if continuation != "" {
		raw, err := base64.RawURLEncoding.DecodeString(continuation)
		n, cerr := strconv.Atoi(string(raw))
		if err != nil || cerr != nil || n < 0 || n > len(results) {
			return nil, BadRequest("The continuation token %q is invalid for this query.", continuation)
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
	if end < len(results) {
		res.Continuation = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
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
	return pageResults(results, maxItems, continuation)
}
