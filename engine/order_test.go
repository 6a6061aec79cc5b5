package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
	"github.com/orrery-db/orrery/storage/pebble"
)

// queryOrder runs a query page by page (pageSize items) and returns the
// ids in the order the pages gave them.
func queryOrder(t *testing.T, e *Engine, req QueryRequest, pageSize int) []string {
	t.Helper()
	req.MaxItems = pageSize
	var out []string
	for {
		res, err := e.QueryItems(context.Background(), &req)
		if err != nil {
			t.Fatalf("%s: %v", req.Query, err)
		}
		for _, it := range res.Items {
			var d struct{ ID string }
			if err := json.Unmarshal(it, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d.ID)
		}
		if res.Continuation == "" {
			return out
		}
		req.Continuation = res.Continuation
	}
}

// feedOrder reads the read feed page by page and returns the ids in order.
func feedOrder(t *testing.T, e *Engine, req FeedRequest, pageSize int) []string {
	ctx := t.Context()
	t.Helper()
	req.MaxItems = pageSize
	var out []string
	for {
		res, err := e.ReadFeed(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			var d struct{ ID string }
			if err := json.Unmarshal(it, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d.ID)
		}
		if res.Continuation == "" {
			return out
		}
		req.Continuation = res.Continuation
	}
}

// TestCreationOrderCostsOneKeyPerCreateAndDeleteNonePerReplace: a create
// adds one order key, a replace leaves it as it is, a delete removes it.
func TestCreationOrderCostsOneKeyPerCreateAndDeleteNonePerReplace(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	c, _ := e.Container(ctx, "db", "c")
	keys := func() []string { return keysUnder(t, e.store, keys.OrderPrefix(c.rid)) }
	upsert(t, e, "c", `{"id":"a","pk":"p"}`)
	one := keys()
	if len(one) != 1 {
		t.Fatalf("after a create: %d order keys, want 1", len(one))
	}
	upsert(t, e, "c", `{"id":"a","pk":"p","v":2}`)
	if got := keys(); !slices.Equal(got, one) {
		t.Errorf("a replace changed the order keys: %x, want %x", got, one)
	}
	deleteItem(t, e, "c", "a", "p")
	if got := keys(); len(got) != 0 {
		t.Errorf("after a delete: %d order keys", len(got))
	}
}

// TestQueryAndReadFeedFollowCreationOrder: without ORDER BY, a query and
// the read feed list a container's items, and a partition's, in creation
// order whatever their ids, page by page; a delete and re-create moves an
// item to the end, a replace does not move it.
func TestQueryAndReadFeedFollowCreationOrder(t *testing.T) {
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	var all, p0 []string
	for i := range 40 {
		id := strconv.Itoa((i * 17) % 40)
		pk := fmt.Sprintf("p%d", i%3)
		upsert(t, e, "c", fmt.Sprintf(`{"id":%q,"pk":%q}`, id, pk))
		all = append(all, id)
		if pk == "p0" {
			p0 = append(p0, id)
		}
	}
	upsert(t, e, "c", fmt.Sprintf(`{"id":%q,"pk":"p0","v":1}`, p0[1])) // replace: stays
	deleteItem(t, e, "c", p0[0], "p0")
	upsert(t, e, "c", fmt.Sprintf(`{"id":%q,"pk":"p0"}`, p0[0])) // re-create: last
	moved := p0[0]
	all = append(slices.DeleteFunc(all, func(s string) bool { return s == moved }), moved)
	p0 = append(p0[1:], moved)

	for _, size := range []int{1, 7, 100} {
		if got := queryOrder(t, e, QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c", SinglePartitionKeyRange: true}, size); !slices.Equal(got, all) {
			t.Errorf("query over the container, pages of %d: %v, want %v", size, got, all)
		}
		if got := feedOrder(t, e, FeedRequest{Database: "db", Container: "c"}, size); !slices.Equal(got, all) {
			t.Errorf("read feed of the container, pages of %d: %v, want %v", size, got, all)
		}
		scoped := QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c", PartitionKey: StringKey("p0"), HasPartitionKey: true}
		if got := queryOrder(t, e, scoped, size); !slices.Equal(got, p0) {
			t.Errorf("query in partition p0, pages of %d: %v, want %v", size, got, p0)
		}
		if got := feedOrder(t, e, FeedRequest{Database: "db", Container: "c", PartitionKey: StringKey("p0"), HasPartitionKey: true}, size); !slices.Equal(got, p0) {
			t.Errorf("read feed of partition p0, pages of %d: %v, want %v", size, got, p0)
		}
	}
}

// TestIndexServedQueryFollowsCreationOrderWithinItsBound: a query an index
// serves, without ORDER BY, lists its candidates in creation order, and
// its pages stay right when items are created between them; one with more
// candidates than the bound lists each item once in index order.
func TestIndexServedQueryFollowsCreationOrderWithinItsBound(t *testing.T) {
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]}}`)
	var want []string
	for i := range 30 {
		id := strconv.Itoa((i * 7) % 30)
		upsert(t, e, "c", fmt.Sprintf(`{"id":%q,"pk":"p%d","color":%q}`, id, i%4, []string{"red", "blue"}[i%2]))
		if i%2 == 0 {
			want = append(want, id)
		}
	}
	req := QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c WHERE c.color = 'red'", SinglePartitionKeyRange: true, MaxItems: 4}
	var got []string
	for added := 0; ; added++ {
		res, err := e.QueryItems(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics.IndexLookups == 0 {
			t.Fatal("the index did not serve the query")
		}
		for _, it := range res.Items {
			var d struct{ ID string }
			_ = json.Unmarshal(it, &d)
			got = append(got, d.ID)
		}
		if res.Continuation == "" {
			break
		}
		req.Continuation = res.Continuation
		if added < 3 {
			id := fmt.Sprintf("new%d", added)
			upsert(t, e, "c", fmt.Sprintf(`{"id":%q,"pk":"p0","color":"red"}`, id))
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("index-served query, items created between pages: %v, want %v", got, want)
	}

	createContainer(t, e, `{"id":"big","partitionKey":{"paths":["/pk"]}}`)
	n := maxOrderedCandidates + 10
	for i := range n {
		upsert(t, e, "big", fmt.Sprintf(`{"id":"%d","pk":"p","color":"red"}`, i))
	}
	ids := queryOrder(t, e, QueryRequest{Database: "db", Container: "big", Query: "SELECT * FROM c WHERE c.color = 'red'", SinglePartitionKeyRange: true}, 1000)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("%s listed twice past the bound", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("past the bound: %d items, want %d", len(seen), n)
	}
}

// TestCreationOrderKeysRebuiltWhenUpgradingFromFormat2: a store written
// before creation order (index format 2, no order keys) gets every item's
// order key at Open, and its queries then follow creation order; its index
// is not rebuilt.
func TestCreationOrderKeysRebuiltWhenUpgradingFromFormat2(t *testing.T) {
	ctx := t.Context()
	store, e, c := newFilledStore(t)
	want := keysUnder(t, store, keys.OrderPrefix(c.rid))
	if len(want) != 1200 {
		t.Fatalf("%d order keys before, want 1200", len(want))
	}
	scoped := QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c", PartitionKey: StringKey("p3"), HasPartitionKey: true}
	wantIDs := queryOrder(t, e, scoped, 50)
	e.Close()

	b := store.NewBatch()
	for _, k := range want {
		b.Delete([]byte(k))
	}
	b.Set(keys.MetaIndexFormat, binary.BigEndian.AppendUint64(nil, 2))
	// Format 2's index is format 3's: the upgrade leaves it alone, so an
	// entry only a rebuild would remove is still there after it.
	marker := append(keys.IndexPathPrefix(c.rid, "/marker"), ixNull, 'z')
	b.Set(marker, nil)
	e = commitAndReopen(t, store, b)
	if _, err := store.Get(ctx, marker); err != nil {
		t.Errorf("the upgrade from format 2 rebuilt the index: %v", err)
	}
	if got := keysUnder(t, store, keys.OrderPrefix(c.rid)); !slices.Equal(got, want) {
		t.Errorf("after the upgrade: %d order keys, want %d", len(got), len(want))
	}
	if got := queryOrder(t, e, scoped, 50); !slices.Equal(got, wantIDs) || len(got) == 0 {
		t.Errorf("query after the upgrade: %v, want %v", got, wantIDs)
	}
}

// BenchmarkCreationOrderWriteCost measures, in one run, what creation
// order costs: creates into an engine that writes order keys and into one
// that does not, alternating in rounds so both see the same load, and a
// full scan of a 1,000-item partition read in creation order against one
// read in key order. It reports each side's time per operation and their
// ratio (with/without).
func BenchmarkCreationOrderWriteCost(b *testing.B) {
	ctx := b.Context()
	stores := []struct {
		name string
		open func(b *testing.B) storage.Store
	}{
		{"pebble", func(b *testing.B) storage.Store {
			s, err := pebble.Open(b.TempDir(), pebble.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"memory", func(*testing.B) storage.Store { return memory.New() }},
	}
	for _, st := range stores {
		b.Run(st.name+"/create", func(b *testing.B) {
			with := openTestEngine(b, st.open(b))
			without := openTestEngine(b, st.open(b))
			withoutCreationOrder(without)
			var tWith, tWithout time.Duration
			round := func(e *Engine, from, n int) time.Duration {
				start := time.Now()
				for i := from; i < from+n; i++ {
					pk := "p" + strconv.Itoa(i%16)
					if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: benchBody(strconv.Itoa(i), pk),
						PartitionKey: StringKey(pk), HasPartitionKey: true}); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += 50 {
				n := min(50, b.N-i)
				tWithout += round(without, i, n)
				tWith += round(with, i, n)
			}
			b.ReportMetric(float64(tWith.Nanoseconds())/float64(b.N), "ns/create-with")
			b.ReportMetric(float64(tWithout.Nanoseconds())/float64(b.N), "ns/create-without")
			b.ReportMetric(float64(tWith)/float64(tWithout), "with/without")
		})
		b.Run(st.name+"/scan", func(b *testing.B) {
			with := openTestEngine(b, st.open(b))
			without := openTestEngine(b, st.open(b))
			withoutCreationOrder(without)
			for _, e := range []*Engine{with, without} {
				for i := range 1000 {
					if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: "c", Body: benchBody(strconv.Itoa(i), "p"),
						PartitionKey: StringKey("p"), HasPartitionKey: true}); err != nil {
						b.Fatal(err)
					}
				}
			}
			scan := func(e *Engine) time.Duration {
				start := time.Now()
				req := &QueryRequest{Database: "db", Container: "c", Query: "SELECT * FROM c", PartitionKey: StringKey("p"), HasPartitionKey: true, MaxItems: 1000}
				res, err := e.QueryItems(context.Background(), req)
				if err != nil || len(res.Items) != 1000 {
					b.Fatalf("scan: %v", err)
				}
				return time.Since(start)
			}
			var tWith, tWithout time.Duration
			b.ResetTimer()
			for range b.N {
				tWithout += scan(without)
				tWith += scan(with)
			}
			b.ReportMetric(float64(tWith.Nanoseconds())/float64(b.N), "ns/scan-with")
			b.ReportMetric(float64(tWithout.Nanoseconds())/float64(b.N), "ns/scan-without")
			b.ReportMetric(float64(tWith)/float64(tWithout), "with/without")
		})
	}
}

// TestHierarchicalPrefixQueryInterleavesItsPartitionsInCreationOrder: a
// query scoped to a prefix of a hierarchical key lists the items of the
// partitions under it as they were created, not partition by partition.
func TestHierarchicalPrefixQueryInterleavesItsPartitionsInCreationOrder(t *testing.T) {
	e, _ := newTestEngine(t)
	createContainer(t, e, `{"id":"h","partitionKey":{"paths":["/t","/u"],"kind":"MultiHash","version":2}}`)
	var want []string
	for i := range 24 {
		id := strconv.Itoa((i * 5) % 24)
		tenant := []string{"t1", "t2"}[i%2]
		upsert(t, e, "h", fmt.Sprintf(`{"id":%q,"t":%q,"u":"u%d"}`, id, tenant, i%3))
		if tenant == "t1" {
			want = append(want, id)
		}
	}
	for _, size := range []int{1, 5, 100} {
		req := QueryRequest{Database: "db", Container: "h", Query: "SELECT * FROM c", PartitionKey: StringKey("t1"), HasPartitionKey: true}
		if got := queryOrder(t, e, req, size); !slices.Equal(got, want) {
			t.Errorf("prefix t1, pages of %d: %v, want %v", size, got, want)
		}
	}
}

// withoutCreationOrder makes e's creates write no order key and its scans
// read in key order, as before creation order: only the benchmark that
// measures what creation order costs sets it.
func withoutCreationOrder(e *Engine) {
	e.queries.noCreationOrder = true
	switch s := e.seam.(type) {
	case *localSeam:
		s.noCreationOrder = true
	case *sharedSeam:
		s.noCreationOrder = true
	}
}
