package engine

import (
	"bytes"
	"context"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// The public entry points of item operations. A write reads top to bottom
// through four files: an entry point here hands the request to the item
// writer (itemWriter.operation, operation.go), which validates the body
// (parseItem, requests.go) and runs the operation as one transaction on its
// logical partition (the seam's inPartition, then put or remove, txn.go),
// which writes the stored record (storedItem, record.go). A point read reads the record outside any transaction
// (pointRead, localseam.go).

// CreateItem creates an item; 409 when its id exists in the logical partition.
func (e *Engine) CreateItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.items.operation(ctx, BatchCreate, req)
}

// UpsertItem creates the item or replaces it (honouring If-Match when given).
func (e *Engine) UpsertItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.items.operation(ctx, BatchUpsert, req)
}

// ReplaceItem replaces an existing item; 404 when absent, 412 on a stale If-Match.
func (e *Engine) ReplaceItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.items.operation(ctx, BatchReplace, req)
}

// DeleteItem deletes an item; 404 when absent, 412 on a stale If-Match.
func (e *Engine) DeleteItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.items.operation(ctx, BatchDelete, req)
}

// ReadItem reads an item by id and partition key.
func (e *Engine) ReadItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	return e.seam.readItem(ctx, req)
}

// ItemByRID resolves the RID of one of the container's items (its _rid, the
// last segment of its _self link) to the item's id and partition key, so
// that a request addressed by RID can be served like one addressed by name.
// An unknown or malformed RID is 404, as a missing id is.
func (e *Engine) ItemByRID(ctx context.Context, c *Container, rid string) (id string, pk PartitionKey, err error) {
	b, ok := rids.Decode(rid, 16)
	if !ok || !bytes.Equal(b[:8], c.rid) {
		return "", PartitionKey{}, NotFound(msgNotFound)
	}
	key, err := e.store.Get(ctx, keys.RIDKey(c.rid, b[8:]))
	if errors.Is(err, storage.ErrNotFound) {
		return "", PartitionKey{}, NotFound(msgNotFound)
	}
	if err != nil {
		return "", PartitionKey{}, err
	}
	id, pkEnc, ok := c.splitItemKey(key)
	if !ok {
		return "", PartitionKey{}, errors.New("engine: corrupt RID index entry")
	}
	pk, perr := ParsePartitionKeyHeader(string(pkEnc))
	if perr != nil {
		return "", PartitionKey{}, perr
	}
	return id, pk, nil
}
