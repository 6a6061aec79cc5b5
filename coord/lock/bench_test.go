package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/orrery-db/orrery/coord/lock"
)

// BenchmarkAcquireRelease is the latency of an uncontended TryAcquire and
// Release: two point reads and a two-operation batch, then a conditional
// delete.
func BenchmarkAcquireRelease(b *testing.B) {
	c := client(b, nil)
	l := lock.New(lockContainer(b, c, newDB(b, c)))
	ctx := context.Background()
	opts := &lock.Options{TTL: 10 * time.Second}
	b.ResetTimer()
	for b.Loop() {
		h, err := l.TryAcquire(ctx, "bench", opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContended is the throughput of critical sections on one name
// with 16 goroutines contending (Acquire with backoff, then Release).
func BenchmarkContended(b *testing.B) {
	c := client(b, nil)
	l := lock.New(lockContainer(b, c, newDB(b, c)))
	ctx := context.Background()
	opts := &lock.Options{TTL: 10 * time.Second, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	b.SetParallelism(8) // 8 × GOMAXPROCS goroutines
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h, err := l.Acquire(ctx, "bench", opts)
			if err != nil {
				b.Error(err)
				return
			}
			if err := h.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sections/s")
}
