package pebble

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// openBench opens a synced store on a real temporary directory.
func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// commitOne commits one small synced write of key n.
func commitOne(ctx context.Context, s *Store, n uint64, value []byte) error {
	var key [16]byte
	copy(key[:], "bench/")
	binary.BigEndian.PutUint64(key[8:], n)
	bt := s.NewBatch()
	defer bt.Close()
	if err := bt.Set(key[:], value); err != nil {
		return err
	}
	return bt.Commit(ctx)
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkCommit measures small committed, fsynced writes from one writer
// and from 32 concurrent writers, whose fsyncs the commit pipeline groups.
func BenchmarkCommit(b *testing.B) {
	ctx := b.Context()
	value := make([]byte, 200)
	b.Run("writers=1", func(b *testing.B) {
		s := openBench(b)
		b.ResetTimer()
		for i := range b.N {
			if err := commitOne(ctx, s, uint64(i), value); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	b.Run("writers=32", func(b *testing.B) {
		s := openBench(b)
		var next atomic.Uint64
		// RunParallel starts parallelism × GOMAXPROCS goroutines.
		b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := commitOne(ctx, s, next.Add(1), value); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
}

// BenchmarkCommitPipelined measures small pipelined writes (applied, then
// waited for their fsync) from 32 concurrent writers, as the engine commits
// an item write; its allocations per write are the store's own. It reports
// the process's CPU per write (cpu-µs/op, Pebble's background work
// included) and the write-ahead log syncs per write (syncs/op: below 1 as
// concurrent writes share a sync), with syncs at once and with least
// intervals between syncs (Options.WALMinSyncInterval).
func BenchmarkCommitPipelined(b *testing.B) {
	for _, interval := range []time.Duration{0, 500 * time.Microsecond, time.Millisecond} {
		b.Run(fmt.Sprintf("min-sync-interval=%v", interval), func(b *testing.B) {
			benchCommitPipelined(b, Options{WALMinSyncInterval: interval})
		})
	}
}

func benchCommitPipelined(b *testing.B, opts Options) {
	ctx := b.Context()
	value := make([]byte, 200)
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var next atomic.Uint64
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	syncs0, cpu0 := walSyncs(s.db.Metrics()), processCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var key [16]byte
		copy(key[:], "bench/")
		for pb.Next() {
			binary.BigEndian.PutUint64(key[8:], next.Add(1))
			bt := s.NewBatch()
			err := bt.Set(key[:], value)
			var wait func() error
			if err == nil {
				wait, err = bt.CommitPipelined(ctx)
			}
			if err == nil {
				err = wait()
			}
			bt.Close()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(walSyncs(s.db.Metrics())-syncs0)/float64(b.N), "syncs/op")
	reportRate(b)
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGet measures point reads of existing keys among 10,000.
func BenchmarkGet(b *testing.B) {
	ctx := b.Context()
	const keys = 10_000
	s := openBench(b)
	bt := s.NewBatch()
	value := make([]byte, 200)
	for i := range keys {
		if err := bt.Set(fmt.Appendf(nil, "key/%06d", i), value); err != nil {
			b.Fatal(err)
		}
	}
	if err := bt.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	bt.Close()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Get(ctx, fmt.Appendf(nil, "key/%06d", i*7919%keys)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
}

// BenchmarkScan measures reading a 100-key prefix range.
func BenchmarkScan(b *testing.B) {
	ctx := b.Context()
	s := openBench(b)
	bt := s.NewBatch()
	for i := range 100 {
		if err := bt.Set(fmt.Appendf(nil, "p/%03d", i), make([]byte, 200)); err != nil {
			b.Fatal(err)
		}
	}
	if err := bt.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	bt.Close()
	prefix := []byte("p/")
	b.ResetTimer()
	for range b.N {
		it, err := s.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		if err := it.Close(); err != nil || n != 100 {
			b.Fatalf("scanned %d keys, err %v", n, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "scans/s")
}
