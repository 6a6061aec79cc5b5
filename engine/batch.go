package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
)

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
		return nil, TooLarge("%s: the batch request is %d bytes, the limit is %d.", msgEntityTooLarge, len(body), MaxBatchBytes)
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

// errBatchFailed rolls back the transaction of a failed atomic batch.
var errBatchFailed = errors.New("engine: the batch failed")

// ExecuteBatch runs a batch. An atomic batch runs as one transaction on its
// logical partition: later operations see earlier ones, and when one fails it
// carries its own status, every other one StatusFailedDependency, and nothing
// is written. A non-atomic batch runs each operation on its own.
func (e *Engine) ExecuteBatch(ctx context.Context, req *BatchRequest) (*BatchResult, error) {
	if len(req.Operations) > MaxBatchOperations {
		return nil, BadRequest("The batch request has %d operations: a batch can have at most %d.", len(req.Operations), MaxBatchOperations)
	}
	if !req.Atomic {
		c, err := e.Container(ctx, req.Database, req.Container)
		if err != nil {
			return nil, err
		}
		return e.executeEach(ctx, c, req), nil
	}
	if !req.HasPartitionKey {
		return nil, errPartitionKeyRequired
	}
	if req.Confined && !req.PartitionKey.Equal(req.Partition) {
		return nil, outsidePartition(req.PartitionKey, req.Partition)
	}
	for {
		res, again, err := e.executeAtomic(ctx, req)
		if !again {
			return res, err
		}
	}
}

// executeAtomic runs a transactional batch on the container as the catalog
// cache has it now. On a shared store the transaction checks the cache
// against the store under its locks, and reads the items the operations
// name with them, in one round trip; a batch refused before it began (by
// the cached container's partition key) is refused only if the cache is
// current, else again is true and the caller runs it on the current
// container.
func (e *Engine) executeAtomic(ctx context.Context, req *BatchRequest) (_ *BatchResult, again bool, _ error) {
	c, err := e.CachedContainer(ctx, req.Database, req.Container)
	if err != nil {
		return nil, false, err
	}
	res := &BatchResult{Results: make([]BatchOperationResult, len(req.Operations))}
	var tx *txn
	fn := func(t *txn) error {
		tx = t
		for i := range req.Operations {
			op := &req.Operations[i]
			r, err := t.run(ctx, op)
			if err == nil {
				res.Results[i] = r
				continue
			}
			ce, ok := AsError(err)
			if !ok || ctx.Err() != nil {
				// The request's context ended: the request fails as a
				// whole, not as one operation of it.
				return err
			}
			for j := range res.Results {
				res.Results[j] = BatchOperationResult{Status: StatusFailedDependency,
					Message: "The operation was not applied because another operation of the batch failed."}
			}
			res.Results[i] = failedResult(ce)
			res.Failed = true
			return errBatchFailed
		}
		return nil
	}
	err = e.seam.inPartition(ctx, c, req.PartitionKey, batchItemIDs(req.Operations), fn)
	if err != nil && tx == nil {
		moved, cerr := e.seam.containerMoved(ctx, req.Database, req.Container, c)
		if cerr != nil {
			return nil, false, cerr
		}
		if moved {
			return nil, true, nil
		}
	}
	if err != nil && !errors.Is(err, errBatchFailed) {
		return nil, false, err
	}
	if tx != nil {
		res.SessionLSN = tx.session
	}
	res.total()
	return res, false, nil
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

// executeEach runs every operation of a bulk request in its own transaction.
func (e *Engine) executeEach(ctx context.Context, c *Container, req *BatchRequest) *BatchResult {
	res := &BatchResult{Results: make([]BatchOperationResult, len(req.Operations))}
	var failed atomic.Bool
	run := func(i int) {
		op := &req.Operations[i]
		r, err := e.runAlone(ctx, c, req, op)
		if err != nil {
			ce, ok := AsError(err)
			if !ok {
				ce = &Error{Status: 500, Code: "InternalServerError", Message: "An unexpected error occurred while processing the operation."}
			}
			r = failedResult(ce)
			failed.Store(true)
		}
		res.Results[i] = r
	}
	groups := bulkGroups(req)
	if req.StopOnError {
		for i := range req.Operations {
			if failed.Load() {
				res.Results[i] = BatchOperationResult{Status: StatusFailedDependency,
					Message: "The operation was not applied because an earlier operation of the bulk request failed and it asked not to continue on error."}
				continue
			}
			run(i)
		}
	} else if len(groups) <= 1 {
		for i := range req.Operations {
			run(i)
		}
	} else {
		// Logical partitions are independent: they run side by side, at
		// most bulkWorkers at once, so that their commits share fsyncs (or
		// overlap their round trips); each runs its operations in order.
		next := make(chan []int)
		var wg sync.WaitGroup
		for range min(bulkWorkers, len(groups)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g := range next {
					for _, i := range g {
						run(i)
					}
				}
			}()
		}
		for _, g := range groups {
			next <- g
		}
		close(next)
		wg.Wait()
	}
	res.Failed = failed.Load()
	res.total()
	return res
}

// bulkWorkers is how many logical partitions a bulk request works on at
// once.
const bulkWorkers = 8

// bulkGroups splits a bulk request's operations by logical partition, each
// group in the request's order. When an operation's partition is known
// only from its body, the operations stay in one group: it could share a
// partition with any other.
func bulkGroups(req *BatchRequest) [][]int {
	at := map[string]int{}
	var groups [][]int
	for i := range req.Operations {
		op := &req.Operations[i]
		var pk PartitionKey
		switch {
		case op.HasPartitionKey:
			pk = op.PartitionKey
		case req.HasPartitionKey:
			pk = req.PartitionKey
		default:
			return nil
		}
		key := pk.String()
		g, ok := at[key]
		if !ok {
			g = len(groups)
			at[key] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
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
