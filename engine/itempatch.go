package engine

import "context"

// PatchItem applies a patch (req.Body, see ParsePatch) to an existing item in
// one transaction: 404 when the item is absent, 412 when If-Match is stale or
// the patch's condition is false on the current item, 400 when an operation
// cannot apply; on any error nothing changes. The result is the whole new item.
func (e *Engine) PatchItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.items.operation(ctx, BatchPatch, req)
}
