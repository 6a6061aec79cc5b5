package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"
)

// containerStats returns the figures of container coll in database db.
func containerStats(t *testing.T, e *Engine, coll string) (*Stats, ContainerStats) {
	ctx := t.Context()
	t.Helper()
	st, err := e.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range st.Containers {
		if cs.Database == "db" && cs.Container == coll {
			return st, cs
		}
	}
	t.Fatalf("no stats for container %s in %+v", coll, st.Containers)
	return nil, ContainerStats{}
}

// TestStatsUnpublishedChangesAreThoseAboveTheWatermark: while an older
// write holds its LSN open, a container's later committed changes are
// counted as unpublished, with the age of the oldest; once it finishes they
// are published and the count is zero.
func TestStatsUnpublishedChangesAreThoseAboveTheWatermark(t *testing.T) {
	skipOnPlaced(t, "the stats count against the lowest watermark of the places")
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	createContainer(t, e, `{"id":"quiet","partitionKey":{"paths":["/pk"]}}`)
	upsert(t, e, "c", `{"id":"a","pk":"p"}`)
	st, cs := containerStats(t, e, "c")
	if st.InFlight != 0 || cs.Unpublished != 0 || st.Watermark != st.NewestLSN || cs.NewestLSN != st.Watermark {
		t.Fatalf("at rest: in flight %d, unpublished %d, watermark %d, newest %d, container newest %d; want 0, 0 and all equal",
			st.InFlight, cs.Unpublished, st.Watermark, st.NewestLSN, cs.NewestLSN)
	}
	held, release := holdLSN(t, e, "c", "held")
	upsert(t, e, "c", `{"id":"b","pk":"q"}`)
	upsert(t, e, "c", `{"id":"c","pk":"q"}`)
	clock.advance(42 * time.Second)
	st, cs = containerStats(t, e, "c")
	if st.InFlight != 1 || st.Watermark != held-1 || st.NewestLSN != held+2 {
		t.Errorf("with LSN %d held: in flight %d, watermark %d, newest %d; want 1, %d, %d", held, st.InFlight, st.Watermark, st.NewestLSN, held-1, held+2)
	}
	if cs.Unpublished != 2 || cs.UnpublishedAge != 42*time.Second || cs.NewestLSN != held+2 {
		t.Errorf("container c: %d unpublished, oldest %v old, newest LSN %d; want 2, 42s, %d", cs.Unpublished, cs.UnpublishedAge, cs.NewestLSN, held+2)
	}
	if _, quiet := containerStats(t, e, "quiet"); quiet.Unpublished != 0 || quiet.NewestLSN != 0 {
		t.Errorf("a container without writes: %+v", quiet)
	}
	release()
	st, cs = containerStats(t, e, "c")
	if st.InFlight != 0 || cs.Unpublished != 0 || cs.UnpublishedAge != 0 {
		t.Errorf("after the held LSN finished: in flight %d, unpublished %d (%v); want none", st.InFlight, cs.Unpublished, cs.UnpublishedAge)
	}
}

// TestStatsFeedLagCountsChangesNotYetRead: a container's feed lag is the
// latest-version changes past the furthest position a change-feed read was
// answered up to, and the age of the oldest of them; a container no reader
// has read reports none.
func TestStatsFeedLagCountsChangesNotYetRead(t *testing.T) {
	skipOnPlaced(t, "the stats count against the lowest watermark of the places")
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	for i := range 3 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p"}`, i))
	}
	if _, cs := containerStats(t, e, "c"); cs.FeedRead {
		t.Fatalf("a container never read reports a feed position: %+v", cs)
	}
	_, etag := readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c"})
	st, cs := containerStats(t, e, "c")
	if !cs.FeedRead || FormatChangeFeedETag(cs.FeedPosition) != etag || cs.FeedLag != 0 || cs.FeedLagAge != 0 {
		t.Fatalf("after reading everything: %+v (etag %s, watermark %d); want position at the etag, no lag", cs, etag, st.Watermark)
	}
	clock.advance(10 * time.Second)
	upsert(t, e, "c", `{"id":"0","pk":"p","v":2}`) // a rewrite: one change
	upsert(t, e, "c", `{"id":"new","pk":"p"}`)
	upsert(t, e, "c", `{"id":"new","pk":"p","v":2}`) // its latest version only
	clock.advance(90 * time.Second)
	if _, cs = containerStats(t, e, "c"); cs.FeedLag != 2 || cs.FeedLagAge != 90*time.Second {
		t.Errorf("after 2 items changed 90 s ago: lag %d changes, %v; want 2, 1m30s", cs.FeedLag, cs.FeedLagAge)
	}
	// A reader that reads one page of one item moves the position by it.
	res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", Continuation: etag, MaxItems: 1})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("one page of one item: %v, %v", res, err)
	}
	if _, cs = containerStats(t, e, "c"); cs.FeedLag != 1 || FormatChangeFeedETag(cs.FeedPosition) != res.ETag {
		t.Errorf("after one more item read: lag %d, position %d; want 1 at %s", cs.FeedLag, cs.FeedPosition, res.ETag)
	}
	readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c", Continuation: res.ETag})
	if _, cs = containerStats(t, e, "c"); cs.FeedLag != 0 || cs.FeedLagAge != 0 {
		t.Errorf("caught up: lag %d, %v", cs.FeedLag, cs.FeedLagAge)
	}
	// An older reader does not move the position back.
	readAll(t, e, ChangeFeedRequest{Database: "db", Container: "c"})
	if _, cs = containerStats(t, e, "c"); cs.FeedLag != 0 {
		t.Errorf("a reader from the beginning moved the position back: lag %d", cs.FeedLag)
	}
}

// TestStatsTTLBacklogCountsExpiredItemsUntilSwept: items past their time to
// live are the backlog until the sweeper deletes them, and then count as
// swept.
func TestStatsTTLBacklogCountsExpiredItemsUntilSwept(t *testing.T) {
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":10}`)
	createContainer(t, e, `{"id":"off","partitionKey":{"paths":["/pk"]}}`)
	for i := range 5 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, i))
	}
	upsert(t, e, "c", `{"id":"short","pk":"p","ttl":2}`)
	upsert(t, e, "c", `{"id":"forever","pk":"p","ttl":-1}`)
	if _, cs := containerStats(t, e, "c"); !cs.TTL || cs.TTLBacklog != 0 {
		t.Fatalf("before anything expired: %+v", cs)
	}
	clock.advance(3 * time.Second)
	if _, cs := containerStats(t, e, "c"); cs.TTLBacklog != 1 {
		t.Errorf("one item past its own ttl: backlog %d", cs.TTLBacklog)
	}
	clock.advance(10 * time.Second)
	st, cs := containerStats(t, e, "c")
	if cs.TTLBacklog != 6 || st.TTLSwept != 0 {
		t.Errorf("six items expired, none swept: backlog %d, swept %d", cs.TTLBacklog, st.TTLSwept)
	}
	if _, off := containerStats(t, e, "off"); off.TTL || off.TTLBacklog != 0 {
		t.Errorf("a container without TTL: %+v", off)
	}
	if _, err := e.sweeper.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if st, cs = containerStats(t, e, "c"); cs.TTLBacklog != 0 || st.TTLSwept != 6 {
		t.Errorf("after a sweep: backlog %d, swept %d; want 0, 6", cs.TTLBacklog, st.TTLSwept)
	}
}

// logSink is a log destination safe for the engine's goroutines.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLongWorkLogsWhatItDid: an index rebuild of many items and a TTL sweep
// of many items each log a line saying which container and how many items,
// to the logger the engine was given.
func TestLongWorkLogsWhatItDid(t *testing.T) {
	ctx := t.Context()
	logs := &logSink{}
	clock := newTestClock()
	store := newTestStore(t)
	e, err := Open(ctx, store, Options{Now: clock.now, SweepInterval: -1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); store.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	narrow := `{"id":"big","partitionKey":{"paths":["/pk"]},"defaultTtl":60,"indexingPolicy":{"includedPaths":[{"path":"/a/?"}],"excludedPaths":[{"path":"/*"}]}}`
	createContainer(t, e, narrow)
	const items = 2*rebuildChunk + 137
	for i := range items {
		upsert(t, e, "big", fmt.Sprintf(`{"id":"%d","pk":"p%d","a":%d,"b":%d}`, i, i%7, i, i))
	}
	if _, err := e.ReplaceContainer(ctx, "db", "big", []byte(`{"id":"big","partitionKey":{"paths":["/pk"]},"defaultTtl":60,"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[]}}`), ""); err != nil {
		t.Fatal(err)
	}
	rebuilt := regexp.MustCompile(`msg="index rebuilt" database=db container=big items=(\d+) took=`)
	if m := rebuilt.FindStringSubmatch(logs.String()); m == nil || m[1] != fmt.Sprint(items) {
		t.Errorf("no line says the index of %d items was rebuilt:\n%s", items, logs)
	}
	clock.advance(61 * time.Second)
	if n, err := e.sweeper.sweep(ctx); err != nil || n != items {
		t.Fatalf("the sweep deleted %d items (%v), want %d", n, err, items)
	}
	swept := regexp.MustCompile(`msg="TTL sweep" database=db container=big "expired items deleted"=(\d+) took=`)
	if m := swept.FindStringSubmatch(logs.String()); m == nil || m[1] != fmt.Sprint(items) {
		t.Errorf("no line says the sweep deleted %d items:\n%s", items, logs)
	}
}

// BenchmarkStats measures what a scrape costs the engine, with 100
// containers of 1,000 items each: "behind", each 1,000 changes behind a
// reader with 1,000 items past their TTL (every count at its cap); "caught
// up", each reader at the watermark and nothing expired.
func BenchmarkStats(b *testing.B) {
	ctx := b.Context()
	for _, behind := range []bool{true, false} {
		name := map[bool]string{true: "behind", false: "caught-up"}[behind]
		b.Run(name, func(b *testing.B) {
			e, clock := newTestEngine(b)
			for c := range 100 {
				coll := fmt.Sprintf("c%03d", c)
				createContainer(b, e, `{"id":"`+coll+`","partitionKey":{"paths":["/pk"]},"defaultTtl":60}`)
				if _, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: coll, FromNow: true}); err != nil {
					b.Fatal(err)
				}
				for i := range 1000 {
					upsert(b, e, coll, fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, i%10))
				}
				if !behind {
					if _, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: coll, FromNow: true}); err != nil {
						b.Fatal(err)
					}
				}
			}
			want := 0
			if behind {
				clock.advance(61 * time.Second)
				want = StatsCountCap
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				st, err := e.Stats(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if cs := st.Containers[0]; cs.FeedLag != want || cs.TTLBacklog != want {
					b.Fatalf("%+v", cs)
				}
			}
		})
	}
}

// BenchmarkFeedReadBookkeeping sets what a change-feed read pays to keep its
// container's read position (feedReads.note) beside the cheapest read there
// is, a poll answered 304 at the watermark, in one run.
func BenchmarkFeedReadBookkeeping(b *testing.B) {
	ctx := b.Context()
	e, _ := newTestEngine(b)
	createContainer(b, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	upsert(b, e, "c", `{"id":"a","pk":"p"}`)
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		b.Fatal(err)
	}
	_, etag := readAll(b, e, ChangeFeedRequest{Database: "db", Container: "c"})
	b.Run("poll", func(b *testing.B) {
		for b.Loop() {
			res, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", Continuation: etag})
			if err != nil || !res.NotModified {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("noteFeedRead", func(b *testing.B) {
		n := uint64(0)
		for b.Loop() {
			n++
			e.feedReads.note(c, n)
		}
	})
}

// TestStatsCountsStopAtTheCap: a count past StatsCountCap reads as the cap,
// so that a scrape's cost stays bounded however far behind things are.
func TestStatsCountsStopAtTheCap(t *testing.T) {
	skipOnPlaced(t, "the stats count against the lowest watermark of the places")
	ctx := t.Context()
	e, clock := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":10}`)
	if _, err := e.ReadChangeFeed(ctx, &ChangeFeedRequest{Database: "db", Container: "c", FromNow: true}); err != nil {
		t.Fatal(err)
	}
	for i := range StatsCountCap + 5 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p%d"}`, i, i%10))
	}
	clock.advance(11 * time.Second)
	if _, cs := containerStats(t, e, "c"); cs.FeedLag != StatsCountCap || cs.TTLBacklog != StatsCountCap || cs.FeedLagAge != 11*time.Second {
		t.Errorf("%d changes unread and expired: lag %d (%v), backlog %d; want %d each, 11s", StatsCountCap+5, cs.FeedLag, cs.FeedLagAge, cs.TTLBacklog, StatsCountCap)
	}
}
