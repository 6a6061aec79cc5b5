package engine

import (
	"bytes"
	"encoding/hex"
	"strconv"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// A request scoped to a partition key range: the container's current
// ranges (engine/internal/pkranges holds the set), the 410 for a range
// that is gone, and the bounds of effective partition keys a range and the
// x-ms-start-epk/x-ms-end-epk headers put on a read, a query or a feed.
// Splits are in ranges.go; how many ranges a new container gets, in
// containers.go (rangeCount).

// RUPerPartitionKeyRange is the throughput one physical range serves, as the
// service counts it: a container created with more gets more ranges.
const RUPerPartitionKeyRange = 10000

// maxInitialRanges bounds the ranges a container is created with.
const maxInitialRanges = 256

// SubStatusPartitionKeyRangeGone: the partition key range of a range-scoped
// request was split (or never existed); the SDKs refresh their routing.
const SubStatusPartitionKeyRangeGone = 1002

// PartitionKeyRange is one physical partition key range of a container
// (see engine/internal/pkranges).
type PartitionKeyRange = pkranges.Range

// ranges returns the container's range set.
func (c *Container) ranges() *pkranges.Set {
	if c.record.Ranges == nil {
		return pkranges.Single
	}
	return c.record.Ranges
}

// PartitionKeyRanges returns the container's current partition key ranges in
// key order, and the version of that set (it grows with every split).
func (c *Container) PartitionKeyRanges() ([]PartitionKeyRange, uint64) {
	set := c.ranges()
	return set.Ranges, set.Version
}

// PartitionKeyRangeRID is the RID of one of the container's ranges.
func (c *Container) PartitionKeyRangeRID(id string) string {
	n, _ := strconv.ParseUint(id, 10, 32)
	return rids.Encode(rids.Child(c.rid, 2<<56|n))
}

// PartitionKeyRangeGone is the error for a request scoped to a range the
// container no longer has (410, substatus 1002).
func PartitionKeyRangeGone(id string) *Error {
	return &Error{Status: 410, SubStatus: SubStatusPartitionKeyRangeGone, Code: "Gone",
		Message: "The partition key range " + strconv.Quote(id) + " is gone: it was split, or never existed. Read the container's partition key ranges again."}
}

// partitionKeyRange finds a current range by id.
func (c *Container) partitionKeyRange(id string) (*PartitionKeyRange, *Error) {
	set := c.ranges()
	for i := range set.Ranges {
		if set.Ranges[i].ID == id {
			return &set.Ranges[i], nil
		}
	}
	return nil, PartitionKeyRangeGone(id)
}

// epkBounds restricts a request to the items whose effective partition key is
// in [min, max); nil ends are unbounded.
type epkBounds struct {
	min, max []byte
}

// requestBounds resolves a request's range scope: the range rangeID names
// (410/1002 when it is not current), narrowed by x-ms-start-epk and
// x-ms-end-epk.
func (c *Container) requestBounds(rangeID, minEPK, maxEPK string) (epkBounds, *Error) {
	var b epkBounds
	var err *Error
	if b.min, err = parseEPKBound(minEPK, "x-ms-start-epk"); err != nil {
		return b, err
	}
	if b.max, err = parseEPKBound(maxEPK, "x-ms-end-epk"); err != nil {
		return b, err
	}
	if rangeID == "" {
		return b, nil
	}
	r, err := c.partitionKeyRange(rangeID)
	if err != nil {
		return b, err
	}
	lo, _ := parseEPKBound(r.MinInclusive, "minInclusive")
	if lo != nil && (b.min == nil || bytes.Compare(lo, b.min) > 0) {
		b.min = lo
	}
	if r.MaxExclusive != "FF" {
		hi, _ := parseEPKBound(r.MaxExclusive, "maxExclusive")
		if b.max == nil || bytes.Compare(hi, b.max) < 0 {
			b.max = hi
		}
	}
	return b, nil
}

// unbounded reports whether b lets every key through.
func (b epkBounds) unbounded() bool { return b.min == nil && b.max == nil }

// containsEPK reports whether an effective partition key is in bounds. Keys
// longer than a bound (hierarchical keys) compare as if the bound were padded
// with zeros, as the SDKs compare them.
func (b epkBounds) containsEPK(epk []byte) bool {
	if b.min != nil && bytes.Compare(epk, b.min) < 0 {
		return false
	}
	return b.max == nil || bytes.Compare(epk, b.max) < 0
}

// keyRange narrows the item key span [lower, upper) of scope to the bounds.
// Item keys are the container prefix, the EPK, then the rest, so an EPK
// bound is a key bound.
func (c *Container) keyRange(scope []byte, b epkBounds) (lower, upper []byte) {
	lower, upper = scope, storage.PrefixEnd(scope)
	base := keys.ItemContainerPrefix(c.rid)
	if b.min != nil {
		if k := append(base[:len(base):len(base)], b.min...); bytes.Compare(k, lower) > 0 {
			lower = k
		}
	}
	if b.max != nil {
		if k := append(base[:len(base):len(base)], b.max...); bytes.Compare(k, upper) < 0 {
			upper = k
		}
	}
	if bytes.Compare(lower, upper) > 0 {
		upper = lower
	}
	return lower, upper
}

// mustEPKBound is a range boundary of the engine's own making as bytes.
func mustEPKBound(s string) []byte {
	b, _ := parseEPKBound(s, "boundary")
	return b
}

// HasPartitionKeyRange reports whether id names one of the container's
// current ranges.
func (c *Container) HasPartitionKeyRange(id string) bool {
	_, err := c.partitionKeyRange(id)
	return err == nil
}

func parseEPKBound(h, name string) ([]byte, *Error) {
	if h == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, BadRequest("The %s value %q is not a hexadecimal effective partition key.", name, h)
	}
	return b, nil
}

// hashV2 reports whether container properties use hash partitioning V2. The
// engine orders items by the V2 hash whatever the version, but clients route
// by the version the container declares, and the SDKs' V1 hashes differ from
// each other: so a V1 container keeps one range, where routing never matters.
func hashV2(props map[string]any) bool {
	pk, _ := props["partitionKey"].(map[string]any)
	v, _ := pk["version"].(float64)
	return v == 2
}
