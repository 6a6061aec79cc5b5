package searchindex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// testContainer is a container of one vector index at /v and one
// full-text index at /text; its item records are the documents themselves.
type testContainer struct {
	rid   []byte
	shard string // the vector index's shard key path, "" for none
}

func (c testContainer) Spec() Spec {
	vs := []VectorSpec{{Path: "/v", Config: vector.Config{Kind: vector.Flat, Dimensions: 3, DataType: vector.Float32, Metric: vector.Euclidean}, ShardKey: c.shard}}
	ts := []TextSpec{{Path: "/text", Language: "en-US"}}
	return Spec{RID: c.rid, Name: "c", Fingerprint: Fingerprint(vs, ts), Vectors: vs, Texts: ts}
}
func (c testContainer) RID() []byte                   { return c.rid }
func (c testContainer) HasIndexes() bool              { return true }
func (c testContainer) Retired() bool                 { return false }
func (c testContainer) Successor() (Container, error) { return c, nil }

func newTestSet(store storage.Store, mode Mode, bg *sync.WaitGroup) *Set {
	return New(Options{
		Mode:   mode,
		Store:  store,
		Decode: func(_, value []byte) ([]byte, error) { return value, nil },
		Purge: func(ctx context.Context, prefix []byte) error {
			b := store.NewBatch()
			defer b.Close()
			it, err := store.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
			if err != nil {
				return err
			}
			for it.Next() {
				if err := b.Delete(slices.Clone(it.Key())); err != nil {
					it.Close()
					return err
				}
			}
			if err := it.Close(); err != nil {
				return err
			}
			return b.Commit(ctx)
		},
		Log: slog.Default(),
		Ctx: context.Background(),
		Bg:  bg,
	})
}

// writeItem writes (doc nil: deletes) the item of suffix with its index
// change, in one transaction.
func writeItem(t *testing.T, s *Set, store storage.Store, c testContainer, suffix string, doc []byte) {
	t.Helper()
	ctx := t.Context()
	b := store.NewBatch()
	var lsn uint64
	if sh, ok := store.(storage.Shared); ok {
		sb, err := sh.NewSharedBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lsn, err = sb.Sequence(ctx); err != nil {
			t.Fatal(err)
		}
		b.Close()
		b = sb
	}
	defer b.Close()
	key := keys.ItemKeyFromSuffix(c.rid, []byte(suffix))
	var get Getter
	var err error
	if doc != nil {
		get, err = DocGetter(doc), b.Set(key, doc)
	} else {
		err = b.Delete(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	w := &Write{}
	defer w.Abort()
	if err := s.Reindex(w, b, lsn, c, []byte(suffix), get); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	w.Commit()
}

func testDoc(i int) []byte {
	return fmt.Appendf(nil, `{"v":[%d,%d,1],"text":"river %s stone","tenant":"t%d"}`, i, i%7, []string{"glass", "quick", "slow"}[i%3], i%4)
}

// indexAnswers is what st's indexes answer, read as r has them: every
// vector's key by distance to a fixed query, and the full-text statistics.
func indexAnswers(t *testing.T, st *State, r storage.Reader) string {
	t.Helper()
	vi := st.VectorAt([]string{"v"})
	found, err := vi.Search(t.Context(), []float32{3, 2, 1}, vector.SearchOptions{K: 1000, Exact: true}, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As many as the index holds, and those of the shard of tenant t1
	// when it has shards.
	pinned, err := vi.Search(t.Context(), []float32{3, 2, 1}, vector.SearchOptions{K: 1000, Exact: true}, r, []json.RawMessage{json.RawMessage(`"t1"`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != vi.Len() {
		t.Fatalf("the vector index finds %d items and holds %d", len(found), vi.Len())
	}
	if vi.ShardKey() != nil && (len(pinned) == 0 || len(pinned) >= len(found)) {
		t.Fatalf("the shard of t1 holds %d of the %d items", len(pinned), len(found))
	}
	ti := st.TextAt([]string{"text"})
	stats, err := ti.Index.Stats(t.Context(), ti.State(r), []string{"glass", "quick", "river"})
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("%+v\n", stats)
	for _, f := range found {
		out += fmt.Sprintf("%s %.4f\n", f.Key, f.Score)
	}
	out += "pinned to t1:\n"
	for _, f := range pinned {
		out += fmt.Sprintf("%s %.4f\n", f.Key, f.Score)
	}
	return out
}

// TestIndexesKeptByWritesAnswerAsARebuildFromTheItems: in Local mode the
// indexes changed in the items' transactions, opened again from their
// state, answer as the indexes a rebuild from the items gives.
func TestIndexesKeptByWritesAnswerAsARebuildFromTheItems(t *testing.T) {
	for _, shard := range []string{"", "/tenant"} {
		t.Run("shard="+shard, func(t *testing.T) { testKeptAnswersAsRebuilt(t, shard) })
	}
}

func testKeptAnswersAsRebuilt(t *testing.T, shard string) {
	ctx := t.Context()
	store := memory.New()
	var bg sync.WaitGroup
	c := testContainer{rid: []byte{1, 2, 3, 4}, shard: shard}
	s := newTestSet(store, Local, &bg)
	// More items than one chunk of a rebuild indexes.
	n := 2*RebuildChunk + 40
	for i := range n {
		writeItem(t, s, store, c, fmt.Sprintf("k%03d", i), testDoc(i))
	}
	for i := 0; i < n; i += 3 {
		writeItem(t, s, store, c, fmt.Sprintf("k%03d", i), nil)
	}
	for i := 1; i < n; i += 5 {
		writeItem(t, s, store, c, fmt.Sprintf("k%03d", i), testDoc(i+100))
	}
	st, err := s.Of(c)
	if err != nil {
		t.Fatal(err)
	}
	kept := indexAnswers(t, st, store)

	reopened, err := newTestSet(store, Local, &bg).Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := indexAnswers(t, reopened, store); got != kept {
		t.Fatalf("opened from their state the indexes answer\n%s\nkept by the writes\n%s", got, kept)
	}

	b := store.NewBatch()
	if err := s.PolicyReplaced(b, c.rid, c.Spec().Fingerprint, "another policy"); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	rebuilt, err := newTestSet(store, Local, &bg).Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := indexAnswers(t, rebuilt, store); got != kept {
		t.Fatalf("rebuilt from the items the indexes answer\n%s\nkept by the writes\n%s", got, kept)
	}
	if whole, err := s.Whole(ctx, rebuilt, store); err != nil || !whole {
		t.Fatalf("after the rebuild the store holds the indexes whole: %v %v", whole, err)
	}
}

// TestSharedIndexesCatchUpWithAQuerySnapshot: in Shared mode a gateway's
// indexes, built before another gateway's writes, answer a query as
// indexes built from its snapshot's items do.
func TestSharedIndexesCatchUpWithAQuerySnapshot(t *testing.T) {
	for _, shard := range []string{"", "/tenant"} {
		t.Run("shard="+shard, func(t *testing.T) { testSharedCatchUp(t, shard) })
	}
}

func testSharedCatchUp(t *testing.T, shard string) {
	ctx := t.Context()
	store := memory.NewShared()
	var bg sync.WaitGroup
	defer bg.Wait()
	c := testContainer{rid: []byte{1, 2, 3, 5}, shard: shard}
	a, b := newTestSet(store, Shared, &bg), newTestSet(store, Shared, &bg)
	for i := range RebuildChunk + 10 { // built in more than one chunk
		writeItem(t, a, store, c, fmt.Sprintf("k%03d", i), testDoc(i))
	}
	if _, err := b.Of(c); err != nil { // b's indexes are built now
		t.Fatal(err)
	}
	for i := RebuildChunk + 10; i < RebuildChunk+30; i++ {
		writeItem(t, a, store, c, fmt.Sprintf("k%03d", i), testDoc(i))
	}
	for i := 0; i < RebuildChunk+30; i += 4 {
		writeItem(t, a, store, c, fmt.Sprintf("k%03d", i), nil)
	}
	for i := 1; i < RebuildChunk+30; i += 6 { // to another tenant
		writeItem(t, a, store, c, fmt.Sprintf("k%03d", i), testDoc(i+101))
	}
	snap, _, w, err := store.SnapshotAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	st, view, err := b.View(b.WithQuery(ctx, w), c, snap)
	if err != nil || st == nil {
		t.Fatalf("no view of the indexes: %v", err)
	}
	got := indexAnswers(t, st, snap)
	stale := view.Stale()
	view.Done()
	if stale != 0 {
		t.Fatalf("%d items stale for a snapshot taken after every write", stale)
	}
	fresh, err := newTestSet(store, Shared, &bg).Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := indexAnswers(t, fresh, snap); got != want {
		t.Fatalf("caught up, the indexes answer\n%s\nbuilt from the snapshot\n%s", got, want)
	}
	if plain, _, _ := b.View(ctx, c, snap); plain != nil {
		t.Fatal("a read that is no query's snapshot took the shared indexes")
	}
}

// TestOffKeepsNoIndexes: a store over several places keeps none, and its
// writes record nothing.
func TestOffKeepsNoIndexes(t *testing.T) {
	store := memory.New()
	var bg sync.WaitGroup
	c := testContainer{rid: []byte{1, 2, 3, 6}}
	s := newTestSet(store, Off, &bg)
	writeItem(t, s, store, c, "k", testDoc(1))
	if st, err := s.Of(c); st != nil || err != nil || s.Kept() {
		t.Fatalf("Off mode opened indexes: %v %v", st, err)
	}
	it, err := store.NewIterator(t.Context(), keys.SearchPrefix(c.rid), storage.PrefixEnd(keys.SearchPrefix(c.rid)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.Next() {
		t.Fatalf("Off mode wrote %x", it.Key())
	}
}
