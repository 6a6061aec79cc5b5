package pebble

import (
	"context"
	"errors"
	"fmt"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/orrery-db/orrery/storage"
)

// TestFiltersOnlyWhereGetsReadThem: tables above the last level carry a
// bloom filter, which a Get of a key they do not hold (every create reads
// its new id first) checks instead of their blocks; tables of the last
// level carry none, as Pebble's Get never reads a last-level table's
// filter (only iterators that ask for them do, and the store opens none
// that ask), so that a compaction into it would build one for nothing.
func TestFiltersOnlyWhereGetsReadThem(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{InMemory: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(from, to int) { setKeys(t, s, from, to, "k%08d", []byte("v")) }
	// The first keys compacted into the last level, twice (the first
	// compaction may move the flushed table as it is, filter and all; the
	// second merges the table over it), the next flushed into L0 over them.
	for range 2 {
		write(0, 1000)
		if err := s.db.Compact(ctx, []byte("k"), []byte("l"), true); err != nil {
			t.Fatal(err)
		}
	}
	write(1000, 2000)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := s.db.SSTables(pebbledb.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	last := len(levels) - 1
	if len(levels[0]) == 0 || len(levels[last]) == 0 {
		t.Fatalf("tables per level %v, want some in L0 and in L%d", tablesPerLevel(levels), last)
	}
	for l, tables := range levels {
		for _, tb := range tables {
			name := tb.Properties.FilterPolicyName
			if l == last && name != "" {
				t.Errorf("a table of the last level carries a filter (%s)", name)
			}
			if l < last && name == "" {
				t.Errorf("a table of L%d carries no filter", l)
			}
		}
	}
	// A Get of a key within the L0 table's bounds that it does not hold
	// is answered by its filter.
	before := s.db.Metrics().Filter
	for i := range 100 {
		_, err := s.Get(ctx, fmt.Appendf(nil, "k%08d.", 1000+i))
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("get of a key never written: %v", err)
		}
	}
	after := s.db.Metrics().Filter
	if skips := after.Hits - before.Hits; skips < 90 {
		t.Errorf("100 gets of absent keys: %d skipped a table by its filter, want at least 90", skips)
	}
	// A Get of a key of the last level still finds it.
	if v, err := s.Get(ctx, []byte("k00000042")); err != nil || string(v) != "v" {
		t.Errorf("get of a key in the last level: %q, %v", v, err)
	}
}

func tablesPerLevel(levels [][]pebbledb.SSTableInfo) []int {
	n := make([]int, len(levels))
	for i, l := range levels {
		n[i] = len(l)
	}
	return n
}

// TestTablesOfAFewMegabytesHaveOneIndexBlock: a table the size of those
// the store flushes and compacts keeps its index in one block, so that a
// Get reads one index block per table, not a top-level index and then a
// second-level one (Pebble's two-level index, past its index block size).
func TestTablesOfAFewMegabytesHaveOneIndexBlock(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{InMemory: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 100)
	for i := range 30 {
		setKeys(t, s, i*1000, (i+1)*1000, "D\x00\x00\x00\x01item-%08d", value)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := s.db.SSTables(pebbledb.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	var tables int
	for l, ts := range levels {
		for _, tb := range ts {
			tables++
			if tb.Properties.IndexPartitions != 0 {
				t.Errorf("a table of L%d (%d bytes, %d data blocks) has a two-level index of %d partitions",
					l, tb.Size, tb.Properties.NumDataBlocks, tb.Properties.IndexPartitions)
			}
		}
	}
	if tables == 0 {
		t.Fatal("no table after a flush")
	}
	if v, err := s.Get(ctx, []byte("D\x00\x00\x00\x01item-00012345")); err != nil || len(v) != len(value) {
		t.Errorf("get of a flushed key: %d bytes, %v", len(v), err)
	}
}
