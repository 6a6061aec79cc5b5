package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage/memory"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/rids"
)

func newMemEngine(t *testing.T) *Engine {
	t.Helper()
	return openTestEngine(t, newTestStore(t))
}

func req(id, pk string, body string) *ItemRequest {
	return &ItemRequest{Database: "db", Container: "c", ID: id, PartitionKey: StringKey(pk), HasPartitionKey: true, Body: []byte(body)}
}

func statusOf(err error) int {
	if err == nil {
		return 0
	}
	return StatusOf(err)
}

func TestItemLifecycleStatuses(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	steps := []struct {
		name string
		op   func() (*ItemResult, error)
		want int
	}{
		{"create", func() (*ItemResult, error) { return e.CreateItem(ctx, req("", "a", `{"id":"1","pk":"a"}`)) }, 201},
		{"create again", func() (*ItemResult, error) { return e.CreateItem(ctx, req("", "a", `{"id":"1","pk":"a"}`)) }, 409},
		{"same id other partition", func() (*ItemResult, error) { return e.CreateItem(ctx, req("", "b", `{"id":"1","pk":"b"}`)) }, 201},
		{"read", func() (*ItemResult, error) { return e.ReadItem(ctx, req("1", "a", "")) }, 200},
		{"read missing", func() (*ItemResult, error) { return e.ReadItem(ctx, req("2", "a", "")) }, 404},
		{"replace", func() (*ItemResult, error) { return e.ReplaceItem(ctx, req("1", "a", `{"id":"1","pk":"a","v":2}`)) }, 200},
		{"replace other id in body", func() (*ItemResult, error) { return e.ReplaceItem(ctx, req("1", "a", `{"id":"9","pk":"a"}`)) }, 400},
		{"replace missing", func() (*ItemResult, error) { return e.ReplaceItem(ctx, req("2", "a", `{"id":"2","pk":"a"}`)) }, 404},
		{"upsert new", func() (*ItemResult, error) { return e.UpsertItem(ctx, req("", "a", `{"id":"2","pk":"a"}`)) }, 201},
		{"upsert existing", func() (*ItemResult, error) { return e.UpsertItem(ctx, req("", "a", `{"id":"2","pk":"a","v":1}`)) }, 200},
		{"delete", func() (*ItemResult, error) { return e.DeleteItem(ctx, req("2", "a", "")) }, 204},
		{"delete again", func() (*ItemResult, error) { return e.DeleteItem(ctx, req("2", "a", "")) }, 404},
	}
	for _, s := range steps {
		res, err := s.op()
		got := statusOf(err)
		if err == nil {
			got = res.Status
		}
		if got != s.want {
			t.Fatalf("%s: status %d (%v), want %d", s.name, got, err, s.want)
		}
	}
}

func TestETagsChangeOnEveryWriteAndGuardWrites(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	r1, err := e.CreateItem(ctx, req("", "a", `{"id":"1","pk":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.ReplaceItem(ctx, req("1", "a", `{"id":"1","pk":"a","v":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if r1.ETag == r2.ETag {
		t.Fatal("replace kept the ETag")
	}
	stale := req("1", "a", `{"id":"1","pk":"a","v":3}`)
	stale.IfMatch = r1.ETag
	if _, err := e.ReplaceItem(ctx, stale); statusOf(err) != 412 {
		t.Fatalf("stale If-Match: %v, want 412", err)
	}
	cur, _ := e.ReadItem(ctx, req("1", "a", ""))
	var doc map[string]any
	json.Unmarshal(cur.Body, &doc)
	if doc["v"] != 2.0 || doc["_etag"] != r2.ETag {
		t.Fatalf("stale write changed the item: %s", cur.Body)
	}
	fresh := req("1", "a", `{"id":"1","pk":"a","v":3}`)
	fresh.IfMatch = r2.ETag
	if _, err := e.ReplaceItem(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	del := req("1", "a", "")
	del.IfMatch = r2.ETag
	if _, err := e.DeleteItem(ctx, del); statusOf(err) != 412 {
		t.Fatalf("stale delete: %v", err)
	}
}

func TestDocumentKeepsPropertyOrderAndGetsSystemProperties(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	res, err := e.CreateItem(ctx, req("", "a", `{"z":1,"id":"1","pk":"a","a":{"n":[1,2]},"_rid":"ignored","_ts":1}`))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := jsondoc.Parse(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range obj {
		names = append(names, f.Name)
	}
	want := []string{"z", "id", "pk", "a", "_rid", "_self", "_etag", "_attachments", "_ts"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("properties %v, want %v", names, want)
	}
	rid, _ := obj.Get("_rid")
	if string(rid) == `"ignored"` {
		t.Fatal("client-supplied _rid kept")
	}
	var r string
	json.Unmarshal(rid, &r)
	if _, ok := rids.Decode(r, 16); !ok {
		t.Fatalf("item _rid %q is not a 16-byte RID", r)
	}
}

func TestTimeToLive(t *testing.T) {
	ctx := t.Context()
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e, err := Open(ctx, newTestStore(t), Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	if _, err := e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":10}`), nil); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"id":"default","pk":"a"}`,
		`{"id":"short","pk":"a","ttl":1}`,
		`{"id":"never","pk":"a","ttl":-1}`,
	} {
		if _, err := e.CreateItem(ctx, req("", "a", body)); err != nil {
			t.Fatal(err)
		}
	}
	alive := func(id string) bool {
		_, err := e.ReadItem(ctx, req(id, "a", ""))
		return err == nil
	}
	advance(time.Second)
	if alive("short") || !alive("default") || !alive("never") {
		t.Fatal("after 1 s: short should be gone, the others alive")
	}
	advance(9 * time.Second)
	if alive("default") || !alive("never") {
		t.Fatal("after 10 s: default should be gone, never alive")
	}
	// An expired id can be created again.
	if _, err := e.CreateItem(ctx, req("", "a", `{"id":"default","pk":"a"}`)); err != nil {
		t.Fatalf("re-create an expired id: %v", err)
	}
	feed, err := e.ReadFeed(ctx, &FeedRequest{Database: "db", Container: "c"})
	if err != nil || len(feed.Items) != 2 {
		t.Fatalf("feed after expiry: %d items, %v", len(feed.Items), err)
	}
}

func TestConcurrentWritersOfOnePartitionAreSerialized(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	if _, err := e.CreateItem(ctx, req("", "a", `{"id":"n","pk":"a","v":0}`)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conflicts, writes int
	var mu sync.Mutex
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				for {
					cur, err := e.ReadItem(ctx, req("n", "a", ""))
					if err != nil {
						t.Error(err)
						return
					}
					var d struct{ V int }
					json.Unmarshal(cur.Body, &d)
					r := req("n", "a", fmt.Sprintf(`{"id":"n","pk":"a","v":%d}`, d.V+1))
					r.IfMatch = cur.ETag
					_, err = e.ReplaceItem(ctx, r)
					mu.Lock()
					if err != nil {
						conflicts++
					} else {
						writes++
					}
					mu.Unlock()
					if err == nil {
						break
					}
					var ee *Error
					if !errors.As(err, &ee) || ee.Status != 412 {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	cur, _ := e.ReadItem(ctx, req("n", "a", ""))
	var d struct{ V int }
	json.Unmarshal(cur.Body, &d)
	if d.V != 400 || writes != 400 {
		t.Fatalf("v = %d after %d writes (%d conflicts), want 400", d.V, writes, conflicts)
	}
}

func TestSequencerWatermarkWaitsForLateCommits(t *testing.T) {
	ctx := t.Context()
	skipOnPostgres(t, "the in-process LSN sequencer; on PostgreSQL the LSN is the writer's transaction id")
	s, err := newSequencer(ctx, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.allocate(ctx)
	b, _ := s.allocate(ctx)
	c, _ := s.allocate(ctx)
	s.finish(b)
	if watermarkNow(ctx, s) != a-1 {
		t.Fatalf("watermark %d passed unfinished %d", watermarkNow(ctx, s), a)
	}
	s.finish(a)
	if watermarkNow(ctx, s) != b {
		t.Fatalf("watermark %d, want %d", watermarkNow(ctx, s), b)
	}
	s.finish(c)
	if watermarkNow(ctx, s) != c {
		t.Fatalf("watermark %d, want %d", watermarkNow(ctx, s), c)
	}
}

func TestSequenceNumbersGrowAcrossRestarts(t *testing.T) {
	ctx := t.Context()
	skipOnPostgres(t, "the in-process LSN sequencer; on PostgreSQL the LSN is the writer's transaction id")
	store := memory.New()
	s1, _ := newSequencer(ctx, store)
	n1, _ := s1.allocate(ctx)
	s1.finish(n1)
	s2, _ := newSequencer(ctx, store)
	n2, _ := s2.allocate(ctx)
	if n2 <= n1 {
		t.Fatalf("after a restart LSN %d is not above %d", n2, n1)
	}
}

func TestContainerReopenKeepsCatalog(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	e, _ := Open(ctx, store, Options{})
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), &Throughput{Manual: 400})
	e.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/a","/b"],"kind":"MultiHash","version":2},"defaultTtl":-1}`), &Throughput{AutoscaleMax: 4000})
	before, _ := e.ReadContainer(ctx, "db", "c")
	e2, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := e2.ReadContainer(ctx, "db", "c")
	if err != nil || string(after.Body) != string(before.Body) || after.ETag != before.ETag {
		t.Fatalf("container changed across reopen:\n%s\n%s", before.Body, after.Body)
	}
	if n := len(e2.ListOffers(ctx)); n != 2 {
		t.Fatalf("%d offers after reopen, want 2", n)
	}
}

func TestDurabilityBarrierWaitsForVisibleWrites(t *testing.T) {
	d := newDurability()
	d.barrier() // nothing pending: returns at once
	d.applied(7)
	done := make(chan struct{})
	go func() { d.barrier(); close(done) }()
	select {
	case <-done:
		t.Fatal("barrier returned while write 7 was not durable")
	case <-time.After(20 * time.Millisecond):
	}
	d.applied(8) // applied after the barrier began: not waited for
	d.durable(7)
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("barrier did not return once write 7 was durable")
	}
	d.durable(8)
}

func TestItemWrittenTwiceInOneTransactionGetsTwoETags(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	c, _ := e.Container(ctx, "db", "c")
	var first, second string
	err := e.seam.inPartition(ctx, c, StringKey("a"), nil, txnFunc(func(tx *txn) error {
		for i, out := range []*string{&first, &second} {
			it, perr := c.parseItem([]byte(fmt.Sprintf(`{"id":"x","pk":"a","n":%d}`, i)), &ItemRequest{})
			if perr != nil {
				return perr
			}
			prev, _ := tx.getAny(ctx, "x")
			s, err := tx.put(ctx, it, prev)
			if err != nil {
				return err
			}
			*out = s.etag()
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatalf("two writes in one transaction share the ETag %s", first)
	}
	cur, _ := e.ReadItem(ctx, req("x", "a", ""))
	if cur.ETag != second {
		t.Fatalf("read ETag %s, want the last write's %s", cur.ETag, second)
	}
}

func TestSettleWaitsForOlderOpenTransactions(t *testing.T) {
	ctx := t.Context()
	skipOnPostgres(t, "the in-process LSN sequencer; on PostgreSQL the LSN is the writer's transaction id")
	s, err := newSequencer(ctx, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	old, _ := s.allocate(ctx)   // a long transaction, still open
	acked, _ := s.allocate(ctx) // a write acknowledged after it started
	s.finish(acked)
	if w, _ := s.settle(ctx, 10*time.Millisecond); w >= acked {
		t.Fatalf("watermark %d passed the open LSN %d", w, old)
	}
	done := make(chan uint64)
	go func() { w, _ := s.settle(ctx, 5*time.Second); done <- w }()
	time.Sleep(20 * time.Millisecond)
	s.finish(old)
	select {
	case w := <-done:
		if w < acked {
			t.Fatalf("settle returned %d, want at least the acknowledged %d", w, acked)
		}
	case <-time.After(time.Second):
		t.Fatal("settle did not return when the older transaction finished")
	}
}

// watermarkNow is src's watermark, for a source that cannot fail to tell
// it (the sequencer; a shared store reached in process).
func watermarkNow(ctx context.Context, src lsnSource) uint64 {
	w, err := src.watermark(ctx)
	if err != nil {
		panic(err)
	}
	return w
}
