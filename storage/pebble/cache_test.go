package pebble

import (
	"context"
	"fmt"
	"testing"
)

// TestBlockCacheHoldsBlocksBesideFullMemtables: once the memtables have
// grown to their full size, a table's blocks read once are read from the
// block cache again, not from the file: Pebble's memtables reserve their
// size in its block cache, and the store gives it room for both. The
// store's metrics count the hits and misses.
func TestBlockCacheHoldsBlocksBesideFullMemtables(t *testing.T) {
	ctx := context.Background()
	const memTable = 1 << 20
	s, err := Open(t.TempDir(), Options{InMemory: true, NoSync: true, CacheSize: memTable, MemTableSize: memTable})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Several memtables' worth, so that they grow to their full size, in
	// batches well under half a memtable (larger ones bypass memtables).
	value := make([]byte, 1000)
	for i := range 6 * memTable / len(value) / 100 {
		setKeys(t, s, i*100, (i+1)*100, "k%08d", value)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if r := s.db.Metrics().MemTable; r.Size+r.ZombieSize < memTable {
		t.Fatalf("memtables reserve %d bytes, want at least one full memtable (%d)", r.Size+r.ZombieSize, memTable)
	}
	key := []byte("k00000042")
	if _, err := s.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	hits := storeMetric(t, s, "orrery_storage_block_cache_hits_total")
	misses := storeMetric(t, s, "orrery_storage_block_cache_misses_total")
	const reads = 10
	for range reads {
		if _, err := s.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	hits = storeMetric(t, s, "orrery_storage_block_cache_hits_total") - hits
	misses = storeMetric(t, s, "orrery_storage_block_cache_misses_total") - misses
	if misses != 0 || hits < reads {
		t.Errorf("%d reads of a key read once already: %v block cache hits and %v misses, want at least %d hits and no miss",
			reads, hits, misses, reads)
	}
	if held := storeMetric(t, s, "orrery_storage_block_cache_bytes"); held == 0 {
		t.Error("the block cache holds no bytes after reads of a table")
	}
}

// setKeys commits, in one batch, the keys format gives numbers from to
// to (not included), each set to value.
func setKeys(t *testing.T, s *Store, from, to int, format string, value []byte) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	for i := from; i < to; i++ {
		if err := b.Set(fmt.Appendf(nil, format, i), value); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}
