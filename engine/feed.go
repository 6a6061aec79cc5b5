package engine

import (
	"context"

	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/storage"
)

// ReadFeed returns a page of items in creation order, as the service lists
// a physical partition's documents (see order.go). Like a query page, it
// checks the catalog and reads its session token in the round trip that
// opens its snapshot, and reads the items its order entries name a chunk
// at a time.
func (e *Engine) ReadFeed(ctx context.Context, req *FeedRequest) (*FeedResult, error) {
	// The order keys and the items they point to are read from one
	// snapshot, so a concurrent delete cannot leave a key without its item.
	c, snap, _, watermark, err := e.seam.itemsSnapshot(ctx, req.Database, req.Container, nil, 0)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	scope, perr := c.scope(req.PartitionKey, req.HasPartitionKey)
	if perr != nil {
		return nil, perr
	}
	bounds, perr := c.partitionBounds(req.HasPartitionKey, req.PartitionKeyRangeID, req.MinEPK, req.MaxEPK)
	if perr != nil {
		return nil, perr
	}
	order := c.orderScope(scope)
	start, upper := order, storage.PrefixEnd(order)
	if req.Continuation != "" {
		k, derr := base64.RawURLEncoding.DecodeString(req.Continuation)
		if derr != nil || !bytes.HasPrefix(k, order) {
			return nil, BadRequest("The continuation token %q is invalid for this request.", req.Continuation)
		}
		if k = append(k, 0); bytes.Compare(k, start) > 0 { // strictly after the last key returned
			start = k
		}
	}
	size := req.MaxItems
	if size <= 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	it, err := snap.NewIterator(ctx, start, upper, false)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	now := e.now().Unix()
	res := &FeedResult{}
	var last []byte
	total := 0
	inScope := func(key []byte) bool { return bytes.HasPrefix(key, scope) && c.inBounds(bounds, key) }
	err = feed.LookupChunks(ctx, snap, it, inScope, func(pos, key, v []byte) (bool, error) {
		if len(res.Items) == size {
			res.Continuation = base64.RawURLEncoding.EncodeToString(last)
			return false, nil
		}
		if key == nil {
			return true, nil
		}
		if v == nil {
			return false, fmt.Errorf("engine: order key without its item: %w", storage.ErrNotFound)
		}
		s, err := decodeItem(key, v)
		if err != nil {
			return false, err
		}
		last = pos
		if !c.expired(s, now) {
			res.Items = append(res.Items, append([]byte(nil), s.doc...))
			total += len(s.doc)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	e.durable.barrier()
	res.SessionLSN = sessionLSN(watermark)
	res.Charge = 1 + float64(total)/1024*0.1
	return res, nil
}
