package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/feed"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// StatsCountCap bounds every count a Stats call makes by walking an index
// (feed lag, unpublished changes, TTL backlog), per container, so that a
// scrape costs a few seeks and at most this many keys per figure however
// far behind things are. A count that reaches it means "at least".
const StatsCountCap = 1000

// Stats is a snapshot of what an operator watches in the engine: the change
// feed's watermark and each container's lag behind it, the TTL backlog, and
// the script runs. It is computed from counters and short index walks,
// never a scan of the items.
type Stats struct {
	// Watermark is the LSN every change-feed reader may read up to: every
	// write at or below it has finished.
	Watermark uint64
	// NewestLSN is the highest LSN handed out to a write. On a shared
	// store it is the highest this gateway handed out, or the watermark if
	// that is higher (the other gateways' writes).
	NewestLSN uint64
	// InFlight is how many LSNs are handed out to writes still open
	// (committing or abandoning); the oldest holds the watermark back. On a
	// shared store it counts this gateway's writes only.
	InFlight int
	// Containers are the containers' figures, by database and id.
	Containers []ContainerStats
	// ScriptsRunning and ScriptsWaiting are the stored procedures and
	// triggers running now and waiting for a slot.
	ScriptsRunning, ScriptsWaiting int
	// ScriptRuns counts the script runs since the engine opened, by kind and
	// outcome; only non-zero counts are listed.
	ScriptRuns []ScriptRunCount
	// TTLSwept is how many expired items the sweeper has deleted since the
	// engine opened.
	TTLSwept uint64
}

// ContainerStats are one container's figures in Stats.
type ContainerStats struct {
	Database, Container string
	// NewestLSN is the LSN of the container's newest change in its
	// latest-version feed (0 when it has no item).
	NewestLSN uint64
	// Unpublished is how many of its changes have committed above the
	// watermark, invisible to change-feed readers until the older writes
	// holding the watermark finish; UnpublishedAge is how long ago (by _ts)
	// the oldest of them was written.
	Unpublished    int
	UnpublishedAge time.Duration
	// FeedRead is whether a change-feed read of the container has been
	// answered since the engine opened. FeedPosition is then the furthest
	// position such a read has been answered up to (its ETag's LSN), of any
	// reader and scope; FeedLag is how many changes of the latest-version
	// feed lie between it and the watermark (what a reader there would get
	// next), and FeedLagAge how long ago (by _ts) the oldest of them was
	// written: the reader is that far behind.
	FeedRead     bool
	FeedPosition uint64
	FeedLag      int
	FeedLagAge   time.Duration
	// TTL is whether the container has time to live on; TTLBacklog is then
	// how many items have expired and wait for the sweeper (hidden from
	// reads already).
	TTL        bool
	TTLBacklog int
}

// ScriptRunCount is how many script runs of one kind ended one way.
type ScriptRunCount struct {
	// Kind is ScriptKindProcedure, ScriptKindTrigger or ScriptKindUDF.
	Kind string
	// Outcome is one of the ScriptOutcome* values.
	Outcome string
	Count   uint64
}

// Stats returns the engine's figures now; see Stats. Its cost is a few
// seeks per container and at most StatsCountCap keys per counted figure.
func (e *Engine) Stats(ctx context.Context) (*Stats, error) {
	st := &Stats{TTLSwept: e.sweeper.swept.Load()}
	st.NewestLSN, st.InFlight = e.seq.pending()
	// The watermark after the pending figures: an LSN finished in between
	// then shows as published, never as newer than the newest.
	w, err := e.seq.watermark(ctx)
	if err != nil {
		return nil, err
	}
	st.Watermark = w
	// On a shared store the other gateways' writes are known only through
	// the watermark.
	st.NewestLSN = max(st.NewestLSN, st.Watermark)
	if e.scripts.started.Load() {
		st.ScriptsRunning, st.ScriptsWaiting = e.scripts.gate.stats()
	}
	for k := range e.scripts.runs {
		for o := range e.scripts.runs[k] {
			if n := e.scripts.runs[k][o].Load(); n > 0 {
				st.ScriptRuns = append(st.ScriptRuns, ScriptRunCount{Kind: scriptKinds[k], Outcome: scriptOutcomes[o], Count: n})
			}
		}
	}
	colls := e.allContainers(ctx)
	sort.Slice(colls, func(i, j int) bool {
		if colls[i].db.ID != colls[j].db.ID {
			return colls[i].db.ID < colls[j].db.ID
		}
		return colls[i].ID < colls[j].ID
	})
	snap, err := e.store.NewSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	now := e.now()
	for _, c := range colls {
		cs, err := containerStatsOf(ctx, snap, c, st.Watermark, now, &e.feedReads)
		if err != nil {
			return nil, err
		}
		st.Containers = append(st.Containers, cs)
	}
	return st, nil
}

// containerStatsOf are c's figures as r sees them, at watermark and now,
// with the change-feed reads answered so far (reads).
func containerStatsOf(ctx context.Context, r storage.Reader, c *Container, watermark uint64, now time.Time, reads *feedReads) (ContainerStats, error) {
	cs := ContainerStats{Database: c.db.ID, Container: c.ID}
	prefix := keys.FeedPrefix(c.rid)
	it, err := r.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), true)
	if err != nil {
		return cs, err
	}
	if it.Next() && len(it.Key()) >= len(prefix)+8 {
		cs.NewestLSN = binary.BigEndian.Uint64(it.Key()[len(prefix):])
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return cs, err
	}
	if cs.NewestLSN > watermark {
		if cs.Unpublished, cs.UnpublishedAge, err = feedSpan(ctx, r, c, watermark, cs.NewestLSN, now); err != nil {
			return cs, err
		}
	}
	if v, ok := reads.Load(string(c.rid)); ok {
		cs.FeedRead = true
		cs.FeedPosition = v.(*atomic.Uint64).Load()
		if cs.FeedPosition < watermark {
			if cs.FeedLag, cs.FeedLagAge, err = feedSpan(ctx, r, c, cs.FeedPosition, watermark, now); err != nil {
				return cs, err
			}
		}
	}
	if c.ttl != nil {
		cs.TTL = true
		if cs.TTLBacklog, err = ttlBacklog(ctx, r, c, now.Unix()); err != nil {
			return cs, err
		}
	}
	return cs, nil
}

// feedSpan counts, up to StatsCountCap, the entries of c's latest-version
// feed with an LSN in (from, upto], and returns the age of the first (by its
// item's _ts).
func feedSpan(ctx context.Context, r storage.Reader, c *Container, from, upto uint64, now time.Time) (int, time.Duration, error) {
	lower, upper := feed.LSNRange(keys.FeedPrefix(c.rid), from, upto)
	it, err := r.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	n := 0
	var age time.Duration
	for n < StatsCountCap && it.Next() {
		if n == 0 {
			v, err := r.Get(ctx, it.Value())
			if err == nil {
				if s, derr := decodeItem(it.Value(), v); derr == nil {
					age = max(0, now.Sub(time.Unix(s.ts, 0)))
				}
			} else if !errors.Is(err, storage.ErrNotFound) {
				return 0, 0, err
			}
		}
		n++
	}
	return n, age, it.Err()
}

// ttlBacklog counts, up to StatsCountCap, c's expiry index entries that have
// come due at now: its expired items the sweeper has yet to delete.
func ttlBacklog(ctx context.Context, r storage.Reader, c *Container, now int64) (int, error) {
	kinds := []struct {
		kind byte
		upto int64
	}{{keys.ExpiryByDeadline, now}}
	if *c.ttl > 0 {
		kinds = append(kinds, struct {
			kind byte
			upto int64
		}{keys.ExpiryByModified, now - *c.ttl})
	}
	n := 0
	for _, k := range kinds {
		prefix := keys.ExpiryKindPrefix(c.rid, k.kind)
		upper := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), uint64(k.upto+1))
		it, err := r.NewIterator(ctx, prefix, upper, false)
		if err != nil {
			return 0, err
		}
		for n < StatsCountCap && it.Next() {
			n++
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
