package engine

import (
	"encoding/binary"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

// The expiry index (keys.Expiry) names the items the TTL sweep deletes, by
// the time they expire. Only what the container's defaultTtl can make
// expire has an entry: nothing in a container with TTL off (an item's own
// ttl is ignored there), only the items with their own ttl under a
// defaultTtl of -1, and under a defaultTtl of n seconds also the items that
// inherit it, by their modification time. A write of an item in a container
// without TTL so writes no expiry key, and a replace deletes and writes
// none.
//
// A replace of the container that changes what its defaultTtl keeps builds
// the index again from the items (rebuildExpiry in rebuild.go), holding
// every partition's lock as an indexing policy's rebuild does: the batch
// that stores the new defaultTtl marks the container (keys.ExpiryRebuild)
// and the build's last batch removes the mark, so a build a crash cut short
// is done again at the next Open (upgradeExpiry, which also upgrades a store
// of layout format 2). Reads, queries and the feeds hide an expired item by
// its record whatever its index holds: the index only tells the sweep (and
// BM25's statistics, expiredSpans) which items to look at.

// expiryMode is what a container's expiry index holds.
type expiryMode uint8

const (
	expiryOff       expiryMode = iota // no defaultTtl: no entries
	expiryDeadlines                   // defaultTtl -1: items with their own ttl, by deadline
	expiryAll                         // defaultTtl n > 0: also items inheriting it, by modification time
)

// expiryModeOf is the expiry mode of a container whose defaultTtl is ttl.
func expiryModeOf(ttl *int64) expiryMode {
	switch {
	case ttl == nil:
		return expiryOff
	case *ttl > 0:
		return expiryAll
	default:
		return expiryDeadlines
	}
}

// defaultTTLOf is the defaultTtl of a container's properties, as Container
// keeps it.
func defaultTTLOf(props map[string]any) *int64 {
	if v, ok := props["defaultTtl"].(float64); ok {
		n := int64(v)
		return &n
	}
	return nil
}

// expiryKeyOf is it's entry in c's expiry index, nil when it has none: its
// container's TTL is off, it never expires (ttl -1), or it inherits a
// defaultTtl of -1.
func (c *Container) expiryKeyOf(it *storedItem) []byte {
	if it == nil || it.ttl == -1 {
		return nil
	}
	switch mode := expiryModeOf(c.ttl); {
	case mode == expiryOff:
		return nil
	case it.ttl > 0:
		return keys.ExpiryKey(c.rid, keys.ExpiryByDeadline, it.ts+int64(it.ttl), binary.BigEndian.AppendUint64(nil, it.rid))
	case mode == expiryAll:
		return keys.ExpiryKey(c.rid, keys.ExpiryByModified, it.ts, binary.BigEndian.AppendUint64(nil, it.rid))
	}
	return nil
}
