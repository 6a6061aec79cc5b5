package engine

import (
	"context"

	"github.com/orrery-db/orrery/engine/script"
)

// One semantics for item operations: a single create, upsert, replace, patch
// or delete runs the same operation, in a transaction of its own, that a
// batch runs among others in one transaction.

// itemWriter runs item writes: one alone (with its triggers, if any), the
// operations of a batch, the deletes of a partition key. It holds the seam,
// for the container's lookup and the partition transaction, and the script
// host, for triggers; not the engine.
type itemWriter struct {
	seam    seam
	scripts *scriptHost
}

// operation runs the single-item write typ of req (a BatchCreate ...
// BatchDelete) through runAlone.
func (w itemWriter) operation(ctx context.Context, typ string, req *ItemRequest) (*ItemResult, error) {
	resolved := req.resolved().c
	for {
		res, again, err := w.operationOnce(ctx, typ, req, resolved)
		if !again {
			return res, err
		}
		resolved = nil
	}
}

// operationOnce is operation on the container as the catalog cache
// has it now, or resolved (req.Resolved's) when set. On a shared store the cache is checked against the store by
// the transaction, under its locks; a request refused before it began (a
// body that does not fit the container's partition key, say) is refused
// only if the cache is current, else again is true and the caller runs it
// on the current container.
func (w itemWriter) operationOnce(ctx context.Context, typ string, req *ItemRequest, resolved *Container) (_ *ItemResult, again bool, _ error) {
	triggers := len(req.PreTriggers)+len(req.PostTriggers) > 0
	var c *Container
	var pre, post []script.Script
	var err error
	switch {
	case triggers:
		c, pre, post, err = w.scripts.containerTriggers(ctx, req.Database, req.Container, req.PreTriggers, req.PostTriggers, triggerOperation(typ))
	case resolved != nil && !resolved.retired.Load():
		// Not replaced or deleted since it was resolved (if it is
		// later, the transaction starts over with its successor).
		c = resolved
	default:
		c, _, err = w.seam.cachedContainer(ctx, req.Database, req.Container)
	}
	if err != nil {
		return nil, false, err
	}
	o := &itemOperation{op: BatchOperation{Type: typ, ID: req.ID, Body: req.Body, IfMatch: req.IfMatch}}
	op := &o.op
	switch typ {
	case BatchReplace, BatchDelete, BatchPatch:
		if verr := validItemID(req.ID); verr != nil {
			return nil, false, verr
		}
		op.idValid = true
	}
	if typ == BatchDelete || typ == BatchPatch {
		if !req.HasPartitionKey {
			return nil, false, errPartitionKeyRequired
		}
	}
	if typ == BatchPatch {
		if op.patch, err = ParsePatch(req.Body); err != nil {
			return nil, false, err
		}
	}
	var r BatchOperationResult
	var session uint64
	var begun bool
	if triggers {
		r, session, begun, err = w.scripts.runWithTriggers(ctx, c, req, op, pre, post)
	} else {
		r, session, begun, err = w.runAloneSession(ctx, c, &BatchRequest{PartitionKey: req.PartitionKey, HasPartitionKey: req.HasPartitionKey}, op, &o.run)
	}
	if err != nil && !begun {
		moved, cerr := w.seam.containerMoved(ctx, req.Database, req.Container, c)
		if cerr != nil {
			return nil, false, cerr
		}
		if moved {
			return nil, true, nil
		}
	}
	if err != nil {
		return nil, false, err
	}
	o.res = ItemResult{Status: r.Status, Body: r.Body, ETag: r.ETag, Charge: r.Charge, SessionLSN: session}
	return &o.res, false, nil
}

// itemOperation is the operation operationOnce runs, its run and its
// result, in one allocation.
type itemOperation struct {
	op  BatchOperation
	res ItemResult
	run aloneRun
}

// runAlone runs one operation in its own transaction, on the operation's
// partition key, else the request's, else (for writes of an item) the body's.
func (w itemWriter) runAlone(ctx context.Context, c *Container, req *BatchRequest, op *BatchOperation) (BatchOperationResult, error) {
	r, _, _, err := w.runAloneSession(ctx, c, req, op, nil)
	return r, err
}

// runAloneSession is runAlone, and the session LSN its commit read (see
// ItemResult.SessionLSN); begun reports that the operation ran in a
// transaction (it was not refused before). The run is kept in a when it
// is not nil, else in an allocation of its own.
func (w itemWriter) runAloneSession(ctx context.Context, c *Container, req *BatchRequest, op *BatchOperation, a *aloneRun) (_ BatchOperationResult, session uint64, begun bool, _ error) {
	if op.invalid != nil {
		return BatchOperationResult{}, 0, false, op.invalid
	}
	pk, ok := op.PartitionKey, op.HasPartitionKey
	if !ok {
		pk, ok = req.PartitionKey, req.HasPartitionKey
	}
	// On a shared store the item the operation reads first comes with
	// the locks. The run holds the item the operation writes.
	if a == nil {
		a = new(aloneRun)
	}
	*a = aloneRun{ctx: ctx, op: op}
	switch op.Type {
	case BatchCreate, BatchUpsert, BatchReplace:
		// The body is checked against the partition key before the partition
		// is, and names it when the request does not.
		validID := ""
		if op.idValid {
			validID = op.ID
		}
		if perr := c.parseItemInto(&a.item, op.Body, &ItemRequest{PartitionKey: pk, HasPartitionKey: ok}, validID); perr != nil {
			return BatchOperationResult{}, 0, false, perr
		}
		pk, ok, op.item = a.item.pk, true, &a.item
	}
	if !ok {
		return BatchOperationResult{}, 0, false, errPartitionKeyRequired
	}
	if req.Confined && !pk.Equal(req.Partition) {
		return BatchOperationResult{}, 0, false, outsidePartition(pk, req.Partition)
	}
	a.ids[0] = op.ID
	if op.item != nil {
		a.ids[0] = op.item.id
	}
	err := w.seam.inPartition(ctx, c, pk, a.ids[:], a)
	begun = a.begun
	if begun {
		// The transaction is done with: a run kept with the operation's
		// result does not hold what it held (its batch, its partition).
		session, a.tx = a.tx.session, txn{}
	}
	return a.r, session, begun, err
}

// aloneRun is one operation run by runAloneSession: what its transaction
// needs and answers, and the transaction itself, in one allocation. It is
// the txnRunner of its transaction.
type aloneRun struct {
	ctx context.Context
	op  *BatchOperation
	ids [1]string
	// tx and part are the room for the transaction and its partition;
	// begun is set once it runs.
	tx    txn
	part  partition
	begun bool
	r     BatchOperationResult
	// item is op's body, parsed.
	item item
}

func (a *aloneRun) room() (*txn, *partition) { return &a.tx, &a.part }

func (a *aloneRun) run(t *txn) error {
	a.begun = true
	if a.op.Type == BatchPatch {
		// A patch has no body parsed into a.item: its new version is.
		t.itemRoom = &a.item
	}
	var err error
	a.r, err = t.run(a.ctx, a.op)
	return err
}
