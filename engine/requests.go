package engine

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/pkey"
	"github.com/orrery-db/orrery/query"
)

// The facade's vocabulary: the requests and results of item operations,
// batches, feeds and queries, and what reads a request's body (an item's,
// parseItem; a batch's, ParseBatch) before any work. No engine state: the
// work is in item.go, operation.go, batch.go, feed.go and query.go.

// MaxItemBytes is the largest item, system properties included.
const MaxItemBytes = 2 * 1024 * 1024

// ItemRequest addresses an item operation.
type ItemRequest struct {
	Database  string
	Container string
	// ID is the item id of point operations on an existing item.
	ID string
	// PartitionKey is the x-ms-documentdb-partitionkey value; HasPartitionKey
	// is false when the request had none.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	// Body is the item (create, upsert, replace).
	Body []byte
	// IfMatch makes a write conditional on the item's current ETag ("*": any).
	IfMatch string
	// IfNoneMatch on a read answers 304 when the ETag still matches.
	IfNoneMatch string
	// PreTriggers and PostTriggers name the triggers the write runs.
	PreTriggers  []string
	PostTriggers []string
	// Resolved, when set, is Database/Container as the caller looked it
	// up with ResolveContainer: the operation starts from it instead of
	// looking the container up again. It is checked as a lookup of the
	// engine's own would be: on a shared store the operation's round
	// trip checks the catalog version it was resolved at, and a container
	// replaced or deleted since is looked up again (404 when deleted).
	Resolved ContainerRef
}

// ContainerRef is a container as the engine's catalog cache had it when a
// request looked it up (ResolveContainer), with the catalog version it
// was at on a shared store, for the request's operation to start from
// (ItemRequest.Resolved). The zero ContainerRef names none.
type ContainerRef struct {
	c       *Container
	version []byte
}

// Container is the container r names (nil for the zero ContainerRef).
func (r ContainerRef) Container() *Container { return r.c }

// resolved is req.Resolved when it names req's container, else the zero
// ContainerRef: a caller's reference to another container is ignored.
func (req *ItemRequest) resolved() ContainerRef {
	return req.Resolved.of(req.Database, req.Container)
}

// resolved is req.Resolved's container when it names req's, else nil.
func (req *QueryRequest) resolved() *Container {
	return req.Resolved.of(req.Database, req.Container).c
}

// of is r when it names container db/name, else the zero ContainerRef.
func (r ContainerRef) of(db, name string) ContainerRef {
	if r.c == nil || r.c.ID != name || r.c.Database().ID != db {
		return ContainerRef{}
	}
	return r
}

// ItemResult is the outcome of an item operation.
type ItemResult struct {
	// Status is 200, 201, 204 or 304.
	Status int
	// Body is the item with its system properties (nil for deletes and 304).
	Body []byte
	ETag string
	// Charge is the request charge in request units.
	Charge float64
	// SessionLSN is the LSN of the session token, when the operation read
	// it from the store with its own work (a shared store); 0 otherwise,
	// and the caller asks SessionLSN.
	SessionLSN uint64
}

var errPartitionKeyRequired = BadRequest("PartitionKey value must be supplied for this operation: send the x-ms-documentdb-partitionkey header.")

// readResult answers a point read of it: 304 when ifNoneMatch matches its
// ETag, else the item; session is the session LSN the read brought.
func readResult(it *storedItem, ifNoneMatch string, session uint64) ItemResult {
	etag := it.etag()
	if ifNoneMatch != "" && (ifNoneMatch == "*" || ifNoneMatch == etag) {
		return ItemResult{Status: 304, ETag: etag, Charge: 1, SessionLSN: session}
	}
	return ItemResult{Status: 200, Body: it.doc, ETag: etag, Charge: readCharge(len(it.doc)), SessionLSN: session}
}

// item is a validated incoming item body.
type item struct {
	obj jsondoc.Object
	id  string
	pk  PartitionKey
	ttl int32
	// pkOne holds pk's value when the container has one partition key
	// path and the item a plain string at it: the key is in the item's
	// allocation.
	pkOne [1]pkey.Value
	// fields holds obj's properties when they fit: most items' in the
	// item's allocation.
	fields [itemFields]jsondoc.Field
}

// keepItemNames keeps the names of obj, the properties of an item a write
// parsed with some not among names (the container's kept ones), as the
// container's itemNames: obj's, then those of names that obj lacks, up to
// maxItemNames. A container's items mostly have the same properties: the
// next write's parse takes their strings from there and makes none. The
// price is paid where they differ: two allocations when an item has a
// name not kept, and a look through the kept names for each name that is
// not where it was in the last item.
func (c *Container) keepItemNames(obj, names jsondoc.Object) {
	kept := make(jsondoc.Object, 0, min(len(obj)+len(names), maxItemNames))
	for _, f := range obj {
		if len(kept) == cap(kept) {
			break
		}
		if len(f.Name) > maxItemNameLen {
			continue
		}
		kept = append(kept, jsondoc.Field{Name: f.Name})
	}
	for _, f := range names {
		if len(kept) == cap(kept) {
			break
		}
		if _, in := obj.Get(f.Name); !in {
			kept = append(kept, f)
		}
	}
	c.itemNames.Store(&kept)
}

// maxItemNames bounds the names a container keeps for its writes' parses,
// and maxItemNameLen the length of one: a longer name is not kept, so that
// a container holds at most 2 KiB of names, whatever its items' names are.
const (
	maxItemNames   = 32
	maxItemNameLen = 64
)

// itemFields is the properties an item holds in its own allocation.
const itemFields = 8

// parseItem validates a create/upsert/replace body against the container and
// the request's partition key.
func (c *Container) parseItem(body []byte, req *ItemRequest) (*item, error) {
	it := new(item)
	if err := c.parseItemInto(it, body, req, ""); err != nil {
		return nil, err
	}
	return it, nil
}

// parseItemInto is parseItem into it. validID, when not "", is an id that
// passed validItemID (the request's): a body of that id is not checked
// again (~60 instructions of a replace).
func (c *Container) parseItemInto(it *item, body []byte, req *ItemRequest, validID string) error {
	if len(body) > MaxItemBytes {
		return TooLarge("%s\r\nThe item is %d bytes, the limit is %d.", msgEntityTooLarge, len(body), MaxItemBytes)
	}
	// One scan: json.Valid's answer, utf8.Valid's, checkPayload's and the
	// top-level properties.
	*it = item{}
	var names jsondoc.Object
	if kept := c.itemNames.Load(); kept != nil {
		names = *kept
	}
	obj, scan := jsondoc.ParseValidWithoutSystem(it.fields[:0], body, len(it.fields), names)
	if len(body) == 0 || !scan.Valid {
		return BadRequest("The request body is not valid JSON.")
	}
	if !scan.UTF8 {
		// json.Valid passes invalid UTF-8 inside strings; stored, it would
		// break every SDK's read and query of the partition. The server
		// refuses such bodies first; this covers seeds, imports and scripts.
		return BadRequest("The request payload is invalid: it is not valid UTF-8. Ensure to provide a valid request payload.")
	}
	if scan.Err != nil {
		return BadRequest("%s", scan.Err.Error())
	}
	if !scan.Object {
		return BadRequest("The request body must be a JSON object.")
	}
	// The system properties a client sends (writing back what it read)
	// are not the item's: dropped (ParseValidWithoutSystem), the rest
	// keep their order.
	it.obj = obj
	if scan.NewNames {
		c.keepItemNames(obj, names)
	}
	rawID, ok := obj.Get("id")
	if !ok {
		return BadRequest("The input content is invalid because the required property, id, is missing.")
	}
	if validID != "" && len(rawID) == len(validID)+2 && rawID[0] == '"' && string(rawID[1:len(rawID)-1]) == validID &&
		strings.IndexByte(validID, '\\') < 0 {
		// The id the request names (a replace's), which the body's is
		// without escapes: that string, not a copy.
		it.id = validID
	} else if id, ok := jsondoc.PlainString(rawID); ok {
		it.id = id
	} else if json.Unmarshal(rawID, &it.id) != nil {
		return BadRequest("The id property must be a string.")
	}
	if validID == "" || it.id != validID {
		if e := validItemID(it.id); e != nil {
			return e
		}
	}
	if raw, ok := obj.Get("ttl"); ok {
		// null is no number of seconds: the service refuses it as it
		// refuses 0 and -10.
		n, perr := strconv.ParseFloat(string(raw), 64)
		if perr != nil || n != math.Trunc(n) || n == 0 || n < -1 || n > math.MaxInt32 {
			return BadRequest("The ttl value %s is invalid: it must be -1 or a whole number of seconds from 1 to 2147483647.", raw)
		}
		it.ttl = int32(n)
	}
	var like PartitionKey
	if req.HasPartitionKey {
		like = req.PartitionKey
	}
	pk, perr := c.partitionKeyIn(it.pkOne[:0], obj, like)
	if perr != nil {
		return perr
	}
	pk = c.legacyKey(pk)
	it.pk = pk
	if req.HasPartitionKey && !c.legacyKey(req.PartitionKey).Equal(pk) {
		return &Error{Status: 400, SubStatus: SubStatusPartitionKeyMismatch, Code: "BadRequest",
			Message: "PartitionKey extracted from document doesn't match the one specified in the header. Header: " +
				req.PartitionKey.String() + ", document: " + pk.String() + "."}
	}
	return nil
}

// partitionKeyIn reads an item's partition key from its properties,
// building a key of plain strings in buf's array when it has room (a nil
// buf allocates), taking a value's string from like (the request's key)
// where it is the same.
func (c *Container) partitionKeyIn(buf PartitionKey, obj jsondoc.Object, like PartitionKey) (PartitionKey, *Error) {
	if pk, ok := plainStringKey(buf, c.pk.Paths, obj, like); ok {
		return pk, nil
	}
	return decodedPartitionKey(&c.pk, obj)
}

// decodedPartitionKey reads a partition key from the decoded top-level
// properties its paths start with.
func decodedPartitionKey(def *PartitionKeyDefinition, obj jsondoc.Object) (PartitionKey, *Error) {
	doc := map[string]any{}
	for _, path := range def.Paths {
		name := firstSegment(path)
		if raw, ok := obj.Get(name); ok {
			if s, ok := jsondoc.PlainString(raw); ok {
				doc[name] = s
				continue
			}
			var v any
			if json.Unmarshal(raw, &v) == nil {
				doc[name] = v
			}
		}
	}
	return extractPartitionKey(def, doc)
}

// plainStringKey is the partition key of the usual item, whose every key
// path names a top-level property holding a string without escapes no
// longer than a key value may be: that string, read from the raw
// property without decoding it (extractPartitionKey would read the same).
// ok is false, and nothing allocated, for any other item. A value that is
// like's at its index (the request's key) is like's, not a copy.
func plainStringKey(buf PartitionKey, paths []string, obj jsondoc.Object, like PartitionKey) (pk PartitionKey, ok bool) {
	for _, path := range paths {
		// Two byte searches: ContainsAny builds its set of bytes each call.
		if p := path[1:]; strings.IndexByte(p, '/') >= 0 || strings.IndexByte(p, '~') >= 0 {
			return nil, false
		}
		raw, ok := obj.Get(path[1:])
		if !ok || len(raw) < 2 || raw[0] != '"' || len(raw)-2 > MaxPartitionKeyValueBytes || bytes.IndexByte(raw, '\\') >= 0 {
			return nil, false
		}
	}
	if pk = buf[:0]; cap(pk) >= len(paths) {
		pk = pk[:len(paths):len(paths)]
	} else {
		pk = make(PartitionKey, len(paths))
	}
	for i, path := range paths {
		raw, _ := obj.Get(path[1:])
		if i < len(like) {
			// The request's value (its header's), when it is this
			// one: that string, not a copy.
			if s, ok := like[i].AsString(); ok && s == string(raw[1:len(raw)-1]) {
				pk[i] = like[i]
				continue
			}
		}
		s, _ := jsondoc.PlainString(raw)
		pk[i] = pkey.StringValue(s)
	}
	return pk, true
}

func firstSegment(path string) string {
	s := path[1:]
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			s = s[:i]
			break
		}
	}
	return s
}

// checkIfMatch applies an If-Match precondition to the current item.
func checkIfMatch(ifMatch string, cur *storedItem) error {
	if ifMatch == "" {
		return nil
	}
	if cur == nil {
		return PreconditionFailed(msgPrecondition)
	}
	var buf [etagLen]byte
	if ifMatch != "*" && ifMatch != string(cur.appendETag(buf[:0])) {
		return PreconditionFailed(msgETagMismatch)
	}
	return nil
}

// writeCharge approximates the request units of a write of n bytes.
func writeCharge(n int) float64 { return 5.71 + float64(n/1024)*0.38 }

// readCharge approximates the request units of a point read of n bytes.
func readCharge(n int) float64 { return 1 + float64(n/1024)*0.1 }

// Batch limits.
const (
	// MaxBatchOperations is the most operations one batch may carry.
	MaxBatchOperations = 100
	// MaxBatchBytes is the largest batch request body.
	MaxBatchBytes = 2 * 1024 * 1024
)

// The batch operation types, as the wire spells them.
const (
	BatchCreate  = "Create"
	BatchUpsert  = "Upsert"
	BatchReplace = "Replace"
	BatchPatch   = "Patch"
	BatchRead    = "Read"
	BatchDelete  = "Delete"
)

// StatusFailedDependency is the status of every operation of a failed atomic
// batch but the one that failed it.
const StatusFailedDependency = 424

// BatchOperation is one operation of a batch.
type BatchOperation struct {
	// Type is one of BatchCreate ... BatchDelete.
	Type string
	// ID addresses Replace, Patch, Read and Delete.
	ID string
	// Body is the item (Create, Upsert, Replace) or the patch (Patch).
	Body []byte
	// IfMatch makes a write conditional on the item's ETag; IfNoneMatch on a
	// read answers 304 when it still matches.
	IfMatch     string
	IfNoneMatch string
	// PartitionKey is the operation's own partition key, when it names one
	// (bulk requests do, and then carry no partition key header).
	PartitionKey    PartitionKey
	HasPartitionKey bool

	invalid *Error // why the operation cannot run, found while parsing
	patch   *Patch
	item    *item // the body, when runAlone parsed it already
	// idValid reports that ID passed validItemID: a body of the same id
	// is not checked again (parseItemInto).
	idValid bool
}

// BatchRequest is a transactional batch or a bulk request on a container.
type BatchRequest struct {
	Database  string
	Container string
	// PartitionKey is the batch's partition key (the header); an atomic batch
	// must have one.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	Operations      []BatchOperation
	// Atomic runs every operation in one transaction, all or nothing; when it
	// is false each operation runs on its own (bulk).
	Atomic bool
	// Confined limits the request to one logical partition, Partition (the
	// one its credential reaches): an atomic batch elsewhere is refused
	// whole, and a bulk operation whose partition key resolves elsewhere
	// fails with 403 without running.
	Confined  bool
	Partition PartitionKey
	// StopOnError, for a bulk request, stops at the first operation that
	// fails, in request order: every later one answers
	// StatusFailedDependency without running (the client's
	// x-ms-cosmos-batch-continue-on-error: false).
	StopOnError bool
}

// outsidePartition is the 403 of an operation outside a confined request's
// partition.
func outsidePartition(pk, allowed PartitionKey) *Error {
	return Forbidden("Insufficient permissions provided in the authorization header for the corresponding request: the operation's partition key %s is outside the partition key %s the credential covers.", pk, allowed)
}

// BatchOperationResult is the outcome of one operation.
type BatchOperationResult struct {
	Status    int
	SubStatus int
	// Body is the item (nil for deletes, 304s and failures).
	Body []byte
	ETag string
	// Charge is the request charge in request units.
	Charge float64
	// Message explains a failure.
	Message string
}

// BatchResult is the outcome of a batch: one result per operation, in order.
type BatchResult struct {
	Results []BatchOperationResult
	// Failed is true when an operation failed: for an atomic batch, nothing
	// was written.
	Failed bool
	Charge float64
	// SessionLSN is the session token's LSN, read with the commit of an
	// atomic batch that wrote on a shared store (0: ask SessionLSN).
	SessionLSN uint64
}

// wireBatchOperation is an operation as the SDKs send it.
type wireBatchOperation struct {
	OperationType string          `json:"operationType"`
	ID            *string         `json:"id"`
	ResourceBody  json.RawMessage `json:"resourceBody"`
	IfMatch       string          `json:"ifMatch"`
	IfNoneMatch   string          `json:"ifNoneMatch"`
	PartitionKey  *string         `json:"partitionKey"`

	invalid *Error
}

// ParseBatch parses a batch request body, a JSON array of operations. A body
// over MaxBatchBytes is a 413 and more than MaxBatchOperations a 400; an
// operation that is itself malformed fails alone, when the batch runs.
func ParseBatch(body []byte) ([]BatchOperation, error) {
	if len(body) > MaxBatchBytes {
		return nil, TooLarge("%s\r\nThe batch request is %d bytes, the limit is %d.", msgEntityTooLarge, len(body), MaxBatchBytes)
	}
	// One pass decodes a well-formed batch; when some operation is not an
	// operation object, each is decoded alone so that only it fails.
	var wire []wireBatchOperation
	if json.Unmarshal(body, &wire) != nil {
		var raws []json.RawMessage
		if err := json.Unmarshal(body, &raws); err != nil {
			return nil, BadRequest("The batch request body must be a JSON array of operations: %v", err)
		}
		wire = make([]wireBatchOperation, len(raws))
		for i, raw := range raws {
			if err := json.Unmarshal(raw, &wire[i]); err != nil {
				wire[i] = wireBatchOperation{invalid: BadRequest("Batch operation %d is not a valid operation object: %v", i, err)}
			}
		}
	}
	if len(wire) == 0 {
		return nil, BadRequest("The batch request has no operations.")
	}
	if len(wire) > MaxBatchOperations {
		return nil, BadRequest("The batch request has %d operations: a batch can have at most %d.", len(wire), MaxBatchOperations)
	}
	ops := make([]BatchOperation, len(wire))
	for i := range wire {
		ops[i] = parseBatchOperation(i, &wire[i])
	}
	return ops, nil
}

func parseBatchOperation(i int, w *wireBatchOperation) BatchOperation {
	if w.invalid != nil {
		return BatchOperation{invalid: w.invalid}
	}
	op := BatchOperation{Body: w.ResourceBody, IfMatch: w.IfMatch, IfNoneMatch: w.IfNoneMatch}
	for _, t := range []string{BatchCreate, BatchUpsert, BatchReplace, BatchPatch, BatchRead, BatchDelete} {
		if strings.EqualFold(w.OperationType, t) {
			op.Type = t
		}
	}
	if op.Type == "" {
		op.invalid = BadRequest("Batch operation %d has operationType %q: it must be Create, Upsert, Replace, Patch, Read or Delete.", i, w.OperationType)
		return op
	}
	if w.ID != nil {
		op.ID = *w.ID
	}
	switch op.Type {
	case BatchReplace, BatchPatch, BatchRead, BatchDelete:
		if w.ID == nil {
			op.invalid = BadRequest("Batch operation %d (%s) has no id.", i, op.Type)
			return op
		}
		if e := validItemID(op.ID); e != nil {
			op.invalid = e
			return op
		}
		op.idValid = true
	}
	switch op.Type {
	case BatchCreate, BatchUpsert, BatchReplace, BatchPatch:
		if len(bytes.TrimSpace(op.Body)) == 0 || string(op.Body) == "null" {
			op.invalid = BadRequest("Batch operation %d (%s) has no resourceBody.", i, op.Type)
			return op
		}
	}
	if op.Type == BatchPatch {
		p, err := ParsePatch(op.Body)
		if err != nil {
			op.invalid, _ = AsError(err)
			return op
		}
		op.patch = p
	}
	if w.PartitionKey != nil {
		pk, err := ParsePartitionKeyHeader(*w.PartitionKey)
		if err != nil {
			op.invalid, _ = AsError(err)
			if op.invalid == nil {
				op.invalid = BadRequest("Batch operation %d has an invalid partitionKey %q.", i, *w.PartitionKey)
			}
			return op
		}
		op.PartitionKey, op.HasPartitionKey = pk, true
	}
	return op
}

// batchItemIDs names the items a batch's operations read (see opItemID).
func batchItemIDs(ops []BatchOperation) []string {
	ids := make([]string, 0, len(ops))
	for i := range ops {
		if id := opItemID(&ops[i]); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// opItemID names the item an operation reads: the id it addresses, or for a
// create, upsert or replace the one in its body; "" when a body names none
// that parses (the operation fails on it later).
func opItemID(op *BatchOperation) string {
	switch op.Type {
	case BatchCreate, BatchUpsert, BatchReplace:
		id, _ := bodyID(op.Body)
		return id
	}
	return op.ID
}

func failedResult(e *Error) BatchOperationResult {
	return BatchOperationResult{Status: e.Status, SubStatus: e.SubStatus, Message: e.Message, Charge: 1}
}

func (r *BatchResult) total() {
	for _, o := range r.Results {
		r.Charge += o.Charge
	}
}

// bodyID is the id in an item's JSON body, if it has one that is a string.
func bodyID(body []byte) (string, bool) {
	obj, err := jsondoc.Parse(body)
	if err != nil {
		return "", false
	}
	raw, ok := obj.Get("id")
	if !ok {
		return "", false
	}
	if id, ok := jsondoc.PlainString(raw); ok {
		return id, true
	}
	var id string
	return id, json.Unmarshal(raw, &id) == nil
}

// DefaultPageSize is the page size of feeds when the client gives none.
const DefaultPageSize = 100

// MaxPageSize is the largest page a feed returns.
const MaxPageSize = 1000

// FeedRequest asks for a page of a container's items (read feed).
type FeedRequest struct {
	Database  string
	Container string
	// PartitionKey scopes the feed to one logical partition when HasPartitionKey.
	PartitionKey    PartitionKey
	HasPartitionKey bool
	// MaxItems is the page size; zero or less means the default.
	MaxItems int
	// Continuation is the token of the previous page, "" for the first.
	Continuation string
	// PartitionKeyRangeID, MinEPK and MaxEPK scope the feed to one
	// partition key range and to an effective partition key span in it, as
	// for the change feed.
	PartitionKeyRangeID string
	MinEPK, MaxEPK      string
}

// FeedResult is one page of items.
type FeedResult struct {
	Items [][]byte
	// Continuation is "" on the last page.
	Continuation string
	Charge       float64
	// SessionLSN is the session token's LSN, read with the page's snapshot
	// on a shared store; 0 when the caller must ask SessionLSN.
	SessionLSN uint64
	// Container is the container a client query's page read: the
	// catalog cache's current one when the page found the cache stale.
	Container *Container
}

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
	// PartitionKeyRangeID names that range: the query reads only its items
	// (410/1002 when it was split). MinEPK and MaxEPK narrow the query to an
	// effective partition key span (x-ms-start-epk, x-ms-end-epk).
	PartitionKeyRangeID string
	MinEPK, MaxEPK      string
	// UDF resolves udf.name calls; nil when the container has none.
	UDF query.UDFResolver
	// IndexMetrics asks for the result's IndexUtilization.
	IndexMetrics bool
	// Resolved is as ItemRequest.Resolved: the container the caller
	// looked up (ResolveContainer), for the page to start from.
	Resolved ContainerRef
	// CrossPartitionDisabled is set when the client did not enable
	// cross-partition queries (x-ms-documentdb-query-enablecrosspartition
	// absent or false): a query that names neither a partition key (in the
	// request or its filter) nor a partition key range is refused with 400,
	// as the service refuses it.
	CrossPartitionDisabled bool
	// fanOut: the query spans the container's partitions and the gateway
	// serves it (no partition key, no partition key range): pages are cut
	// as the service's gateway cuts them (see streamQuery).
	fanOut bool
	// params are Params decoded once for the page (decodedParams), set
	// with paramsDecoded on the page's own copy of the request.
	params        query.Params
	paramsDecoded bool
}

// decodedParams are the request's parameter values, decoded once per page:
// by the page's planning of a query without a partition key, or here.
func (req *QueryRequest) decodedParams() (query.Params, error) {
	if req.paramsDecoded {
		return req.params, nil
	}
	return query.DecodeParams(req.Params)
}

// QueryResult is one page of query results.
type QueryResult struct {
	Items        []json.RawMessage
	Continuation string
	Charge       float64
	// Metrics is what the page cost, measured; nil for resource queries.
	Metrics *QueryMetrics
	// IndexUtilization is set when the request asked for index metrics.
	IndexUtilization *IndexUtilization
	// SessionLSN is the session token's LSN, read with the page's snapshot
	// on a shared store; 0 when the caller must ask SessionLSN.
	SessionLSN uint64
	// Container is the container a client query's page read: the
	// catalog cache's current one when the page found the cache stale.
	Container *Container
}

// ScriptKind is the kind of a container's server-side script, named as in
// its resource path.
type ScriptKind string

// The script kinds.
const (
	StoredProcedures ScriptKind = "sprocs"
	Triggers         ScriptKind = "triggers"
	UserFunctions    ScriptKind = "udfs"
)

// FeedKey is the name of the array a feed of this kind is returned in.
func (k ScriptKind) FeedKey() string {
	switch k {
	case StoredProcedures:
		return "StoredProcedures"
	case Triggers:
		return "Triggers"
	}
	return "UserDefinedFunctions"
}

// ParseScriptKind maps a path segment to a script kind.
func ParseScriptKind(seg string) (ScriptKind, bool) {
	switch k := ScriptKind(seg); k {
	case StoredProcedures, Triggers, UserFunctions:
		return k, true
	}
	return "", false
}

func (k ScriptKind) singular() string {
	switch k {
	case StoredProcedures:
		return "stored procedure"
	case Triggers:
		return "trigger"
	}
	return "user-defined function"
}
