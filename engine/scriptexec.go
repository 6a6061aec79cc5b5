package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/storage"
)

// tracer makes the engine's spans, from the global tracer provider: no-ops
// unless the binary set one up.
var tracer = otel.Tracer("github.com/orrery-db/orrery/engine")

// StatusCode is the error's HTTP status; scripts see it as err.number.
func (e *Error) StatusCode() int { return e.Status }

// ExecuteRequest runs a stored procedure.
type ExecuteRequest struct {
	Database  string
	Container string
	ID        string
	// PartitionKey is the logical partition the procedure runs in.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	// Args are the procedure's arguments.
	Args []json.RawMessage
	// EnableLogging returns the procedure's console.log output.
	EnableLogging bool
}

// ExecuteResult is what a stored procedure answered.
type ExecuteResult struct {
	// Body is what the procedure set with getResponse().setBody (nil: nothing).
	Body json.RawMessage
	// Log is its console.log output when logging was asked for.
	Log    string
	Charge float64
	// SessionLSN is the session token's LSN, read with the commit of a run
	// that wrote on a shared store (0: ask SessionLSN).
	SessionLSN uint64
}

// scriptHost runs server-side JavaScript: stored procedures and triggers in
// their partition's transaction, admitted by the script gate, and the
// runtime UDFs run on. It holds the seam (for the partition transaction and
// the scripts' reads) and the queries a script makes, not the engine.
type scriptHost struct {
	limits script.Limits
	// maxConcurrent is Options.MaxConcurrentScripts.
	maxConcurrent int
	seam          seam
	queries       scriptQueries
	// The runner and the gate are made on first use, since a runtime pool
	// costs megabytes that a server without scripts never needs.
	once sync.Once
	run  *script.Runner
	gate *scriptGate
	// started is set once run and gate are made.
	started atomic.Bool
	// runs counts script runs by kind and outcome (Stats).
	runs scriptCounters
}

// scriptQueries is the engine's query work as a script reaches it: a query
// run over the partition's items as the script's transaction sees them (r,
// under scope), which may call the container's user-defined functions.
type scriptQueries interface {
	queryInPartition(ctx context.Context, c *Container, r storage.Reader, scope []byte, req *QueryRequest) (*QueryResult, error)
}

// runner returns the script runner, starting it on first use.
func (h *scriptHost) runner() *script.Runner {
	h.once.Do(func() {
		h.run = script.NewRunner(h.limits)
		n := h.maxConcurrent
		if n <= 0 {
			n = max(1, runtime.GOMAXPROCS(0)/2)
		}
		timeout := h.run.Limits().Timeout
		h.gate = newScriptGate(n, max(1, n/2), min(scriptQuantum, timeout/2), timeout)
		h.started.Store(true)
	})
	return h.run
}

// stats is how many stored procedures and triggers run and wait for a
// slot now.
func (h *scriptHost) stats() (running, waiting int) {
	h.runner()
	return h.gate.stats()
}

// scriptQuantum is how long a script may run in a short slot.
const scriptQuantum = 50 * time.Millisecond

// admit waits for a slot to run a stored procedure or trigger in the
// logical partition pk of c, its turn among the partitions waiting. The
// wait counts against the script's time budget: the returned context ends
// with it. release takes the error the run ended with.
func (h *scriptHost) admit(parent context.Context, c *Container, pk PartitionKey) (ctx context.Context, release func(error), err error) {
	budget := h.runner().Limits().Timeout
	p, perr := c.partition(pk)
	if perr != nil {
		return nil, nil, perr
	}
	key := string(c.rid) + string(p.enc)
	ctx, cancel := context.WithTimeoutCause(parent, budget,
		fmt.Errorf("the script exceeded its time budget of %v, counting its wait for a slot", budget))
	s, aerr := h.gate.acquire(ctx, key)
	if aerr != nil {
		cancel()
		if parent.Err() != nil {
			return nil, nil, &Error{Status: 408, Code: "RequestTimeout", Message: "The request was cancelled while waiting for a script slot."}
		}
		return nil, nil, &Error{Status: 429, Code: "TooManyRequests",
			Message: fmt.Sprintf("Too many scripts are running: no slot for this one freed up within its time budget (%v). Retry later.", budget)}
	}
	if s.short {
		ctx = script.WithQuantum(ctx, h.gate.quantum)
	}
	return ctx, func(err error) {
		h.gate.release(s, s.short && StatusOf(err) == 429)
		cancel()
	}, nil
}

// executeProcedure is ExecuteStoredProcedure.
func (h *scriptHost) executeProcedure(ctx context.Context, req *ExecuteRequest) (*ExecuteResult, error) {
	c, props, err := h.containerScript(ctx, req.Database, req.Container, StoredProcedures, req.ID)
	if err != nil {
		return nil, err
	}
	pk := req.PartitionKey
	if !req.HasPartitionKey {
		if len(c.pk.Paths) > 0 {
			return nil, BadRequest("PartitionKey value must be supplied to execute a stored procedure: it runs inside one logical partition.")
		}
	}
	sp := scriptOf(props)
	// The run's span, under the request's: a trace goes from the client
	// through the server into the script (its wait for a slot included).
	ctx, span := tracer.Start(ctx, "sprocs.run", trace.WithAttributes(
		attribute.String("db.namespace", c.db.ID), attribute.String("db.collection.name", c.ID),
		attribute.String("orrery.script.id", req.ID)))
	defer span.End()
	ctx, release, err := h.admit(ctx, c, pk)
	if err != nil {
		h.runs.refused(kindProcedure, err)
		span.SetAttributes(attribute.String("orrery.script.outcome", refusedOutcome(err)))
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	span.AddEvent("admitted")
	var res script.Result
	var tx *txn
	err = h.seam.inPartition(ctx, c, pk, nil, txnFunc(func(t *txn) error {
		tx = t
		coll := &scriptCollection{queries: h.queries, t: t}
		var rerr error
		res, rerr = h.runner().Execute(ctx, sp, req.Args, coll, script.ExecuteOptions{EnableLogging: req.EnableLogging})
		h.runs.count(kindProcedure, rerr)
		span.SetAttributes(attribute.String("orrery.script.outcome", scriptOutcomes[outcomeOf(rerr)]))
		return scriptError(rerr)
	}))
	release(err)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	out := &ExecuteResult{Body: res.Body, Log: res.Log, Charge: 5 + float64(len(res.Body))/1024}
	if tx != nil {
		out.SessionLSN = tx.session
	}
	return out, nil
}

// containerScript looks up a container and reads one of its scripts (see
// containerScripts).
func (h *scriptHost) containerScript(ctx context.Context, db, coll string, kind ScriptKind, id string) (*Container, map[string]any, error) {
	c, props, err := h.containerScripts(ctx, db, coll, kind, []string{id})
	if err != nil {
		return nil, nil, err
	}
	return c, props[0], nil
}

// containerScripts looks up a container and reads scripts of it: 404 when
// one is missing. On a shared store the cached container's check against
// the catalog's version and the scripts' reads are one statement, as a
// point read's are.
func (h *scriptHost) containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error) {
	return h.seam.containerScripts(ctx, db, coll, kind, ids)
}

// scriptCollection is the logical partition a script runs in: every call
// reads and writes through the script's transaction.
type scriptCollection struct {
	queries scriptQueries
	t       *txn
}

// SelfLink is the container's RID link.
func (sc *scriptCollection) SelfLink() string { return sc.t.p.c.Self() }

// AltLink is the container's name link.
func (sc *scriptCollection) AltLink() string { return sc.t.p.c.AltLink() }

// resolve turns a document link (by name or RID) into the id of an item of
// this partition.
func (sc *scriptCollection) resolve(ctx context.Context, link string) (string, error) {
	c := sc.t.p.c
	link = strings.Trim(link, "/")
	i := strings.LastIndex(link, "/docs/")
	if i < 0 {
		return "", BadRequest("The document link %q is not a link to a document.", link)
	}
	parent, last := link[:i], link[i+len("/docs/"):]
	if parent == strings.Trim(c.Self(), "/") {
		rid, ok := rids.Decode(last, 16)
		if !ok {
			return "", NotFound(msgNotFound)
		}
		key, err := sc.t.b.Get(ctx, keys.RIDKey(c.rid, rid[8:]))
		if errors.Is(err, storage.ErrNotFound) {
			return "", NotFound(msgNotFound)
		}
		if err != nil {
			return "", err
		}
		if !strings.HasPrefix(string(key), string(sc.t.p.prefix)) {
			return "", NotFound(msgNotFound)
		}
		return string(key[len(sc.t.p.prefix):]), nil
	}
	return last, nil
}

func (sc *scriptCollection) run(ctx context.Context, op *BatchOperation) (BatchOperationResult, error) {
	r, err := sc.t.run(ctx, op)
	return r, err
}

// ReadDocument reads one document of the partition.
func (sc *scriptCollection) ReadDocument(ctx context.Context, link string, opts script.ReadOptions) (json.RawMessage, error) {
	id, err := sc.resolve(ctx, link)
	if err != nil {
		return nil, err
	}
	r, err := sc.run(ctx, &BatchOperation{Type: BatchRead, ID: id, IfNoneMatch: opts.IfNoneMatch})
	if err != nil {
		return nil, err
	}
	if r.Status == 304 {
		return nil, &Error{Status: 304, Code: "NotModified", Message: "The document has not changed."}
	}
	return r.Body, nil
}

// ReadDocuments reads one page of the partition's documents.
func (sc *scriptCollection) ReadDocuments(ctx context.Context, opts script.FeedOptions) (script.Page, error) {
	return sc.QueryDocuments(ctx, script.Query{Text: "SELECT * FROM root"}, opts)
}

// QueryDocuments runs a query over the partition as the transaction sees it;
// the query may call the container's user-defined functions, as a client's
// query may.
func (sc *scriptCollection) QueryDocuments(ctx context.Context, q script.Query, opts script.FeedOptions) (script.Page, error) {
	t := sc.t
	params := make(map[string]json.RawMessage, len(q.Parameters))
	for _, p := range q.Parameters {
		params[p.Name] = p.Value
	}
	size := opts.PageSize
	if size < 0 {
		size = MaxPageSize
	}
	req := &QueryRequest{Query: q.Text, Params: params, MaxItems: size, Continuation: opts.Continuation}
	// The procedure's own budget bounds its queries: ctx ends with it.
	res, err := sc.queries.queryInPartition(ctx, t.p.c, t.b, t.p.prefix, req)
	if err != nil {
		return script.Page{}, err
	}
	return script.Page{Documents: res.Items, Continuation: res.Continuation}, nil
}

func (sc *scriptCollection) write(ctx context.Context, op *BatchOperation) (json.RawMessage, error) {
	r, err := sc.run(ctx, op)
	if err != nil {
		return nil, err
	}
	return r.Body, nil
}

// CreateDocument creates a document in the partition.
func (sc *scriptCollection) CreateDocument(ctx context.Context, doc json.RawMessage, opts script.WriteOptions) (json.RawMessage, error) {
	return sc.write(ctx, &BatchOperation{Type: BatchCreate, Body: doc, IfMatch: opts.IfMatch})
}

// UpsertDocument creates or replaces a document in the partition.
func (sc *scriptCollection) UpsertDocument(ctx context.Context, doc json.RawMessage, opts script.WriteOptions) (json.RawMessage, error) {
	return sc.write(ctx, &BatchOperation{Type: BatchUpsert, Body: doc, IfMatch: opts.IfMatch})
}

// ReplaceDocument replaces the document at link.
func (sc *scriptCollection) ReplaceDocument(ctx context.Context, link string, doc json.RawMessage, opts script.WriteOptions) (json.RawMessage, error) {
	id, err := sc.resolve(ctx, link)
	if err != nil {
		return nil, err
	}
	return sc.write(ctx, &BatchOperation{Type: BatchReplace, ID: id, Body: doc, IfMatch: opts.IfMatch})
}

// PatchDocument patches the document at link.
func (sc *scriptCollection) PatchDocument(ctx context.Context, link string, patch json.RawMessage, opts script.WriteOptions) (json.RawMessage, error) {
	id, err := sc.resolve(ctx, link)
	if err != nil {
		return nil, err
	}
	p, err := ParsePatch(patch)
	if err != nil {
		return nil, err
	}
	return sc.write(ctx, &BatchOperation{Type: BatchPatch, ID: id, IfMatch: opts.IfMatch, patch: p})
}

// DeleteDocument deletes the document at link.
func (sc *scriptCollection) DeleteDocument(ctx context.Context, link string, opts script.WriteOptions) error {
	id, err := sc.resolve(ctx, link)
	if err != nil {
		return err
	}
	_, err = sc.run(ctx, &BatchOperation{Type: BatchDelete, ID: id, IfMatch: opts.IfMatch})
	return err
}

// containerTriggers looks up a container and loads the triggers a write
// names, checking each exists, has the right type and applies to the
// operation (see containerScripts).
func (h *scriptHost) containerTriggers(ctx context.Context, db, coll string, preIDs, postIDs []string, operation string) (c *Container, pre, post []script.Script, err error) {
	trim := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if id = strings.TrimSpace(id); id != "" {
				out = append(out, id)
			}
		}
		return out
	}
	preIDs, postIDs = trim(preIDs), trim(postIDs)
	c, props, err := h.containerScripts(ctx, db, coll, Triggers, append(slices.Clip(preIDs), postIDs...))
	if err != nil {
		return nil, nil, nil, err
	}
	check := func(ids []string, props []map[string]any, typ string) ([]script.Script, error) {
		var out []script.Script
		for i, id := range ids {
			if t, _ := props[i]["triggerType"].(string); t != typ {
				return nil, BadRequest("The trigger '%s' is a %s-trigger, but the request names it as a %s-trigger.", id, strings.ToLower(t), strings.ToLower(typ))
			}
			op, _ := props[i]["triggerOperation"].(string)
			if op != "All" && op != operation && !(op == "Update" && operation == "Replace") {
				return nil, BadRequest("The trigger '%s' runs on %s operations, not on %s.", id, op, operation)
			}
			out = append(out, scriptOf(props[i]))
		}
		return out, nil
	}
	if pre, err = check(preIDs, props[:len(preIDs)], "Pre"); err != nil {
		return nil, nil, nil, err
	}
	if post, err = check(postIDs, props[len(preIDs):], "Post"); err != nil {
		return nil, nil, nil, err
	}
	return c, pre, post, nil
}

// triggerOperation names an item operation as triggers see it.
func triggerOperation(typ string) string {
	switch typ {
	case BatchCreate:
		return "Create"
	case BatchUpsert:
		return "Upsert"
	case BatchReplace:
		return "Replace"
	case BatchDelete:
		return "Delete"
	}
	return typ
}

// runWithTriggers runs a single-item write with its pre- and post-triggers
// in one transaction: a pre-trigger may change the body, a post-trigger may
// write more, and a throw in either aborts everything. On a shared store
// the item the request names is read with the transaction's locks; session
// is the LSN its commit read, begun reports that the transaction began.
func (h *scriptHost) runWithTriggers(ctx context.Context, c *Container, req *ItemRequest, op *BatchOperation, pre, post []script.Script) (r BatchOperationResult, session uint64, begun bool, err error) {
	operation := triggerOperation(op.Type)
	pk, hasPK := req.PartitionKey, req.HasPartitionKey
	if !hasPK && op.Body != nil {
		it, perr := c.parseItem(op.Body, req)
		if perr != nil {
			return r, 0, false, perr
		}
		pk, hasPK = it.pk, true
	}
	if !hasPK {
		return r, 0, false, errPartitionKeyRequired
	}
	ctx, release, err := h.admit(ctx, c, pk)
	if err != nil {
		h.runs.refused(kindTrigger, err)
		return r, 0, false, err
	}
	defer func() { release(err) }()
	var tx *txn
	fn := func(t *txn) error {
		tx = t
		coll := &scriptCollection{queries: h.queries, t: t}
		for _, trig := range pre {
			body, err := h.runner().RunPreTrigger(ctx, trig, script.Request{OperationType: operation, Body: op.Body}, coll)
			h.runs.count(kindTrigger, err)
			if err != nil {
				return scriptError(err)
			}
			op.Body = body
		}
		op.item = nil
		var err error
		if r, err = t.run(ctx, op); err != nil {
			return err
		}
		for _, trig := range post {
			body, err := h.runner().RunPostTrigger(ctx, trig, script.Request{OperationType: operation, Body: op.Body}, r.Body, coll)
			h.runs.count(kindTrigger, err)
			if err != nil {
				return scriptError(err)
			}
			if body != nil {
				r.Body = body
			}
		}
		return nil
	}
	// On a shared store the item is read with the locks (a pre-trigger
	// that changes its id reads the new one itself).
	err = h.seam.inPartition(ctx, c, pk, []string{opItemID(op)}, txnFunc(fn))
	if tx != nil {
		session, begun = tx.session, true
	}
	return r, session, begun, err
}

// scriptOf is the script a stored script resource holds.
func scriptOf(props map[string]any) script.Script {
	id, _ := props["id"].(string)
	body, _ := props["body"].(string)
	etag, _ := props["_etag"].(string)
	return script.Script{ID: id, Body: body, ETag: etag}
}
