package engine

import (
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage/memory"
)

// BenchmarkChangeFeedRanges reads benchItems changes of a container with four
// partition key ranges: through one reader of the whole container, and
// through one reader per range (the ranges' feeds share the container's
// sequence, so each range's reader passes over the others' changes).
func BenchmarkChangeFeedRanges(b *testing.B) {
	ctx := b.Context()
	store := memory.New()
	e, err := Open(ctx, store, Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		b.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), &Throughput{Manual: 40000}); err != nil {
		b.Fatal(err)
	}
	for i := range benchItems {
		upsert(b, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d","payload":"%0256d"}`, i, i%64, i))
	}
	c, _ := e.Container(ctx, "db", "c")
	ranges, _ := c.PartitionKeyRanges()
	drain := func(rangeID string) int {
		req := &ChangeFeedRequest{Database: "db", Container: "c", MaxItems: 1000, PartitionKeyRangeID: rangeID}
		n := 0
		for {
			res, err := e.ReadChangeFeed(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if res.NotModified {
				return n
			}
			n += len(res.Items)
			req.Continuation = res.ETag
		}
	}
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if n := drain(""); n != benchItems {
				b.Fatalf("%d items", n)
			}
		}
		b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
	})
	b.Run("per-range", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for _, r := range ranges {
				n += drain(r.ID)
			}
			if n != benchItems {
				b.Fatalf("%d items", n)
			}
		}
		b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
	})
}
