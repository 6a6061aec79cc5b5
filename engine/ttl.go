package engine

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// DefaultSweepInterval is how often the TTL sweeper looks for expired items
// when Options.SweepInterval is zero.
const DefaultSweepInterval = time.Second

const (
	// sweepScanBatch is how many expiry index entries one scan collects
	// before deleting them.
	sweepScanBatch = 4096
	// sweepTxnItems bounds the deletes of one sweeper transaction, so it
	// holds a partition's lock only briefly.
	sweepTxnItems = 32
	// sweepYield is how many times its own working time the sweeper
	// sleeps between transactions.
	sweepYield = 2
)

// sweepLoop runs the TTL sweeper until stop is closed.
func (e *Engine) sweepLoop(interval time.Duration) {
	defer e.bg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			if _, err := e.sweep(); err != nil {
				slog.Warn("the TTL sweep failed", "error", err)
			}
		}
	}
}

// stopping reports whether Close has been called.
func (e *Engine) stopping() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// sweep deletes the expired items of every container with TTL on and returns
// how many it deleted. Reads, queries and the latest-version feed hide expired
// items already; the sweep frees their space and logs their deletes (with
// timeToLiveExpired) in the all-versions-and-deletes feed.
func (e *Engine) sweep() (int, error) {
	e.catMu.RLock()
	var colls []*Container
	for _, db := range e.dbs {
		for _, c := range db.colls {
			if c.ttl != nil {
				colls = append(colls, c)
			}
		}
	}
	e.catMu.RUnlock()
	total := 0
	for _, c := range colls {
		n, err := e.sweepContainer(c)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sweepContainer deletes a container's expired items, a batch of index
// entries at a time.
func (e *Engine) sweepContainer(c *Container) (int, error) {
	now := e.now().Unix()
	total := 0
	kinds := []struct {
		kind byte
		upto int64 // index times at or below this have expired
	}{{expiryByDeadline, now}}
	if *c.ttl > 0 {
		kinds = append(kinds, struct {
			kind byte
			upto int64
		}{expiryByModified, now - *c.ttl})
	}
	for _, k := range kinds {
		prefix := expiryKindPrefix(c.rid, k.kind)
		lower := prefix
		upper := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), uint64(k.upto+1))
		for !e.stopping() {
			keys, next, err := collectExpiry(e.store, lower, upper)
			if err != nil {
				return total, err
			}
			n, err := e.deleteExpired(c, keys)
			total += n
			if err != nil {
				return total, err
			}
			if next == nil {
				break
			}
			lower = next
		}
	}
	return total, nil
}

// expiryEntry is one expiry index entry and the item key it points at.
type expiryEntry struct {
	key, itemKey []byte
}

// collectExpiry reads up to sweepScanBatch expiry entries in [lower, upper);
// next is where to continue, nil when the range is exhausted.
func collectExpiry(r storage.Reader, lower, upper []byte) (entries []expiryEntry, next []byte, err error) {
	it, err := r.NewIterator(lower, upper, false)
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	for it.Next() {
		if len(entries) == sweepScanBatch {
			return entries, append([]byte(nil), it.Key()...), nil
		}
		entries = append(entries, expiryEntry{key: append([]byte(nil), it.Key()...), itemKey: append([]byte(nil), it.Value()...)})
	}
	return entries, nil, it.Err()
}

// deleteExpired deletes the items of entries that have expired, grouped by
// logical partition, in short transactions.
func (e *Engine) deleteExpired(c *Container, entries []expiryEntry) (int, error) {
	groups := map[string][]expiryEntry{}
	var order []string
	for _, en := range entries {
		_, pkEnc, ok := c.splitItemKey(en.itemKey)
		if !ok {
			continue
		}
		if _, seen := groups[string(pkEnc)]; !seen {
			order = append(order, string(pkEnc))
		}
		groups[string(pkEnc)] = append(groups[string(pkEnc)], en)
	}
	deleted := 0
	for _, pkEnc := range order {
		pk, err := ParsePartitionKeyHeader(pkEnc)
		if err != nil {
			return deleted, err
		}
		group := groups[pkEnc]
		for len(group) > 0 {
			if e.stopping() {
				return deleted, nil
			}
			began := time.Now()
			chunk := group[:min(len(group), sweepTxnItems)]
			group = group[len(chunk):]
			err := e.inPartition(c, pk, func(t *txn) error {
				t.expiring = true
				for _, en := range chunk {
					id, _, _ := c.splitItemKey(en.itemKey)
					cur, err := t.getAny(id)
					if err != nil {
						return err
					}
					if cur == nil || !bytes.Equal(cur.expiryKey(c.rid), en.key) {
						// A stale entry: the item was rewritten or removed.
						if err := t.b.Delete(en.key); err != nil {
							return err
						}
						continue
					}
					if !c.expired(cur, t.now.Unix()) {
						continue
					}
					if err := t.remove(cur); err != nil {
						return err
					}
					deleted++
				}
				return nil
			})
			if err != nil {
				return deleted, err
			}
			// Leave writers twice the time the sweep takes: the sweep is
			// background work and must not crowd them out of the CPU.
			time.Sleep(sweepYield * time.Since(began))
		}
	}
	return deleted, nil
}
