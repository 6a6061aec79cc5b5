package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

const (
	// sweepScanBatch is how many expiry index entries one scan collects
	// before deleting them.
	sweepScanBatch = 4096
	// sweepTxnItems bounds the deletes of one sweeper transaction, so it
	// holds a partition's lock only briefly.
	sweepTxnItems = 4
	// sweepYield is how many times its own working time the sweeper
	// sleeps after each transaction. The sleep matters more than its
	// length: it lets writers waiting on the store take their turn, where a
	// sweeper that only yields keeps winning the locks back.
	sweepYield = 2
	// sweepMaxPause caps that sleep: a transaction's time on a durable
	// store is mostly its fsync, which takes no CPU from anyone.
	sweepMaxPause = time.Millisecond
)

// stopSignal is closed by Close: background work ends when it is.
type stopSignal chan struct{}

// closed reports whether Close has been called.
func (s stopSignal) closed() bool {
	select {
	case <-s:
		return true
	default:
		return false
	}
}

// sweeper is the TTL sweep: it deletes expired items and prunes the change
// log and the search indexes' change records. It holds what it needs: the
// store, the catalog (to visit every container), the seam (for partition
// transactions), the clock, the logger and Close's signal.
type sweeper struct {
	store   storage.Store
	catalog *catalog
	seam    seam
	log     *slog.Logger
	now     func() time.Time
	stop    stopSignal
	// ctx is the context of background work (Engine.bgCtx) and bg its
	// wait group: the sweep loop runs under them.
	ctx context.Context
	bg  *sync.WaitGroup
	// swept counts the items the sweeper deleted (Stats).
	swept atomic.Uint64
	// searchPrune is the record of watermarks, for pruning the search
	// indexes' change records (pruneSearchChanges).
	searchPrune struct {
		mu      sync.Mutex
		samples []watermarkSample
	}
}

// watermarkSample is a watermark and when it was read.
type watermarkSample struct {
	at time.Time
	w  uint64
}

// storeClosed reports whether err, a sweep's, is the engine's store being
// closed (not only a batch used after its end, say), which ends the
// sweeper: a closed store does not open again.
func (s *sweeper) storeClosed(ctx context.Context, err error) bool {
	if !errors.Is(err, storage.ErrClosed) {
		return false
	}
	_, err = s.store.Get(ctx, keys.MetaCatalogVersion)
	return errors.Is(err, storage.ErrClosed)
}

// sweepLoop runs the TTL sweeper until stop is closed.
func (s *sweeper) sweepLoop(interval time.Duration) {
	defer s.bg.Done()
	ctx := s.ctx
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			if _, err := s.sweep(ctx); err != nil && s.storeClosed(ctx, err) {
				return // a closed store does not open again
			} else if err != nil && ctx.Err() == nil { // Close ends a sweep: no failure
				s.log.Warn("the TTL sweep failed", "error", err)
			}
		}
	}
}

// sweep deletes the expired items of every container with TTL on, and the
// change records older than each container's retention, and returns how many
// items it deleted. Reads, queries and the latest-version feed hide expired
// items already; the sweep frees their space and logs their deletes (with
// timeToLiveExpired) in the all-versions-and-deletes feed.
func (s *sweeper) sweep(ctx context.Context) (int, error) {
	colls := s.catalog.allContainers(ctx)
	total := 0
	for _, c := range colls {
		if c.ttl != nil {
			start := time.Now()
			n, err := s.sweepContainer(ctx, c)
			total += n
			if n >= sweepLogThreshold {
				s.log.Info("TTL sweep", "database", c.db.ID, "container", c.ID, "expired items deleted", n, "took", time.Since(start).Round(time.Millisecond))
			}
			if err != nil {
				return total, err
			}
		}
		if _, err := feed.Prune(ctx, s.store, c.rid, c.changeLogCutoff(s.now()), s.stop.closed); err != nil {
			return total, err
		}
	}
	if err := s.pruneSearchChanges(ctx, colls); err != nil {
		return total, err
	}
	return total, nil
}

// sweepLogThreshold is the number of items a container's sweep deletes
// before it says so in the log.
const sweepLogThreshold = 1000

// sweepLogEvery is how often a long sweep of one container logs its
// progress.
const sweepLogEvery = 5 * time.Second

// sweepContainer deletes a container's expired items, a batch of index
// entries at a time.
func (s *sweeper) sweepContainer(ctx context.Context, c *Container) (int, error) {
	now := s.now().Unix()
	total := 0
	lastLog := time.Now()
	for _, span := range c.expiredSpans(now) {
		lower, upper := span[0], span[1]
		for !s.stop.closed() {
			keys, next, err := collectExpiry(ctx, s.store, lower, upper)
			if err != nil {
				return total, err
			}
			n, err := s.deleteExpired(ctx, c, keys)
			total += n
			s.swept.Add(uint64(n))
			if err != nil {
				return total, err
			}
			if time.Since(lastLog) > sweepLogEvery {
				lastLog = time.Now()
				s.log.Info("TTL sweep in progress", "database", c.db.ID, "container", c.ID, "expired items deleted so far", total)
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
func collectExpiry(ctx context.Context, r storage.Reader, lower, upper []byte) (entries []expiryEntry, next []byte, err error) {
	it, err := r.NewIterator(ctx, lower, upper, false)
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
func (s *sweeper) deleteExpired(ctx context.Context, c *Container, entries []expiryEntry) (int, error) {
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
			if s.stop.closed() {
				return deleted, nil
			}
			began := time.Now()
			chunk := group[:min(len(group), sweepTxnItems)]
			group = group[len(chunk):]
			// Counted once the transaction has committed: a sweep whose
			// commit fails (its database lost) deleted nothing.
			n := 0
			err := s.seam.inPartition(ctx, c, pk, nil, txnFunc(func(t *txn) error {
				t.expiring = true
				n = 0
				for _, en := range chunk {
					id, _, _ := c.splitItemKey(en.itemKey)
					cur, err := t.getAny(ctx, id)
					if err != nil {
						return err
					}
					// The container's version the transaction writes by:
					// a replace of its defaultTtl may have come between.
					tc := t.p.c
					if cur == nil || !bytes.Equal(tc.expiryKeyOf(cur), en.key) {
						// A stale entry: the item was rewritten or removed.
						if err := t.b.Delete(en.key); err != nil {
							return err
						}
						continue
					}
					if !tc.expired(cur, t.now.Unix()) {
						continue
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
			time.Sleep(min(sweepYield*time.Since(began), sweepMaxPause))
		}
	}
	return deleted, nil
}

// The change records of the search indexes on a shared store
// (keys.SearchChangeKey, see searchindex.go) are pruned by the TTL sweep.

// searchChangeRetention is how long the change records are kept.
const searchChangeRetention = 10 * time.Minute

// pruneSearchChanges deletes the change records older than
// searchChangeRetention of colls: those below the newest watermark this
// engine read that long ago (the TTL sweep calls it, on one gateway at a
// time).
func (s *sweeper) pruneSearchChanges(ctx context.Context, colls []*Container) error {
	shared, ok := s.store.(storage.Shared)
	if p, several := s.store.(interface{ Places() int }); !ok || several && p.Places() > 1 {
		return nil // no change records: no indexes kept (sharedSearchOn)
	}
	sp := &s.searchPrune
	now := time.Now()
	sp.mu.Lock()
	due := len(sp.samples) == 0 || now.Sub(sp.samples[len(sp.samples)-1].at) >= searchPruneEvery
	sp.mu.Unlock()
	if !due {
		return nil
	}
	w, err := shared.Watermark(ctx)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	sp.samples = append(sp.samples, watermarkSample{now, w})
	var cutoff uint64
	i := 0
	for i < len(sp.samples) && now.Sub(sp.samples[i].at) >= searchChangeRetention {
		cutoff = sp.samples[i].w
		i++
	}
	sp.samples = sp.samples[i:]
	sp.mu.Unlock()
	if cutoff == 0 {
		return nil
	}
	for _, c := range colls {
		if c.Search() == nil {
			continue
		}
		if err := s.pruneSearchChangesOf(ctx, c, cutoff); err != nil {
			return err
		}
	}
	return nil
}

// searchPruneEvery is how often the TTL sweep prunes the change records.
const searchPruneEvery = time.Minute

// searchPruneChunk is how many change records one batch of a prune deletes.
const searchPruneChunk = 1000

// pruneSearchChangesOf deletes c's change records numbered below cutoff,
// moving the horizon to cutoff in each batch that deletes some.
func (s *sweeper) pruneSearchChangesOf(ctx context.Context, c *Container, cutoff uint64) error {
	horizonKey := keys.SearchChangeHorizon(c.rid)
	raw, err := s.store.Get(ctx, horizonKey)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if len(raw) == 8 && binary.BigEndian.Uint64(raw) >= cutoff {
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	horizon := binary.BigEndian.AppendUint64(nil, cutoff)
	return deleteChunks(ctx, s.store, keys.SearchChangeKey(c.rid, 0, nil), keys.SearchChangeKey(c.rid, cutoff, nil), searchPruneChunk,
		func(b storage.Batch) error { return b.Set(horizonKey, horizon) })
}
