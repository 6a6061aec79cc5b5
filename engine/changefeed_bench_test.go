package engine

import (
	"fmt"
	"testing"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// benchItems is how many items the feed benchmarks read per iteration.
const benchItems = 10000

// benchStores are the backends the feed benchmarks run on.
var benchStores = []struct {
	name string
	open func(b *testing.B) storage.Store
}{
	{"memory", func(*testing.B) storage.Store { return memory.New() }},
	{"pebble", func(b *testing.B) storage.Store {
		s, err := pebble.Open(b.TempDir(), pebble.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

// newFeedBenchEngine loads benchItems items of about 300 bytes into 64
// logical partitions, in a container that keeps all versions and deletes
// (so both change feed modes read it).
func newFeedBenchEngine(b *testing.B, store storage.Store) *Engine {
	ctx := b.Context()
	e, err := Open(ctx, store, Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		b.Fatal(err)
	}
	createContainer(b, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":60}}`)
	for i := range benchItems {
		upsert(b, e, "c", fmt.Sprintf(`{"id":"i%d","pk":"p%d","payload":"%0256d"}`, i, i%64, i))
	}
	return e
}

// BenchmarkReadFeedItems reads every item through the plain read feed, in
// pages of 1000.
func BenchmarkReadFeedItems(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) { benchReadFeed(b, newFeedBenchEngine(b, st.open(b))) })
	}
}

func benchReadFeed(b *testing.B, e *Engine) {
	ctx := b.Context()
	for b.Loop() {
		req := &FeedRequest{Database: "db", Container: "c", MaxItems: 1000}
		n := 0
		for {
			res, err := e.ReadFeed(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			n += len(res.Items)
			if res.Continuation == "" {
				break
			}
			req.Continuation = res.Continuation
		}
		if n != benchItems {
			b.Fatalf("%d items", n)
		}
	}
	b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkChangeFeedItems reads every item through the change feed from the
// beginning, in pages of 1000, in each mode.
func BenchmarkChangeFeedItems(b *testing.B) {
	for _, st := range benchStores {
		for _, mode := range []struct {
			name string
			mode ChangeFeedMode
		}{{"LatestVersion", LatestVersion}, {"AllVersionsAndDeletes", AllVersionsAndDeletes}} {
			b.Run(st.name+"/"+mode.name, func(b *testing.B) { benchChangeFeed(b, newFeedBenchEngine(b, st.open(b)), mode.mode) })
		}
	}
}

func benchChangeFeed(b *testing.B, e *Engine, mode ChangeFeedMode) {
	ctx := b.Context()
	{
		{
			for b.Loop() {
				req := &ChangeFeedRequest{Database: "db", Container: "c", Mode: mode, MaxItems: 1000}
				n := 0
				for {
					res, err := e.ReadChangeFeed(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if res.NotModified {
						break
					}
					n += len(res.Items)
					req.Continuation = res.ETag
				}
				if n != benchItems {
					b.Fatalf("%d items", n)
				}
			}
			b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
		}
	}
}
