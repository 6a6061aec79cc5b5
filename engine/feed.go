package engine

import (
	"context"

	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/orrery-db/orrery/storage"
)

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
}

// ReadFeed returns a page of items in creation order, as the service lists
// a physical partition's documents (see order.go). Like a query page, it
// checks the catalog and reads its session token in the round trip that
// opens its snapshot, and reads the items its order entries name a chunk
// at a time.
func (e *Engine) ReadFeed(ctx context.Context, req *FeedRequest) (*FeedResult, error) {
	// The order keys and the items they point to are read from one
	// snapshot, so a concurrent delete cannot leave a key without its item.
	c, snap, _, watermark, err := e.itemsSnapshot(ctx, req.Database, req.Container, nil, 0)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	scope, perr := c.scope(req.PartitionKey, req.HasPartitionKey)
	if perr != nil {
		return nil, perr
	}
	bounds, perr := c.requestBounds(req.PartitionKeyRangeID, req.MinEPK, req.MaxEPK)
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
	type entry struct {
		pos, key []byte // key nil: out of scope
	}
	var entries []entry
	var keys [][]byte
	for first, more := true, true; more; first = false {
		entries, keys = entries[:0], keys[:0]
		for n := lookupChunk(snap, first); len(keys) < n && len(entries) < 4*maxChangeFeedChunk; {
			if !it.Next() {
				more = false
				break
			}
			en := entry{pos: bytes.Clone(it.Key())}
			if key := it.Value(); bytes.HasPrefix(key, scope) && bounds.containsEPK(c.itemEPK(key)) {
				en.key = bytes.Clone(key)
				keys = append(keys, en.key)
			}
			entries = append(entries, en)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		var values [][]byte
		if len(keys) > 0 {
			if values, err = storage.GetMany(ctx, snap, keys); err != nil {
				return nil, err
			}
		}
		next := 0
		for _, en := range entries {
			if len(res.Items) == size {
				res.Continuation = base64.RawURLEncoding.EncodeToString(last)
				more = false
				break
			}
			if en.key == nil {
				continue
			}
			v := values[next]
			next++
			if v == nil {
				return nil, fmt.Errorf("engine: order key without its item: %w", storage.ErrNotFound)
			}
			s, err := decodeItem(en.key, v)
			if err != nil {
				return nil, err
			}
			last = en.pos
			if c.expired(s, now) {
				continue
			}
			res.Items = append(res.Items, append([]byte(nil), s.doc...))
			total += len(s.doc)
		}
	}
	e.durable.barrier()
	res.SessionLSN = sessionLSN(watermark)
	res.Charge = 1 + float64(total)/1024*0.1
	return res, nil
}
