package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

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
		return e.items.executeEach(ctx, c, req), nil
	}
	if !req.HasPartitionKey {
		return nil, errPartitionKeyRequired
	}
	if req.Confined && !req.PartitionKey.Equal(req.Partition) {
		return nil, outsidePartition(req.PartitionKey, req.Partition)
	}
	for {
		res, again, err := e.items.executeAtomic(ctx, req)
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
func (w itemWriter) executeAtomic(ctx context.Context, req *BatchRequest) (_ *BatchResult, again bool, _ error) {
	c, _, err := w.seam.cachedContainer(ctx, req.Database, req.Container)
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
	err = w.seam.inPartition(ctx, c, req.PartitionKey, batchItemIDs(req.Operations), txnFunc(fn))
	if err != nil && tx == nil {
		moved, cerr := w.seam.containerMoved(ctx, req.Database, req.Container, c)
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

// executeEach runs every operation of a bulk request in its own transaction.
func (w itemWriter) executeEach(ctx context.Context, c *Container, req *BatchRequest) *BatchResult {
	res := &BatchResult{Results: make([]BatchOperationResult, len(req.Operations))}
	var failed atomic.Bool
	run := func(i int) {
		op := &req.Operations[i]
		r, err := w.runAlone(ctx, c, req, op)
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
