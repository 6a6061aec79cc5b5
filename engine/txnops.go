package engine

import "context"

// The item operations a partition transaction runs (txn.run): one
// semantics for a create, upsert, replace, patch, delete or read, alone,
// in a batch, in a stored procedure or around its triggers.

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
	// The patched document is parsed into the operation's room for a body
	// when it has one (a patch has no body of its own to parse there).
	it := t.itemRoom
	t.itemRoom = nil
	if it == nil {
		it = new(item)
	}
	if err := c.parseItemInto(it, doc, &ItemRequest{PartitionKey: t.p.pk, HasPartitionKey: true}, ""); err != nil {
		return nil, err
	}
	return t.put(ctx, it, stale)
}
