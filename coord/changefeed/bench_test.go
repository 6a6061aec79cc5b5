package changefeed

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// BenchmarkDelivery measures how fast changes reach a handler: a plain
// change feed read loop over every feed range, against the processor with 1
// and 4 instances (leases, checkpoints after every page of 100). Each
// iteration reads the same 2,000 changes from the beginning (a fresh
// processor name, so fresh leases). The container is created with 40,000
// RU/s: four ranges on a server that splits by throughput, one otherwise.
func BenchmarkDelivery(b *testing.B) {
	f := newFixture(b, 40000)
	const changes = 2000
	f.write(50, 0, changes/50)
	ctx := context.Background()
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(changes*b.N)/time.Since(start).Seconds(), "changes/s")
	}
	b.Run("plain-read-loop", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			ranges, err := f.monitored.ReadFeedRanges(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, r := range ranges {
				opts := &azcosmos.ChangeFeedOptions{MaxItemCount: 100, FeedRange: &r}
				for {
					resp, err := f.monitored.ReadChangeFeed(ctx, opts)
					if err != nil {
						b.Fatal(err)
					}
					if len(resp.Items) == 0 {
						break
					}
					n += len(resp.Items)
					t := resp.ContinuationToken
					opts = &azcosmos.ChangeFeedOptions{MaxItemCount: 100, Continuation: &t}
				}
			}
			if n != changes {
				b.Fatalf("read %d changes, want %d", n, changes)
			}
		}
		report(b, start)
	})
	run := 0
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("processor-%d-workers", workers), func(b *testing.B) {
			start := time.Now()
			for range b.N {
				run++
				var got atomic.Int64
				done := make(chan struct{})
				h := func(_ context.Context, bt Batch) error {
					if got.Add(int64(len(bt.Changes))) >= changes {
						select {
						case <-done:
						default:
							close(done)
						}
					}
					return nil
				}
				var ws []*worker
				for w := range workers {
					ws = append(ws, f.startNamed(fmt.Sprintf("bench%d", run), fmt.Sprintf("w%d", w), h, func(o *Options) {
						o.MaxItems = 100
						o.AcquireInterval = 50 * time.Millisecond
					}))
				}
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					b.Fatalf("%d of %d changes delivered", got.Load(), changes)
				}
				for _, w := range ws {
					w.stop()
				}
			}
			report(b, start)
		})
	}
}
