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
// 1 KB item by one client (of 100 items, and of a new item each time), a transactional batch of 10 such upserts by one
// client, and a patch of one hot item by 16 clients at once. It reports the median and 99th percentile latency.
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
	// Upserts that create their item, as the server's benchmark mostly
	// makes them: the item's record and all its keys are new.
	b.Run("UpsertNew", func(b *testing.B) {
		e := open(b)
		latencies(b, 1, func(i int) error {
			body := string(benchBody("n"+fmt.Sprint(i), "p"))
			_, _, err := itemRequest(ctx, e, func() (*ItemResult, error) { return e.UpsertItem(ctx, req("", "p", body)) })
			return err
		})
	})
	b.Run("Batch10", func(b *testing.B) {
		e := open(b)
		latencies(b, 1, func(i int) error {
			ops := make([]string, 10)
			for k := range ops {
				ops[k] = fmt.Sprintf(`{"operationType":"Upsert","resourceBody":%s}`, benchBody(fmt.Sprint((i*10+k)%100), "p"))
			}
			_, _, err := batchRequest(ctx, e, ops)
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

// BenchmarkSharedPages measures query and change-feed pages as the server
// asks for them (the page, then its session token: the page's own, or
// SessionLSN when it brings none) through one engine on PostgreSQL, from
// one client: a page of 20 1 KB items of one partition (in creation order,
// and by ORDER BY on an indexed path), a cross-partition filter that
// selects one item, and the change feed and the read feed of the
// partition from their start.
// It reports the median and 99th percentile latency.
func BenchmarkSharedPages(b *testing.B) {
	ctx := b.Context()
	if err := pgtest.Available(); err != nil {
		b.Skip(err)
	}
	s, err := postgres.Open(context.Background(), pgtest.URL(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e := openTestEngine(b, s)
	for i := range 60 {
		pk := fmt.Sprint("p", i%3)
		if _, err := e.CreateItem(ctx, req("", pk, string(benchBody(fmt.Sprint(i), pk)))); err != nil {
			b.Fatal(err)
		}
	}
	query := func(text string, pk bool, want int) func(int) error {
		return func(int) error {
			r := &QueryRequest{Database: "db", Container: "c", Query: text}
			if pk {
				r.PartitionKey, r.HasPartitionKey = StringKey("p1"), true
			}
			res, err := e.QueryItems(context.Background(), r)
			if err != nil {
				return err
			}
			if len(res.Items) != want {
				return fmt.Errorf("%d items, want %d", len(res.Items), want)
			}
			querySession(ctx, e, res)
			return nil
		}
	}
	b.Run("QueryOnePartition", func(b *testing.B) { latencies(b, 1, query("SELECT * FROM c", true, 20)) })
	b.Run("QueryOrderBy", func(b *testing.B) { latencies(b, 1, query("SELECT * FROM c ORDER BY c.id", true, 20)) })
	b.Run("QueryCrossPartitionPoint", func(b *testing.B) { latencies(b, 1, query("SELECT * FROM c WHERE c.id = '7'", false, 1)) })
	b.Run("ChangeFeedPage", func(b *testing.B) {
		latencies(b, 1, func(int) error {
			res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c",
				PartitionKey: StringKey("p1"), HasPartitionKey: true})
			if err != nil {
				return err
			}
			if len(res.Items) != 20 {
				return fmt.Errorf("%d items, want 20", len(res.Items))
			}
			feedSession(ctx, e, res)
			return nil
		})
	})
	b.Run("ReadFeedPage", func(b *testing.B) {
		latencies(b, 1, func(int) error {
			res, err := e.ReadFeed(ctx, &FeedRequest{Database: "db", Container: "c",
				PartitionKey: StringKey("p1"), HasPartitionKey: true})
			if err != nil {
				return err
			}
			if len(res.Items) != 20 {
				return fmt.Errorf("%d items, want 20", len(res.Items))
			}
			readFeedSession(ctx, e, res)
			return nil
		})
	})
}

// querySession and feedSession take a page's session token as the server
// does.
func querySession(ctx context.Context, e *Engine, res *QueryResult) uint64 {
	if res.SessionLSN != 0 {
		return res.SessionLSN
	}
	lsn, _ := e.SessionLSN(ctx)
	return lsn
}

func readFeedSession(ctx context.Context, e *Engine, res *FeedResult) uint64 {
	if res.SessionLSN != 0 {
		return res.SessionLSN
	}
	lsn, _ := e.SessionLSN(ctx)
	return lsn
}

func feedSession(ctx context.Context, e *Engine, res *ChangeFeedResult) uint64 {
	if res.SessionLSN != 0 {
		return res.SessionLSN
	}
	lsn, _ := e.SessionLSN(ctx)
	return lsn
}
