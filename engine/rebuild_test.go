package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/query"
	"github.com/orrery-db/orrery/storage"
)

// keysUnder lists the keys of the store under prefix.
func keysUnder(t *testing.T, s storage.Reader, prefix []byte) []string {
	ctx := t.Context()
	t.Helper()
	it, err := s.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		out = append(out, string(it.Key()))
	}
	return out
}

// queryIDs runs a query over the whole container and returns the ids, sorted.
func queryIDs(t *testing.T, e *Engine, coll, q string) []string {
	t.Helper()
	out := queryPages(t, e, &QueryRequest{Database: "db", Container: coll, Query: q, SinglePartitionKeyRange: true})
	for i, it := range out {
		out[i] = strings.Trim(it, `"`)
	}
	slices.Sort(out)
	return out
}

// queryPages runs r page by page to its end and returns every item as
// text, in the order the pages gave them.
func queryPages(t *testing.T, e *Engine, r *QueryRequest) []string {
	t.Helper()
	var out []string
	for {
		res, err := e.QueryItems(context.Background(), r)
		if err != nil {
			t.Fatalf("%s %s: %v", r.Container, r.Query, err)
		}
		for _, it := range res.Items {
			out = append(out, string(it))
		}
		if res.Continuation == "" {
			return out
		}
		r.Continuation = res.Continuation
	}
}

// commitAndReopen commits b, the test's tampering with a closed engine's
// store, and opens an engine on the store again, closed at the test's end.
func commitAndReopen(t *testing.T, store storage.Store, b storage.Batch) *Engine {
	ctx := t.Context()
	t.Helper()
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := Open(ctx, store, Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// newFilledStore opens an engine on a new memory store and fills it as
// fillForRebuild does.
func newFilledStore(t *testing.T) (storage.Store, *Engine, *Container) {
	ctx := t.Context()
	t.Helper()
	store := newTestStore(t)
	e, err := Open(ctx, store, Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	return store, e, fillForRebuild(t, e)
}

// fillForRebuild creates a container whose items have expiry entries of both
// kinds, a property at the path "/", and long strings.
func fillForRebuild(t *testing.T, e *Engine) *Container {
	ctx := t.Context()
	t.Helper()
	createContainer(t, e, `{"id":"c","partitionKey":{"paths":["/pk"]},"defaultTtl":3600}`)
	long := strings.Repeat("y", 2*maxIndexedString)
	for i := range 1200 { // more than two rebuild chunks
		ttl := ""
		if i%3 == 0 {
			ttl = `,"ttl":7200`
		}
		upsert(t, e, "c", fmt.Sprintf(`{"id":"%d","pk":"p%d","":"root%d","s":"%s%d","n":%d%s}`, i, i%7, i%5, long, i%11, i%13, ttl))
	}
	c, err := e.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIndexUpgradeFromFormat1: a store whose index entries are in format 1
// (under the expiry index's prefix, strings whole) is rebuilt at Open; the
// expiry entries stay as they were.
func TestIndexUpgradeFromFormat1(t *testing.T) {
	ctx := t.Context()
	store, e, c := newFilledStore(t)
	wantIndex := keysUnder(t, store, keys.IndexPrefix(c.rid))
	wantExpiry := keysUnder(t, store, keys.ExpiryPrefix(c.rid))
	if len(wantIndex) == 0 || len(wantExpiry) != 1200 {
		t.Fatalf("%d index and %d expiry entries before", len(wantIndex), len(wantExpiry))
	}
	wantIDs := queryIDs(t, e, "c", `SELECT VALUE c.id FROM c WHERE c.n = 3`)
	e.Close()

	// Rewrite the index as format 1 had it.
	b := store.NewBatch()
	for _, k := range wantIndex {
		b.Delete([]byte(k))
		b.Set(append([]byte{keys.Expiry}, k[1:]...), nil)
	}
	b.Delete(keys.MetaIndexFormat)
	e = commitAndReopen(t, store, b)
	if got := keysUnder(t, store, keys.IndexPrefix(c.rid)); !slices.Equal(got, wantIndex) {
		t.Errorf("after the upgrade: %d index entries, want %d", len(got), len(wantIndex))
	}
	if got := keysUnder(t, store, keys.ExpiryPrefix(c.rid)); !slices.Equal(got, wantExpiry) {
		t.Errorf("after the upgrade: %d entries under the expiry prefix, want its %d", len(got), len(wantExpiry))
	}
	if v, err := store.Get(ctx, keys.MetaIndexFormat); err != nil || binary.BigEndian.Uint64(v) != indexFormat {
		t.Errorf("index format after the upgrade: %x %v", v, err)
	}
	if got := queryIDs(t, e, "c", `SELECT VALUE c.id FROM c WHERE c.n = 3`); !slices.Equal(got, wantIDs) || len(got) == 0 {
		t.Errorf("query after the upgrade: %v, want %v", got, wantIDs)
	}
}

// TestIndexRebuildFinishedAtOpen: a rebuild a crash cut short (its mark
// left, entries missing or stale) is done again at the next Open.
func TestIndexRebuildFinishedAtOpen(t *testing.T) {
	ctx := t.Context()
	store, e, c := newFilledStore(t)
	want := keysUnder(t, store, keys.IndexPrefix(c.rid))
	e.Close()

	b := store.NewBatch()
	for _, k := range want[:len(want)/2] {
		b.Delete([]byte(k))
	}
	b.Set(append(keys.IndexPathPrefix(c.rid, "/gone"), ixNull, 'z'), nil)
	b.Set(keys.IndexRebuild(c.rid), nil)
	commitAndReopen(t, store, b)
	if got := keysUnder(t, store, keys.IndexPrefix(c.rid)); !slices.Equal(got, want) {
		t.Errorf("after Open: %d index entries, want %d", len(got), len(want))
	}
	if _, err := store.Get(ctx, keys.IndexRebuild(c.rid)); err != storage.ErrNotFound {
		t.Errorf("the rebuild mark is still there: %v", err)
	}
}

// TestReplaceIndexingPolicyRebuildsIndex: a new indexing policy takes effect
// with an index that lists every item, also those written while the replace
// ran, and queries on newly indexed paths find them all.
func TestReplaceIndexingPolicyRebuildsIndex(t *testing.T) {
	ctx := t.Context()
	e, _ := newTestEngine(t)
	narrow := `{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":"/a/?"}],"excludedPaths":[{"path":"/*"}]}}`
	wide := `{"id":"c","partitionKey":{"paths":["/pk"]},"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[]}}`
	createContainer(t, e, narrow)
	for i := range 600 {
		upsert(t, e, "c", fmt.Sprintf(`{"id":"w%d","pk":"p%d","a":%d,"b":%d}`, i, i%9, i%4, i%5))
	}
	before, _ := e.Container(ctx, "db", "c")
	if n := len(keysUnder(t, e.store, keys.IndexPathPrefix(before.rid, "/b"))); n != 0 {
		t.Fatalf("%d entries for /b before it is indexed", n)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	written := make([][]string, 4) // ids with b = 0 per writer
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("c%d-%d", w, i)
				if _, err := e.UpsertItem(ctx, &ItemRequest{Database: "db", Container: "c",
					Body: fmt.Appendf(nil, `{"id":%q,"pk":"q%d","a":1,"b":%d}`, id, i%3, i%2)}); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					written[w] = append(written[w], id)
				}
			}
		}()
	}
	for _, policy := range []string{wide, narrow, wide} {
		if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(policy), ""); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	c, _ := e.Container(ctx, "db", "c")
	var want []string
	for i := 0; i < 600; i += 5 {
		want = append(want, fmt.Sprintf("w%d", i))
	}
	for _, ids := range written {
		want = append(want, ids...)
	}
	slices.Sort(want)
	if got := queryIDs(t, e, "c", `SELECT VALUE c.id FROM c WHERE c.b = 0`); !slices.Equal(got, want) {
		t.Errorf("after the replace, b = 0 finds %d items, want %d", len(got), len(want))
	}
	if _, ok := c.chooseIndex(mustPlan(t, `SELECT * FROM c WHERE c.b = 0`)); !ok {
		t.Error("the query on /b does not use the rebuilt index")
	}
	got := keysUnder(t, e.store, keys.IndexPrefix(c.rid))
	if err := e.rebuilder.rebuildIndex(ctx, c); err != nil {
		t.Fatal(err)
	}
	if fresh := keysUnder(t, e.store, keys.IndexPrefix(c.rid)); !slices.Equal(got, fresh) {
		t.Errorf("the index after the replaces (%d entries) differs from a fresh rebuild (%d)", len(got), len(fresh))
	}
	if !bytes.Equal(c.rid, before.rid) {
		t.Fatal("the replace changed the container's rid")
	}
}

func mustPlan(t *testing.T, text string) *query.Plan {
	t.Helper()
	q, err := query.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := q.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
