package query

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Query is a parsed and bound SELECT statement. It is immutable after Parse
// and safe for concurrent use.
type Query struct {
	text   string
	q      *selectQuery
	params map[string]bool
	udfs   []string
	// fields are the top-level document properties the query reads; nil
	// means the whole document. keepRaw is set when it also writes the
	// document out unchanged.
	fields  map[string]bool
	keepRaw bool
}

// UDFResolver executes user-defined functions called as udf.name(args).
// Undefined arguments are passed as nil; a nil or empty result is undefined.
type UDFResolver interface {
	Call(name string, args []json.RawMessage) (json.RawMessage, error)
}

// Options are the per-execution inputs of a query.
type Options struct {
	// Params maps parameter names ("@x"; the @ may be omitted) to JSON values.
	Params map[string]json.RawMessage
	// Decoded, when set, are the parameter values as DecodeParams decoded
	// them (from Params, which is then not read); the zero Params are not
	// set.
	Decoded Params
	// UDF resolves udf.name calls; without it such calls fail.
	UDF UDFResolver
	// Now is the time seen by GetCurrentDateTime and friends; zero means the
	// wall clock when the execution is prepared.
	Now time.Time
	// Context, when set, cancels the execution: it stops within a few
	// hundred rows of work and returns the context's error.
	Context context.Context
	// Deadline, when set, is the execution's time budget: RowsFrom stops
	// between rows once it has passed (and made progress), anything else
	// fails with ErrTimeBudget.
	Deadline time.Time
	// MaxMemory, when positive, is how many bytes one run of the execution
	// may hold in kept rows, groups, DISTINCT keys, arrays being built and
	// results; past it the run fails with an *Error that says so.
	MaxMemory int64
	// Pool, when set, is the memory all executions share; a run that finds
	// it exhausted fails with ErrMemoryPool.
	Pool *MemoryPool
	// Search, when set, supplies the container's vector embeddings, text
	// analyzers and full-text statistics to vector and full-text functions.
	Search SearchContext
	// Heavy, when set, is entered once, when the runs of the execution
	// have done HeavyAfter units of work between them, before the work
	// goes on: it may wait for the right to run a costly query (so that
	// few run at once, leaving cores to cheap requests). Its error stops
	// the execution and is returned.
	Heavy Gate
	// PlanarSpatial makes the spatial functions compute on the plane, as
	// for a container whose geospatialConfig type is Geometry: distances
	// and areas in the coordinates' units, no range on coordinates.
	PlanarSpatial bool
}

// Docs is a source of raw JSON documents. The source's error, if any, ends
// the execution and is returned to the caller.
type Docs = iter.Seq2[[]byte, error]

// MaxQueryLength is the longest query text accepted, the service's limit.
const MaxQueryLength = 262144

// Parse parses and validates a query. Errors are *Error values.
func Parse(text string) (*Query, error) {
	return parse(text, nil)
}

// parse parses a query, lets rewrite change the statement (when not nil),
// then binds it.
func parse(text string, rewrite func(*selectQuery) error) (*Query, error) {
	if len(text) > MaxQueryLength {
		return nil, &Error{Code: CodeSemantic, Message: "The SQL query text exceeded the maximum limit of " + itoa(MaxQueryLength) + " characters."}
	}
	sq, err := parseText(text)
	if err != nil {
		return nil, err
	}
	if rewrite != nil {
		if err := rewrite(sq); err != nil {
			return nil, err
		}
	}
	b := &binder{}
	if err := b.bindQuery(sq, nil, true); err != nil {
		return nil, err
	}
	fields, keepRaw := rootFields(sq)
	return &Query{text: text, q: sq, params: b.params, udfs: b.udfs, fields: fields, keepRaw: keepRaw}, nil
}

// String returns the query text as given to Parse.
func (q *Query) String() string { return q.text }

// Execution is a query bound to its parameters, UDF resolver and clock.
type Execution struct {
	q *Query
	c evalCtx
	// matched and heavy are what c.matched and c.heavy point to, shared by
	// every run's copy of c: allocated with the execution.
	matched matchCount
	heavy   heavyGate
	// run is RowsFrom's state, allocated with the execution and reused by
	// each call while no other call holds it (inRun): a call made during
	// another's, or beside it, makes its own.
	run   rowsRun
	inRun atomic.Bool
}

// rowsRun is the state of one RowsFrom call: its copy of the execution's
// context, the document's environment and the callback its rows go to.
type rowsRun struct {
	c       evalCtx
	e       env
	vals    []value  // e.vals' backing, kept between calls
	valBuf  [4]value // vals for up to four slots, without an allocation
	sq      *selectQuery
	fn      func(row json.RawMessage) bool
	refused bool
	emit    func() bool // r.row, made once
}

// row projects the current row and hands it to fn; false stops the rows.
func (r *rowsRun) row() bool {
	if v := r.sq.project(&r.c, &r.e); v.defined() && r.c.err == nil {
		if !r.fn(encodeJSON(v)) {
			r.refused = true
			return false
		}
	}
	return r.c.err == nil
}

// Matched counts the rows (a document, or one combination of its JOINed
// elements) the execution has found to satisfy the WHERE clause, over every
// run so far: what query metrics report as the documents the filter hit.
func (x *Execution) Matched() int64 { return x.c.matched.n }

// Prepare binds the query to opts. It fails when a parameter value is not
// valid JSON, or when the query calls a user-defined function and opts has
// no UDF resolver.
func (q *Query) Prepare(opts Options) (*Execution, error) {
	if len(q.udfs) > 0 && opts.UDF == nil {
		return nil, &Error{Code: CodeUnknownFunction, Message: "Unknown function 'udf." + q.udfs[0] + "'."}
	}
	var params map[string]value
	if opts.Decoded.decoded {
		params = opts.Decoded.vals
	} else {
		var err error
		if params, err = decodeParams(opts.Params); err != nil {
			return nil, err
		}
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	x := &Execution{q: q, c: evalCtx{params: params, udf: opts.UDF, now: now.UTC(),
		ctx: opts.Context, deadline: opts.Deadline, maxMemory: opts.MaxMemory, pool: opts.Pool,
		search: opts.Search, planar: opts.PlanarSpatial}}
	x.matched.root = q.q
	x.c.matched = &x.matched
	if opts.Heavy != nil {
		x.heavy.gate = opts.Heavy
		x.c.heavy = &x.heavy
	}
	return x, nil
}

// Params are parameter values decoded once (DecodeParams), for Plan and
// Prepare of one query to share: the values are only read.
// The zero Params are none decoded.
type Params struct {
	vals    map[string]value
	decoded bool
}

// DecodeParams decodes parameter values as Plan and Prepare do (the same
// errors): names without their @ get it.
func DecodeParams(raw map[string]json.RawMessage) (Params, error) {
	v, err := decodeParams(raw)
	if err != nil {
		return Params{}, err
	}
	return Params{vals: v, decoded: true}, nil
}

func decodeParams(raw map[string]json.RawMessage) (map[string]value, error) {
	params := make(map[string]value, len(raw))
	for name, r := range raw {
		v, err := decodeJSON(r)
		if err != nil {
			return nil, &Error{Code: CodeSemantic, Message: "The value of parameter '" + name + "' is not valid JSON."}
		}
		if !strings.HasPrefix(name, "@") {
			name = "@" + name
		}
		params[name] = v
	}
	return params, nil
}

// Execute runs the query over docs and returns every result, applying
// ORDER BY, aggregates, GROUP BY, DISTINCT, OFFSET/LIMIT and TOP.
func (q *Query) Execute(docs Docs, opts Options) ([]json.RawMessage, error) {
	x, err := q.Prepare(opts)
	if err != nil {
		return nil, err
	}
	return x.Execute(docs)
}

// FullTextStats returns the BM25 statistics the execution ranks
// FullTextScore(path, keywords) with: its SearchContext's (which the
// engine's keeps for the query, so that both see the same). ok false when
// the execution counts them over the documents it is given.
func (x *Execution) FullTextStats(path []string, keywords []string) (FullTextStats, bool) {
	if x.c.search == nil {
		return FullTextStats{}, false
	}
	return x.c.search.FullTextStats(path, keywords)
}

// Execute runs the prepared query over docs and returns every result.
func (x *Execution) Execute(docs Docs) ([]json.RawMessage, error) {
	return x.execute(x.c, docs) // each run has its own error state and memory account
}

// ExecuteRanked runs a query ordered by RANK RRF(...) with TOP or LIMIT
// over some of its source's documents, the candidates an index gave for
// each scoring component, and reports whether the answer is the one the
// whole source gives: cuts[i] says which documents the candidates hold for
// component i (see RankCut). RRF ranks a row among all rows, so a
// candidate's rank among the candidates is the one among all rows only
// where every row better than it is a candidate; exact is true when the
// rows returned all have such ranks in every component, and the fused score
// of the last one returned is above the most any other row, candidate or
// not, could have. Otherwise the caller evaluates the whole source (or
// asks again with more candidates).
func (x *Execution) ExecuteRanked(docs Docs, cuts []RankCut) (results []json.RawMessage, exact bool, err error) {
	c := x.c
	c.rankCuts, c.rankExact = cuts, &exact
	results, err = x.execute(c, docs)
	return results, exact && err == nil, err
}

func (x *Execution) execute(c evalCtx, docs Docs) ([]json.RawMessage, error) {
	c.startRun()
	defer c.mem.release()
	var out []json.RawMessage
	var srcErr error
	roots := func(yield func(value) bool) {
		for doc, err := range docs {
			if err != nil {
				srcErr = err
				return
			}
			v, err := decodeDocument(doc, x.q.fields, x.q.keepRaw)
			if err != nil {
				c.fail(errBadDocument)
				return
			}
			if !yield(v) {
				return
			}
		}
	}
	x.q.q.run(&c, nil, roots, func(v value) bool {
		r := encodeJSON(v)
		c.charge(int64(len(r)) + sizeSlice)
		out = append(out, r)
		return c.err == nil
	})
	if srcErr != nil {
		return nil, srcErr
	}
	if c.err != nil {
		return nil, c.err
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	return out, nil
}

// errBadDocument reports a source document that is not valid JSON.
var errBadDocument = &Error{Code: CodeRuntime, Message: "A document is not valid JSON."}

// ErrNotStreaming is returned by Rows for a query that needs the whole input
// (ORDER BY, aggregates, GROUP BY or DISTINCT) or does not range over the
// documents (no FROM, or a FROM subquery); use Execute for those.
var ErrNotStreaming = errors.New("query: the query is not streaming")

// Rows evaluates a streaming query against one document and returns its
// results (several when JOINs fan out). TOP, OFFSET and LIMIT are not applied:
// the caller applies Plan's Top/Offset/Limit across documents, which lets it
// page through the source and resume at any document. RowsFrom does the
// same row by row and can stop and resume inside a document.
func (x *Execution) Rows(doc []byte) ([]json.RawMessage, error) {
	out := []json.RawMessage(nil)
	_, err := x.RowsFrom(doc, nil, func(r json.RawMessage) bool {
		out = append(out, r)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RowsFrom evaluates a streaming query against one document, passing each of
// its results to fn in order, from position from on (nil: the first). A
// position names one row of the document: the ordinal of the element each
// FROM source (JOINs included) is at.
//
// It returns nil when the document is done. It returns the position to
// resume at when it stopped early: the row fn refused (fn returned false),
// or, when the execution's time budget ran out, the row it would have
// evaluated next; it runs past the budget until it has evaluated one row,
// so each call makes progress. An error that interrupts a row (ErrTimeBudget
// inside a subquery, cancellation) comes with the position of that row.
func (x *Execution) RowsFrom(doc []byte, from []int, fn func(row json.RawMessage) bool) ([]int, error) {
	sq := x.q.q
	if !sq.streaming() || len(sq.from) == 0 || sq.from[0].sub != nil {
		return nil, ErrNotStreaming
	}
	v, err := decodeDocument(doc, x.q.fields, x.q.keepRaw)
	if err != nil {
		return nil, errBadDocument
	}
	r := &x.run
	if x.inRun.CompareAndSwap(false, true) {
		defer x.inRun.Store(false)
	} else {
		r = new(rowsRun)
	}
	r.c = x.c
	r.c.startRun()
	defer r.c.mem.release()
	r.e = env{root: v}
	e := &r.e
	if cap(r.vals) < sq.nslots {
		if sq.nslots <= len(r.valBuf) {
			r.vals = r.valBuf[:0]
		} else {
			r.vals = make([]value, 0, sq.nslots)
		}
	}
	e.vals = r.vals[:sq.nslots]
	clear(e.vals)
	if len(sq.from) <= len(e.posBuf) {
		e.pos = e.posBuf[:len(sq.from)]
	} else {
		e.pos = make([]int, len(sq.from))
	}
	if len(from) == len(sq.from) {
		e.from = from
	}
	r.sq, r.fn, r.refused = sq, fn, false
	if r.emit == nil {
		r.emit = r.row
	}
	done := sq.rows(&r.c, e, 0, r.emit)
	r.fn = nil // the caller's, not to be kept
	switch {
	case r.c.err != nil:
		return slices.Clone(e.pos), r.c.err
	case done:
		return nil, nil
	case r.refused, r.c.stopped:
		return slices.Clone(e.pos), nil
	}
	return nil, nil
}

// startRun gives a run its own memory account and budget state.
func (c *evalCtx) startRun() {
	c.mem = memAccount{limit: c.maxMemory, pool: c.pool}
	c.keywords = nil
	c.expired, c.progressed, c.stopped, c.ticks = false, false, false, 0
	if !c.deadline.IsZero() && time.Now().After(c.deadline) {
		c.expired = true
	}
}
