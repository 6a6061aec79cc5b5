package engine

import (
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

// QueryItems runs a query over the items of a container, of one logical
// partition, or of a hierarchical key prefix, and returns a page of its
// results.
func (e *Engine) QueryItems(req *QueryRequest) (*QueryResult, error) {
	c, err := e.Container(req.Database, req.Container)
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(req.Query)
	if err != nil {
		return nil, err
	}
	lower := itemContainerPrefix(c.rid)
	if req.HasPartitionKey {
		scope, perr := c.queryScope(req.PartitionKey)
		if perr != nil {
			return nil, perr
		}
		lower = scope
	}
	snap := e.store.NewSnapshot()
	defer snap.Close()
	now := e.now()
	docs := func(yield func([]byte, error) bool) {
		it, err := snap.NewIterator(lower, storage.PrefixEnd(lower), false)
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
			if c.expired(s, now.Unix()) {
				continue
			}
			if !yield(s.doc, nil) {
				return
			}
		}
		if err := it.Err(); err != nil {
			yield(nil, err)
		}
	}
	results, err := q.Execute(docs, query.Options{Params: req.Params, UDF: req.UDF, Now: now})
	if err != nil {
		return nil, queryError(err)
	}
	e.durable.barrier()
	return pageResults(results, req.MaxItems, req.Continuation)
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
