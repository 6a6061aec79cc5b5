package memory

import (
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage"
)

// BenchmarkCommit measures one-key batches committed from parallel writers.
func BenchmarkCommit(b *testing.B) {
	ctx := b.Context()
	s := New()
	defer s.Close()
	value := make([]byte, 200)
	b.RunParallel(func(pb *testing.PB) {
		var key []byte
		for i := 0; pb.Next(); i++ {
			key = fmt.Appendf(key[:0], "key/%p/%09d", pb, i)
			bt := s.NewBatch()
			if err := bt.Set(key, value); err != nil {
				b.Error(err)
				return
			}
			if err := bt.Commit(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkGet measures point reads of existing keys among 10,000.
func BenchmarkGet(b *testing.B) {
	ctx := b.Context()
	const keys = 10_000
	s := New()
	defer s.Close()
	bt := s.NewBatch()
	for i := range keys {
		if err := bt.Set(fmt.Appendf(nil, "key/%06d", i), make([]byte, 200)); err != nil {
			b.Fatal(err)
		}
	}
	if err := bt.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Get(ctx, fmt.Appendf(nil, "key/%06d", i*7919%keys)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
}

// BenchmarkBatchScan measures a 100-key prefix scan through a batch that
// overwrites a tenth of the keys, so that the overlay merge is exercised.
func BenchmarkBatchScan(b *testing.B) {
	ctx := b.Context()
	s := New()
	defer s.Close()
	bt := s.NewBatch()
	for i := range 100 {
		if err := bt.Set(fmt.Appendf(nil, "p/%03d", i), make([]byte, 200)); err != nil {
			b.Fatal(err)
		}
	}
	if err := bt.Commit(ctx); err != nil {
		b.Fatal(err)
	}
	over := s.NewBatch()
	defer over.Close()
	for i := 0; i < 100; i += 10 {
		if err := over.Set(fmt.Appendf(nil, "p/%03d", i), []byte("new")); err != nil {
			b.Fatal(err)
		}
	}
	prefix := []byte("p/")
	b.ResetTimer()
	for range b.N {
		it, err := over.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
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
