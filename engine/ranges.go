package engine

import (
	"bytes"
	"context"
	"encoding/hex"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/pkey"
	"github.com/orrery-db/orrery/engine/internal/rids"
	"github.com/orrery-db/orrery/storage"
)

// Partition key ranges. Items are stored in effective-partition-key order, so
// a physical partition key range is a span of keys: ranges are metadata over
// that key space, kept in the container's catalog record. A container starts
// with as many ranges as the service gives its throughput (rangeCount; or
// Options.PartitionKeyRanges when that is more), cut evenly over the space
// of its hash partitioning version; a
// split replaces one range by two children whose parents name it. The change
// feed numbers every change of a container in one sequence, so a child range
// resumes from its parent's continuation as is: it reads the same positions,
// restricted to its own keys.

// RUPerPartitionKeyRange is the throughput one physical range serves, as the
// service counts it: a container created with more gets more ranges.
const RUPerPartitionKeyRange = 10000

// ruPerNewManualRange is what the service provisions a physical partition
// for when a container is created with more manual throughput than one
// range serves: ⌈RU/s ÷ 6,000⌉ ranges, so that each has room to grow (the
// JavaScript SDK's suite relies on it: its V1 container of 21,000 RU/s has
// four ranges). Autoscale gets one range per 10,000 RU/s of its maximum.
const ruPerNewManualRange = 6000

// maxInitialRanges bounds the ranges a container is created with.
const maxInitialRanges = 256

// SubStatusPartitionKeyRangeGone: the partition key range of a range-scoped
// request was split (or never existed); the SDKs refresh their routing.
const SubStatusPartitionKeyRangeGone = 1002

// PartitionKeyRange is one physical partition key range of a container: the
// items whose effective partition key lies in [MinInclusive, MaxExclusive),
// as upper-case hex ("" and "FF" are the ends of the key space).
type PartitionKeyRange struct {
	// ID is the range's id: "0", "1", …; a split's children get the next
	// unused ones, so an id never comes back.
	ID string `json:"id"`
	// MinInclusive and MaxExclusive bound its effective partition keys.
	MinInclusive string `json:"min"`
	MaxExclusive string `json:"max"`
	// Parents are the ids of the ranges this one descends from, oldest
	// first, as the service lists them.
	Parents []string `json:"parents,omitempty"`
	// Version is the container's range version that made this range.
	Version uint64 `json:"version"`
	// LSN is the container sequence number when the range was made.
	LSN uint64 `json:"lsn,omitempty"`
	// TS is when the range was made (Unix seconds).
	TS int64 `json:"ts,omitempty"`
	// Place is the database (of a store over several) the range's items
	// live in (engine/placement.go).
	Place int `json:"place,omitempty"`
}

// rangeSet is a container's current ranges, stored in its catalog record.
type rangeSet struct {
	// Version counts the changes of the set: 1 at creation, one more per split.
	Version uint64 `json:"version"`
	// NextID is the id the next range made gets.
	NextID int `json:"next"`
	// Ranges are the current ranges in key order; together they cover the
	// key space without gaps or overlaps.
	Ranges []PartitionKeyRange `json:"ranges"`
}

// singleRange is the range set of a container created with one range (and
// of containers stored before ranges were recorded).
var singleRange = &rangeSet{Version: 1, NextID: 1, Ranges: []PartitionKeyRange{{ID: "0", MinInclusive: "", MaxExclusive: "FF", Version: 1}}}

// epkSpace is the end of the effective partition keys hash partitioning V2
// produces: their top two bits are clear, so every key is below 2^126.
var epkSpace = new(big.Int).Lsh(big.NewInt(1), 126)

// newRangeSet cuts the key space into n ranges of equal width.
func newRangeSet(n int, ts int64) *rangeSet {
	if n <= 1 {
		return singleRange
	}
	set := &rangeSet{Version: 1, NextID: n}
	lower := ""
	for i := range n {
		upper := "FF"
		if i < n-1 {
			b := new(big.Int).Mul(epkSpace, big.NewInt(int64(i+1)))
			upper = formatEPKBoundary(b.Div(b, big.NewInt(int64(n))))
		}
		set.Ranges = append(set.Ranges, PartitionKeyRange{ID: strconv.Itoa(i), MinInclusive: lower, MaxExclusive: upper, Version: 1, TS: ts})
		lower = upper
	}
	return set
}

// newRangeSetV1 cuts the key space of hash partitioning V1 into n ranges
// as the service cuts it: the 32-bit hash space in n equal slices, range i
// starting at the hash i·⌊(2³²−1)/n⌋ written as a V1 number.
func newRangeSetV1(n int, ts int64) *rangeSet {
	if n <= 1 {
		return singleRange
	}
	set := &rangeSet{Version: 1, NextID: n}
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

// rangeCount is how many ranges a container created with t gets.
func (e *Engine) rangeCount(t *Throughput) int {
	n := max(e.opts.PartitionKeyRanges, 1)
	switch {
	case t == nil:
	case t.Manual > RUPerPartitionKeyRange:
		n = max(n, (t.Manual+ruPerNewManualRange-1)/ruPerNewManualRange)
	default:
		ru := max(t.Manual, t.AutoscaleMax)
		n = max(n, (ru+RUPerPartitionKeyRange-1)/RUPerPartitionKeyRange)
	}
	return min(n, maxInitialRanges)
}

// hashV2 reports whether container properties use hash partitioning V2. The
// engine orders items by the V2 hash whatever the version, but clients route
// by the version the container declares: a V1 container's ranges are cut in
// the V1 space (newRangeSetV1) and an item belongs to the range holding its
// V1 effective partition key (Container.rangeEPK), so a range-scoped read
// filters the items it scans instead of narrowing the scan.
func hashV2(props map[string]any) bool {
	pk, _ := props["partitionKey"].(map[string]any)
	v, _ := pk["version"].(float64)
	return v == 2
}

// formatEPKBoundary renders a point of the key space as 32 hex digits.
func formatEPKBoundary(v *big.Int) string {
	s := strings.ToUpper(v.Text(16))
	return strings.Repeat("0", max(32-len(s), 0)) + s
}

// parseEPKBoundary reads a range boundary as a point of the key space; the
// upper end "FF" is the end of the V2 space.
func parseEPKBoundary(s string, upper bool) (*big.Int, bool) {
	switch {
	case s == "":
		return new(big.Int), true
	case upper && strings.EqualFold(s, "FF"):
		return new(big.Int).Set(epkSpace), true
	}
	if len(s) < 32 {
		s += strings.Repeat("0", 32-len(s))
	}
	v, ok := new(big.Int).SetString(s[:32], 16)
	return v, ok
}

// ranges returns the container's range set.
func (c *Container) ranges() *rangeSet {
	if c.record.Ranges == nil {
		return singleRange
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
// hash partitioning V1, which is not the order of its item keys.
func (c *Container) hashV1() bool { return c.pk.Version == 1 }

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
	if !hashV2(prev.record.Props) {
		return nil, BadRequest("Container '%s' uses hash partitioning version 1: its partition key ranges are not split. Create it with partitionKey.version 2 to split its ranges.", prev.ID)
	}
	lo, ok1 := parseEPKBoundary(parent.MinInclusive, false)
	hi, ok2 := parseEPKBoundary(parent.MaxExclusive, true)
	mid := new(big.Int).Add(lo, hi)
	mid.Rsh(mid, 1)
	if !ok1 || !ok2 || mid.Cmp(lo) <= 0 || mid.Cmp(hi) >= 0 {
		return nil, BadRequest("The partition key range %q is too narrow to split.", id)
	}
	version := set.Version + 1
	parents := append(append([]string(nil), parent.Parents...), parent.ID)
	lsn, err := e.seq.watermark(ctx)
	if err != nil {
		return nil, err
	}
	ts := e.now().Unix()
	cut := formatEPKBoundary(mid)
	children := []PartitionKeyRange{
		{ID: strconv.Itoa(set.NextID), MinInclusive: parent.MinInclusive, MaxExclusive: cut, Parents: parents, Version: version, LSN: lsn, TS: ts, Place: parent.Place},
		{ID: strconv.Itoa(set.NextID + 1), MinInclusive: cut, MaxExclusive: parent.MaxExclusive, Parents: parents, Version: version, LSN: lsn, TS: ts, Place: parent.Place},
	}
	// On several databases the second child moves to the next one.
	var finish func(context.Context) error
	if n := e.placeCount(); n > 1 {
		from := parent.Place % n
		children[1].Place = (from + 1) % n
		moving := epkBounds{min: mustEPKBound(cut)}
		if parent.MaxExclusive != "FF" {
			moving.max = mustEPKBound(parent.MaxExclusive)
		}
		if finish, err = e.moveRange(ctx, prev, moving, from, children[1].Place); err != nil {
			return nil, err
		}
	}
	next := &rangeSet{Version: version, NextID: set.NextID + 2}
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
