package engine

import "context"

// PatchItem applies a patch (req.Body, see ParsePatch) to an existing item in
// one transaction: 404 when the item is absent, 412 when If-Match is stale or
// the patch's condition is false on the current item, 400 when an operation
// cannot apply; on any error nothing changes. The result is the whole new item.
func (e *Engine) PatchItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.itemOperation(ctx, BatchPatch, req)
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
