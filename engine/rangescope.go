package engine

import (
	"bytes"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkey"
	"github.com/orrery-db/orrery/engine/internal/pkranges"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// A request scoped to a partition key range: the container's current
// ranges (engine/internal/pkranges holds the set), the 410 for a range
// that is gone, and the bounds of effective partition keys a range and the
// x-ms-start-epk/x-ms-end-epk headers put on a read, a query or a feed.
// Splits are in ranges.go; how many ranges a new container gets, in
// containers.go (initialRangeCount).

// RUPerPartitionKeyRange is the throughput one physical range serves, as the
// service counts it: a container created with more gets more ranges.
const RUPerPartitionKeyRange = 10000

// maxInitialRanges bounds the ranges a container is created with.
const maxInitialRanges = 256

// ruPerNewManualRange is what the service provisions a physical partition
// for when a container is created with more manual throughput than one
// range serves: ⌈RU/s ÷ 6,000⌉ ranges, so that each has room to grow (the
// JavaScript SDK's suite relies on it: its V1 container of 21,000 RU/s has
// four ranges). Autoscale gets one range per 10,000 RU/s of its maximum.
const ruPerNewManualRange = 6000

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

// partitionBounds is requestBounds for a request that may be scoped to one
// logical partition (scoped). For a V1 container such a request reads its
// partition whichever range it names: the SDKs disagree on the V1 hashes of
// some numbers (the Python SDK's of negative and large integers), so a range
// an SDK picked for the key is checked to exist but does not filter the
// partition's items.
func (c *Container) partitionBounds(scoped bool, rangeID, minEPK, maxEPK string) (epkBounds, *Error) {
	b, err := c.requestBounds(rangeID, minEPK, maxEPK)
	if err == nil && scoped && c.hashV1() {
		return epkBounds{}, nil
	}
	return b, err
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

// hashV1 reports whether the container's ranges are cut in the space of
// hash partitioning V1, which is not the order of its item keys: version 1,
// or no version at all (hierarchical keys always carry 2).
func (c *Container) hashV1() bool { return c.pk.Version != 2 }

// rangeEPK is the effective partition key that places the item with key
// key in the container's ranges: the one in the key for hash partitioning
// V2, the V1 one of its partition key otherwise (nil when the key is not
// an item key).
func (c *Container) rangeEPK(key []byte) []byte {
	if !c.hashV1() {
		return c.itemEPK(key)
	}
	_, pkEnc, ok := c.splitItemKey(key)
	if !ok {
		return nil
	}
	pk, err := pkey.ParseHeader(string(pkEnc))
	if err != nil {
		return nil
	}
	return pk.EPKV1()
}

// inBounds reports whether the item with key key is in bounds b.
func (c *Container) inBounds(b epkBounds, key []byte) bool {
	if b.unbounded() {
		return true
	}
	epk := c.rangeEPK(key)
	return epk != nil && b.containsEPK(epk)
}

// keyRange narrows the item key span [lower, upper) of scope to the bounds.
// Item keys are the container prefix, the EPK, then the rest, so an EPK
// bound is a key bound; the bounds of a V1 container are not (its items
// are filtered by inBounds instead).
func (c *Container) keyRange(scope []byte, b epkBounds) (lower, upper []byte) {
	lower, upper = scope, storage.PrefixEnd(scope)
	if c.hashV1() {
		return lower, upper
	}
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

// propsHashV1 is Container.hashV1 asked of a container's properties, where
// no parsed container is at hand yet (creation, placement). The engine
// orders items by the V2 hash whatever the version, but clients route by
// the version the container declares: a V1 container's ranges are cut in
// the V1 space (newRangeSetV1) and an item belongs to the range holding its
// V1 effective partition key (Container.rangeEPK), so a range-scoped read
// filters the items it scans instead of narrowing the scan.
func propsHashV1(props map[string]any) bool {
	pk, _ := props["partitionKey"].(map[string]any)
	v, _ := pk["version"].(float64)
	return v != 2
}

// newRangeSetV1 cuts the key space of hash partitioning V1 into n ranges
// as the service cuts it: the 32-bit hash space in n equal slices, range i
// starting at the hash i·⌊(2³²−1)/n⌋ written as a V1 number.
func newRangeSetV1(n int, ts int64) *pkranges.Set {
	if n <= 1 {
		return pkranges.Single
	}
	set := &pkranges.Set{Version: 1, NextID: n}
	lower, step := "", uint64(math.MaxUint32)/uint64(n)
	for i := range n {
		upper := "FF"
		if i < n-1 {
			upper = pkey.Hex(pkey.V1Boundary(uint32(step * uint64(i+1))))
		}
		set.Ranges = append(set.Ranges, PartitionKeyRange{ID: strconv.Itoa(i), MinInclusive: lower, MaxExclusive: upper, Version: 1, TS: ts})
		lower = upper
	}
	return set
}
