package query

import (
	"encoding/json"
	"errors"
	"iter"
	"strings"
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
	// UDF resolves udf.name calls; without it such calls fail.
	UDF UDFResolver
	// Now is the time seen by GetCurrentDateTime and friends; zero means the
	// wall clock when the execution is prepared.
	Now time.Time
}

// Docs is a source of raw JSON documents. The source's error, if any, ends
// the execution and is returned to the caller.
type Docs = iter.Seq2[[]byte, error]

// MaxQueryLength is the longest query text accepted, the service's limit.
const MaxQueryLength = 262144

// Parse parses and validates a query. Errors are *Error values.
func Parse(text string) (*Query, error) {
	if len(text) > MaxQueryLength {
		return nil, &Error{Code: CodeSemantic, Message: "The SQL query text exceeded the maximum limit of " + itoa(MaxQueryLength) + " characters."}
	}
	sq, err := parseText(text)
	if err != nil {
		return nil, err
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
}

// Prepare binds the query to opts. It fails when a parameter value is not
// valid JSON, or when the query calls a user-defined function and opts has
// no UDF resolver.
func (q *Query) Prepare(opts Options) (*Execution, error) {
	if len(q.udfs) > 0 && opts.UDF == nil {
		return nil, &Error{Code: CodeUnknownFunction, Message: "Unknown function 'udf." + q.udfs[0] + "'."}
	}
	params, err := decodeParams(opts.Params)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	return &Execution{q: q, c: evalCtx{params: params, udf: opts.UDF, now: now.UTC()}}, nil
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

// Execute runs the prepared query over docs and returns every result.
func (x *Execution) Execute(docs Docs) ([]json.RawMessage, error) {
	c := x.c // each run has its own error state
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
		out = append(out, encodeJSON(v))
		return true
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
// page through the source and resume at any document.
func (x *Execution) Rows(doc []byte) ([]json.RawMessage, error) {
	sq := x.q.q
	if !sq.streaming() || len(sq.from) == 0 || sq.from[0].sub != nil {
		return nil, ErrNotStreaming
	}
	v, err := decodeDocument(doc, x.q.fields, x.q.keepRaw)
	if err != nil {
		return nil, errBadDocument
	}
	c := x.c
	var out []json.RawMessage
	e := &env{vals: make([]value, sq.nslots), root: v}
	sq.rows(&c, e, 0, func() bool {
		if r := sq.project(&c, e); r.defined() {
			out = append(out, encodeJSON(r))
		}
		return c.err == nil
	})
	if c.err != nil {
		return nil, c.err
	}
	return out, nil
}
