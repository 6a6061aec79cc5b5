package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/orrery-db/orrery/storage"
)

// BenchmarkItemGet counts what the engine's read of an item's record
// before its write costs Pebble, in a store shaped like the server's after
// a few seconds of its upsert benchmark: 10,000 items written over and over
// (itemKeysOf's keys, deleting each old version's feed and index entries),
// 60,000 writes (about 6 memtables), so that several flushed tables sit in
// L0 above the compacted levels. "present" reads items' records, "absent"
// the records of ids never written (a create's check). Per Get it reports
// the tables' filter checks that skipped a table (filter-skips) and that
// did not (filter-passes), block cache hits and misses and table cache
// hits and misses, all exact counts of Pebble's metrics for the same
// store; ns/op moves with the machine's load. The LSM's shape when reads
// start is printed (tables and sublevels per level, memtables).
// ORRERY_BENCH_PEBBLE_TUNE names other settings (see itemWriteTunes);
// ORRERY_BENCH_PEBBLE_GET=iter-l6 reads through an iterator that checks
// the last level's filters, which Pebble's Get never does.
func BenchmarkItemGet(b *testing.B) {
	for _, absent := range []bool{false, true} {
		name := "present"
		if absent {
			name = "absent"
		}
		b.Run(name, func(b *testing.B) { benchItemGet(b, absent) })
	}
}

func benchItemGet(b *testing.B, absent bool) {
	ctx := b.Context()
	opts := Options{NoSync: true}
	if name := os.Getenv("ORRERY_BENCH_PEBBLE_TUNE"); name != "" {
		tune, ok := itemWriteTunes[name]
		if !ok {
			b.Fatalf("ORRERY_BENCH_PEBBLE_TUNE: no settings named %q", name)
		}
		tune(&opts)
	}
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	value := make([]byte, 600)
	for i := range value {
		value[i] = byte('a' + i%23)
	}
	const items, writes = 10_000, 60_000
	var ks, old [][]byte
	var ops []benchOp
	var m0 *pebbledb.Metrics
	for n := uint64(1); n <= writes; n++ {
		ks = itemKeysOf(ks[:0], n%items, n, layoutToday)
		ops, old = itemOps(ops[:0], old, ks, n, items, false, layoutToday, value)
		bt := batchOf(b, s, ops)
		if err := bt.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	// Let the flushes and compactions under way end: the counts are then
	// those of one shape.
	if err := waitCompactions(s); err != nil {
		b.Fatal(err)
	}
	m0 = s.db.Metrics()
	shape := fmt.Sprintf("memtables %d", m0.MemTable.Count)
	for i := range m0.Levels {
		if l := m0.Levels[i]; l.TablesCount > 0 {
			shape += fmt.Sprintf(", L%d %d tables %d sublevels", i, l.TablesCount, l.Sublevels)
		}
	}
	b.Log(shape)
	// The keys read, built before the timer: present items' records, or
	// records of ids no write used.
	keys := make([][]byte, items)
	for i := range keys {
		id := uint64(i) * 7919 % items
		if absent {
			id += items
		}
		keys[i] = itemKeysOf(nil, id, 1, layoutToday)[0]
	}
	get := func(k []byte) error { _, err := s.Get(ctx, k); return err }
	if os.Getenv("ORRERY_BENCH_PEBBLE_GET") == "iter-l6" {
		// A Get through an iterator that reads L6 tables' filters (Pebble's
		// own Get never does).
		get = func(k []byte) error {
			it, err := s.db.NewIter(&pebbledb.IterOptions{UseL6Filters: true})
			if err != nil {
				return err
			}
			defer it.Close()
			if !it.SeekPrefixGE(k) || !bytes.Equal(it.Key(), k) {
				return storage.ErrNotFound
			}
			v, err := it.ValueAndErr()
			_ = append([]byte(nil), v...)
			return err
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := get(keys[i%items])
		if absent != errors.Is(err, storage.ErrNotFound) {
			b.Fatalf("get: %v", err)
		}
	}
	b.StopTimer()
	m := s.db.Metrics()
	per := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(per(m.Filter.Hits-m0.Filter.Hits), "filter-skips/op")
	b.ReportMetric(per(m.Filter.Misses-m0.Filter.Misses), "filter-passes/op")
	b.ReportMetric(per(m.BlockCache.Hits-m0.BlockCache.Hits), "block-hits/op")
	b.ReportMetric(per(m.BlockCache.Misses-m0.BlockCache.Misses), "block-misses/op")
	b.ReportMetric(per(m.FileCache.Hits-m0.FileCache.Hits), "file-hits/op")
	b.ReportMetric(per(m.FileCache.Misses-m0.FileCache.Misses), "file-misses/op")
	b.ReportMetric(float64(m.ReadAmp()), "read-amp")
}

// waitCompactions waits until s has no flush or compaction under way.
func waitCompactions(s *Store) error {
	for {
		m := s.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}
