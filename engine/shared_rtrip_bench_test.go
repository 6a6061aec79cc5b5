package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/postgres"
	"github.com/orrery-db/orrery/storage/postgres/pgtest"
)

// BenchmarkSharedItemRequests measures item requests as the server makes
// them (itemRequest: the container's lookup, the operation, the session
// token) through one engine on PostgreSQL: a point read and an upsert of a
// 1 KB item by one client, and a patch of one hot item by 16 clients at
// once. It reports the median and 99th percentile latency.
func BenchmarkSharedItemRequests(b *testing.B) {
	ctx := b.Context()
	open := func(b *testing.B) *Engine {
		if err := pgtest.Available(); err != nil {
			b.Skip(err)
		}
		s, err := postgres.Open(context.Background(), pgtest.URL(b), postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return openTestEngine(b, s)
	}
	b.Run("PointRead", func(b *testing.B) {
		e := open(b)
		if _, err := e.CreateItem(ctx, req("", "p", string(benchBody("1", "p")))); err != nil {
			b.Fatal(err)
		}
		latencies(b, 1, func(int) error {
			_, _, err := itemRequest(ctx, e, func() (*ItemResult, error) { return e.ReadItem(ctx, req("1", "p", "")) })
			return err
		})
	})
	b.Run("Upsert", func(b *testing.B) {
		e := open(b)
		latencies(b, 1, func(i int) error {
			body := string(benchBody(fmt.Sprint(i%100), "p"))
			_, _, err := itemRequest(ctx, e, func() (*ItemResult, error) { return e.UpsertItem(ctx, req("", "p", body)) })
			return err
		})
	})
	b.Run("HotPatch16", func(b *testing.B) {
		e := open(b)
		if _, err := e.CreateItem(ctx, req("", "p", `{"id":"hot","pk":"p","n":0}`)); err != nil {
			b.Fatal(err)
		}
		latencies(b, 16, func(int) error {
			_, _, err := itemRequest(ctx, e, func() (*ItemResult, error) {
				return e.PatchItem(ctx, req("hot", "p", `{"operations":[{"op":"incr","path":"/n","value":1}]}`))
			})
			return err
		})
	})
}

// latencies runs op b.N times from clients goroutines and reports the
// median and 99th percentile of its latency.
func latencies(b *testing.B, clients int, op func(i int) error) {
	took := make([]time.Duration, b.N)
	var next sync.Mutex
	n := 0
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= b.N {
					return
				}
				start := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				took[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
