package pkranges

import (
	"math/big"
	"strconv"
	"strings"
)

// Range is one physical partition key range of a container: the items
// whose effective partition key lies in [MinInclusive, MaxExclusive), as
// upper-case hex ("" and "FF" are the ends of the key space).
type Range struct {
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

// Set is a container's current ranges, stored in its catalog record.
type Set struct {
	// Version counts the changes of the set: 1 at creation, one more per split.
	Version uint64 `json:"version"`
	// NextID is the id the next range made gets.
	NextID int `json:"next"`
	// Ranges are the current ranges in key order; together they cover the
	// key space without gaps or overlaps.
	Ranges []Range `json:"ranges"`
}

// Single is the range set of a container created with one range (and of
// containers stored before ranges were recorded).
var Single = &Set{Version: 1, NextID: 1, Ranges: []Range{{ID: "0", MinInclusive: "", MaxExclusive: "FF", Version: 1}}}

// epkSpace is the end of the effective partition keys hash partitioning V2
// produces: their top two bits are clear, so every key is below 2^126.
var epkSpace = new(big.Int).Lsh(big.NewInt(1), 126)

// New cuts the key space into n ranges of equal width, made at ts.
func New(n int, ts int64) *Set {
	if n <= 1 {
		return Single
	}
	set := &Set{Version: 1, NextID: n}
	lower := ""
	for i := range n {
		upper := "FF"
		if i < n-1 {
			b := new(big.Int).Mul(epkSpace, big.NewInt(int64(i+1)))
			upper = FormatBoundary(b.Div(b, big.NewInt(int64(n))))
		}
		set.Ranges = append(set.Ranges, Range{ID: strconv.Itoa(i), MinInclusive: lower, MaxExclusive: upper, Version: 1, TS: ts})
		lower = upper
	}
	return set
}

// FormatBoundary renders a point of the key space as 32 hex digits.
func FormatBoundary(v *big.Int) string {
	s := strings.ToUpper(v.Text(16))
	return strings.Repeat("0", max(32-len(s), 0)) + s
}

// ParseBoundary reads a range boundary as a point of the key space; the
// upper end "FF" is the end of the V2 space.
func ParseBoundary(s string, upper bool) (*big.Int, bool) {
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
