package engine

import (
	"context"

	"github.com/orrery-db/orrery/engine/script"
)

// One semantics for item operations: a single create, upsert, replace, patch
// or delete runs the same operation, in a transaction of its own, that a
// batch runs among others in one transaction.

// itemOperation runs the single-item write typ of req (a BatchCreate ...
// BatchDelete) through runAlone.
func (e *Engine) itemOperation(ctx context.Context, typ string, req *ItemRequest) (*ItemResult, error) {
	resolved := req.resolved().c
	for {
		res, again, err := e.itemOperationOnce(ctx, typ, req, resolved)
		if !again {
			return res, err
		}
		resolved = nil
	}
}

// itemOperationOnce is itemOperation on the container as the catalog cache
// has it now, or resolved (req.Resolved's) when set. On a shared store the cache is checked against the store by
// the transaction, under its locks; a request refused before it began (a
// body that does not fit the container's partition key, say) is refused
// only if the cache is current, else again is true and the caller runs it
// on the current container.
func (e *Engine) itemOperationOnce(ctx context.Context, typ string, req *ItemRequest, resolved *Container) (_ *ItemResult, again bool, _ error) {
	triggers := len(req.PreTriggers)+len(req.PostTriggers) > 0
	var c *Container
	var pre, post []script.Script
	var err error
	switch {
	case triggers:
		c, pre, post, err = e.containerTriggers(ctx, req.Database, req.Container, req.PreTriggers, req.PostTriggers, triggerOperation(typ))
	case resolved != nil && !resolved.retired.Load():
		// Not replaced or deleted since it was resolved (if it is
		// later, the transaction starts over with its successor).
		c = resolved
	default:
		c, err = e.CachedContainer(ctx, req.Database, req.Container)
	}
	if err != nil {
		return nil, false, err
	}
	op := &BatchOperation{Type: typ, ID: req.ID, Body: req.Body, IfMatch: req.IfMatch}
	switch typ {
	case BatchReplace, BatchDelete, BatchPatch:
		if verr := validItemID(req.ID); verr != nil {
			return nil, false, verr
		}
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
		r, session, begun, err = e.runWithTriggers(ctx, c, req, op, pre, post)
	} else {
		r, session, begun, err = e.runAloneSession(ctx, c, &BatchRequest{PartitionKey: req.PartitionKey, HasPartitionKey: req.HasPartitionKey}, op)
	}
	if err != nil && !begun {
		moved, cerr := e.seam.containerMoved(ctx, req.Database, req.Container, c)
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
	return &ItemResult{Status: r.Status, Body: r.Body, ETag: r.ETag, Charge: r.Charge, SessionLSN: session}, false, nil
}

// runAlone runs one operation in its own transaction, on the operation's
// partition key, else the request's, else (for writes of an item) the body's.
func (e *Engine) runAlone(ctx context.Context, c *Container, req *BatchRequest, op *BatchOperation) (BatchOperationResult, error) {
	r, _, _, err := e.runAloneSession(ctx, c, req, op)
	return r, err
}

// runAloneSession is runAlone, and the session LSN its commit read (see
// ItemResult.SessionLSN); begun reports that the operation ran in a
// transaction (it was not refused before).
func (e *Engine) runAloneSession(ctx context.Context, c *Container, req *BatchRequest, op *BatchOperation) (_ BatchOperationResult, session uint64, begun bool, _ error) {
	if op.invalid != nil {
		return BatchOperationResult{}, 0, false, op.invalid
	}
	pk, ok := op.PartitionKey, op.HasPartitionKey
	if !ok {
		pk, ok = req.PartitionKey, req.HasPartitionKey
	}
	switch op.Type {
	case BatchCreate, BatchUpsert, BatchReplace:
		// The body is checked against the partition key before the partition
		// is, and names it when the request does not.
		it, perr := c.parseItem(op.Body, &ItemRequest{PartitionKey: pk, HasPartitionKey: ok})
		if perr != nil {
			return BatchOperationResult{}, 0, false, perr
		}
		pk, ok, op.item = it.pk, true, it
	}
	if !ok {
		return BatchOperationResult{}, 0, false, errPartitionKeyRequired
	}
	if req.Confined && !pk.Equal(req.Partition) {
		return BatchOperationResult{}, 0, false, outsidePartition(pk, req.Partition)
	}
	// On a shared store the item the operation reads first comes with
	// the locks.
	a := &aloneRun{ctx: ctx, op: op}
	a.ids[0] = op.ID
	if op.item != nil {
		a.ids[0] = op.item.id
	}
	err := e.seam.inPartition(ctx, c, pk, a.ids[:], a.run)
	if a.tx != nil {
		session = a.tx.session
	}
	return a.r, session, a.tx != nil, err
}

// aloneRun is one operation run by runAloneSession: what its transaction
// needs and answers, in one allocation.
type aloneRun struct {
	ctx context.Context
	op  *BatchOperation
	ids [1]string
	tx  *txn
	r   BatchOperationResult
}

func (a *aloneRun) run(t *txn) error {
	a.tx = t
	var err error
	a.r, err = t.run(a.ctx, a.op)
	return err
}

// run executes one operation inside the transaction. Failures of the
// operation are *Error values.
func (t *txn) run(ctx context.Context, op *BatchOperation) (BatchOperationResult, error) {
	if op.invalid != nil {
		return BatchOperationResult{}, op.invalid
	}
	if op.HasPartitionKey && !t.p.c.legacyKey(op.PartitionKey).Equal(t.p.pk) {
		return BatchOperationResult{}, &Error{Status: 400, SubStatus: SubStatusPartitionKeyMismatch, Code: "BadRequest",
			Message: "The operation's partition key " + op.PartitionKey.String() + " differs from the batch's " + t.p.pk.String() + ": a transactional batch works on one logical partition."}
	}
	c := t.p.c
	switch op.Type {
	case BatchRead:
		cur, err := t.get(ctx, op.ID)
		if err != nil {
			return BatchOperationResult{}, err
		}
		if cur == nil {
			return BatchOperationResult{}, NotFound(msgNotFound)
		}
		if op.IfNoneMatch != "" && (op.IfNoneMatch == "*" || op.IfNoneMatch == cur.etag()) {
			return BatchOperationResult{Status: 304, ETag: cur.etag(), Charge: 1}, nil
		}
		return BatchOperationResult{Status: 200, Body: cur.doc, ETag: cur.etag(), Charge: readCharge(len(cur.doc))}, nil
	case BatchDelete:
		cur, err := t.get(ctx, op.ID)
		if err != nil {
			return BatchOperationResult{}, err
		}
		if cur == nil {
			return BatchOperationResult{}, NotFound(msgNotFound)
		}
		if err := checkIfMatch(op.IfMatch, cur); err != nil {
			return BatchOperationResult{}, err
		}
		if err := t.remove(ctx, cur); err != nil {
			return BatchOperationResult{}, err
		}
		return BatchOperationResult{Status: 204, Charge: writeCharge(0)}, nil
	case BatchPatch:
		s, err := t.patch(ctx, op.ID, op.patch, op.IfMatch)
		if err != nil {
			return BatchOperationResult{}, err
		}
		return writeResult(200, s), nil
	}
	it := op.item
	if it == nil {
		var perr error
		if it, perr = c.parseItem(op.Body, &ItemRequest{PartitionKey: t.p.pk, HasPartitionKey: true}); perr != nil {
			return BatchOperationResult{}, perr
		}
	}
	stale, err := t.getAny(ctx, it.id)
	if err != nil {
		return BatchOperationResult{}, err
	}
	cur := stale
	if cur != nil && c.expired(cur, t.now.Unix()) {
		cur = nil
	}
	status := 200
	switch op.Type {
	case BatchCreate:
		if cur != nil {
			return BatchOperationResult{}, Conflict(msgConflict)
		}
		status = 201
	case BatchUpsert:
		if err := checkIfMatch(op.IfMatch, cur); err != nil {
			return BatchOperationResult{}, err
		}
		if cur == nil {
			status = 201
		}
	case BatchReplace:
		if it.id != op.ID {
			return BatchOperationResult{}, BadRequest("The id in the body (%q) does not match the id the request addresses (%q).", it.id, op.ID)
		}
		if cur == nil {
			return BatchOperationResult{}, NotFound(msgNotFound)
		}
		if err := checkIfMatch(op.IfMatch, cur); err != nil {
			return BatchOperationResult{}, err
		}
	}
	s, err := t.put(ctx, it, stale)
	if err != nil {
		return BatchOperationResult{}, err
	}
	return writeResult(status, s), nil
}

func writeResult(status int, s *storedItem) BatchOperationResult {
	return BatchOperationResult{Status: status, Body: s.doc, ETag: s.etag(), Charge: writeCharge(len(s.doc))}
}

// patch applies p to the item id of the transaction's partition and returns
// the stored record.
func (t *txn) patch(ctx context.Context, id string, p *Patch, ifMatch string) (*storedItem, error) {
	c := t.p.c
	stale, err := t.getAny(ctx, id)
	if err != nil {
		return nil, err
	}
	cur := stale
	if cur != nil && c.expired(cur, t.now.Unix()) {
		cur = nil
	}
	if cur == nil {
		return nil, NotFound(msgNotFound)
	}
	if err := checkIfMatch(ifMatch, cur); err != nil {
		return nil, err
	}
	if p.Condition != nil {
		ok, err := p.Condition.Matches(cur.doc, nil)
		if err != nil {
			return nil, BadRequest("The patch condition %q cannot be evaluated: %v", p.Condition.String(), err)
		}
		if !ok {
			return nil, PreconditionFailed(msgPrecondition)
		}
	}
	doc, perr := applyPatch(cur.doc, p.Operations, &c.pk)
	if perr != nil {
		return nil, perr
	}
	it, err := c.parseItem(doc, &ItemRequest{PartitionKey: t.p.pk, HasPartitionKey: true})
	if err != nil {
		return nil, err
	}
	return t.put(ctx, it, stale)
}
