package engine

import (
	"bytes"
	"context"

	"github.com/orrery-db/orrery/storage"
)

// partitionDeleteChunk bounds the items one transaction of a partition key
// delete removes: the partition's writers wait at most that long, and memory
// holds at most that many keys.
const partitionDeleteChunk = 128

// DeleteAllItemsByPartitionKey deletes every item of a logical partition (on
// a hierarchical container, of every partition under a key prefix), as the
// service's delete-by-partition-key operation does. The service does it in
// the background; here it is done before answering, in short transactions of
// at most partitionDeleteChunk whole items, so writes to other partitions
// never wait for it, memory stays bounded, and a crash midway leaves some of
// the items, each whole. Each deleted item leaves its index, TTL and unique
// key entries, and a delete in the change feed's all-versions-and-deletes
// mode; no triggers run. It returns how many items it deleted.
func (e *Engine) DeleteAllItemsByPartitionKey(ctx context.Context, dbName, collName string, pk PartitionKey) (int, error) {
	c, err := e.Container(ctx, dbName, collName)
	if err != nil {
		return 0, err
	}
	scope, perr := c.queryScope(pk)
	if perr != nil {
		return 0, perr
	}
	upper := storage.PrefixEnd(scope)
	lower := scope
	deleted := 0
	for {
		keys, next, err := collectKeys(ctx, e.store, lower, upper, partitionDeleteChunk)
		if err != nil {
			return deleted, err
		}
		n, err := e.items.deleteKeys(ctx, c, keys)
		deleted += n
		if err != nil {
			return deleted, err
		}
		if next == nil {
			return deleted, nil
		}
		lower = next
	}
}

// collectKeys reads up to n keys in [lower, upper); next is where to
// continue, nil when the range is exhausted.
func collectKeys(ctx context.Context, r storage.Reader, lower, upper []byte, n int) (keys [][]byte, next []byte, err error) {
	it, err := r.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	for it.Next() {
		if len(keys) == n {
			return keys, append([]byte(nil), it.Key()...), nil
		}
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	return keys, nil, it.Err()
}

// deleteKeys deletes the items at keys (in key order, so grouped by
// logical partition), one transaction per partition.
func (w itemWriter) deleteKeys(ctx context.Context, c *Container, keys [][]byte) (int, error) {
	deleted := 0
	for len(keys) > 0 {
		_, pkEnc, ok := c.splitItemKey(keys[0])
		if !ok {
			keys = keys[1:]
			continue
		}
		end := 1
		for end < len(keys) {
			if _, enc, ok := c.splitItemKey(keys[end]); !ok || !bytes.Equal(enc, pkEnc) {
				break
			}
			end++
		}
		group := keys[:end]
		keys = keys[end:]
		pk, err := ParsePartitionKeyHeader(string(pkEnc))
		if err != nil {
			return deleted, err
		}
		n := 0
		err = w.seam.inPartition(ctx, c, pk, nil, txnFunc(func(t *txn) error {
			n = 0
			for _, k := range group {
				id, _, _ := c.splitItemKey(k)
				cur, err := t.getAny(ctx, id)
				if err != nil {
					return err
				}
				if cur == nil {
					continue // deleted meanwhile
				}
				if err := t.remove(ctx, cur); err != nil {
					return err
				}
				n++
			}
			return nil
		}))
		if err != nil {
			return deleted, err
		}
		deleted += n
	}
	return deleted, nil
}
