package engine

import (
	"context"
	"math/big"
	"strconv"

	"github.com/orrery-db/orrery/engine/internal/pkey"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
)

// Partition key ranges. Items are stored in effective-partition-key order, so
// a physical partition key range is a span of keys: ranges are metadata over
// that key space, kept in the container's catalog record. A container starts
// with as many ranges as the service gives its throughput
// (initialRangeCount; or Options.PartitionKeyRanges when that is more), cut
// evenly over the space of its hash partitioning version; a split replaces
// one range by two children whose parents name it. The change
// feed numbers every change of a container in one sequence, so a child range
// resumes from its parent's continuation as is: it reads the same positions,
// restricted to its own keys.

// SplitPartitionKeyRange splits one of a container's current ranges in two at
// the middle of its key span and returns the two children. From then on the
// parent's id answers 410/1002 to range-scoped requests, and the children,
// whose parents name it, continue its change feed from any of its
// continuations.
func (e *Engine) SplitPartitionKeyRange(ctx context.Context, dbName, collName, id string) ([]PartitionKeyRange, error) {
	if err := e.catMu.Lock(ctx); err != nil {
		return nil, err
	}
	defer e.catMu.Unlock()
	prev, lerr := e.lookupContainer(dbName, collName)
	if lerr != nil {
		return nil, lerr
	}
	set := prev.ranges()
	parent, perr := prev.partitionKeyRange(id)
	if perr != nil {
		return nil, perr
	}
	v1 := prev.hashV1()
	var cut string
	if v1 {
		// A V1 range is cut at the middle hash of its span, as the service
		// cuts it; its items stay where they are (a V1 container's ranges
		// share one place, see placeRanges).
		lo, ok1 := pkey.V1BoundaryHash(parent.MinInclusive)
		hi, ok2 := pkey.V1BoundaryHash(parent.MaxExclusive)
		mid := uint32((uint64(lo) + uint64(hi)) / 2)
		if !ok1 || !ok2 || mid <= lo || mid >= hi {
			return nil, BadRequest("The partition key range %q is too narrow to split.", id)
		}
		cut = pkey.Hex(pkey.V1Boundary(mid))
	} else {
		lo, ok1 := pkranges.ParseBoundary(parent.MinInclusive, false)
		hi, ok2 := pkranges.ParseBoundary(parent.MaxExclusive, true)
		mid := new(big.Int).Add(lo, hi)
		mid.Rsh(mid, 1)
		if !ok1 || !ok2 || mid.Cmp(lo) <= 0 || mid.Cmp(hi) >= 0 {
			return nil, BadRequest("The partition key range %q is too narrow to split.", id)
		}
		cut = pkranges.FormatBoundary(mid)
	}
	version := set.Version + 1
	parents := append(append([]string(nil), parent.Parents...), parent.ID)
	lsn, err := e.seq.watermark(ctx)
	if err != nil {
		return nil, err
	}
	ts := e.now().Unix()
	children := []PartitionKeyRange{
		{ID: strconv.Itoa(set.NextID), MinInclusive: parent.MinInclusive, MaxExclusive: cut, Parents: parents, Version: version, LSN: lsn, TS: ts, Place: parent.Place},
		{ID: strconv.Itoa(set.NextID + 1), MinInclusive: cut, MaxExclusive: parent.MaxExclusive, Parents: parents, Version: version, LSN: lsn, TS: ts, Place: parent.Place},
	}
	// On several databases the second child moves to the next one.
	var finish func(context.Context) error
	if n := e.seam.placeCount(); n > 1 && !v1 {
		from := parent.Place % n
		children[1].Place = (from + 1) % n
		moving := epkBounds{min: mustEPKBound(cut)}
		if parent.MaxExclusive != "FF" {
			moving.max = mustEPKBound(parent.MaxExclusive)
		}
		if finish, err = e.shared.moveRange(ctx, prev, moving, from, children[1].Place, e.log); err != nil {
			return nil, err
		}
	}
	next := &pkranges.Set{Version: version, NextID: set.NextID + 2}
	for _, r := range set.Ranges {
		if r.ID == id {
			next.Ranges = append(next.Ranges, children...)
		} else {
			next.Ranges = append(next.Ranges, r)
		}
	}
	rec := prev.record
	rec.Ranges = next
	b, err := e.catalogBatch()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	c, err := e.storeContainer(b, prev.db, rec)
	if err != nil {
		return nil, err
	}
	if err := b.Commit(ctx); err != nil {
		return nil, err
	}
	if finish != nil {
		if err := finish(ctx); err != nil {
			// The old copy stays, passed over by reads.
			e.log.Warn("deleting a moved range's old copy failed", "error", err)
		}
	}
	c.indexRetired.Store(prev.indexRetired.Load())
	prev.db.colls[c.ID] = c
	// Writers holding the previous snapshot start over with this one, so a
	// later replace that retires it reaches them.
	prev.retired.Store(true)
	return children, nil
}
