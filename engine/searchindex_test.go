package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

const searchDims = 8

// searchContainerBody is a container with a vector index of kind on /v
// (cosine, float32, searchDims dimensions) and a full-text index on /text.
func searchContainerBody(id, kind string, extra string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"partitionKey":{"paths":["/pk"]}%s,
		"vectorEmbeddingPolicy":{"vectorEmbeddings":[{"path":"/v","dataType":"float32","dimensions":%d,"distanceFunction":"cosine"}]},
		"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/text","language":"en-US"}]},
		"indexingPolicy":{"includedPaths":[{"path":"/*"}],"excludedPaths":[{"path":"/v/*"}],
			"vectorIndexes":[{"path":"/v","type":%q}],"fullTextIndexes":[{"path":"/text"}]}}`, id, extra, searchDims, kind))
}

func openSearchEngine(t *testing.T, store storage.Store, opts Options, kind, extra string) *Engine {
	t.Helper()
	ctx := t.Context()
	e, err := Open(ctx, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateContainer(ctx, "db", searchContainerBody("c", kind, extra), nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func randomVector(r *rand.Rand) []float64 {
	v := make([]float64, searchDims)
	for i := range v {
		v[i] = math.Round(r.NormFloat64()*1000) / 1000
	}
	return v
}

var searchWords = strings.Fields("red green blue river mountain stone glass paper quick slow running jumps")

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for i := range 3 + r.IntN(5) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(searchWords[r.IntN(len(searchWords))])
	}
	return b.String()
}

func searchItem(id, pk string, v []float64, text string, extra string) string {
	vb, _ := json.Marshal(v)
	tb, _ := json.Marshal(text)
	return fmt.Sprintf(`{"id":%q,"pk":%q,"v":%s,"text":%s%s}`, id, pk, vb, tb, extra)
}

// checkSearchIndexesMatchItems asserts the invariant of the search indexes:
// each holds exactly the stored items' values at its path, as an index
// rebuilt from the items would. A vector index's exact search from a fixed
// vector returns every item with a vector, with the score its stored vector
// gives; a full-text index counts the items with text, their terms, and
// the items holding each word.
func checkSearchIndexesMatchItems(t *testing.T, e *Engine) {
	t.Helper()
	checkSearchIndexesMatchItemsIn(t, e, "db", "c", "v")
}

func checkSearchIndexesMatchItemsIn(t *testing.T, e *Engine, db, coll, vpath string) {
	t.Helper()
	ctx := t.Context()
	c, cerr := e.lookupContainer(db, coll)
	if cerr != nil {
		t.Fatal(cerr)
	}
	// On a shared store the gateway's indexes are checked as a query sees
	// them: caught up with a snapshot, against its items.
	var r storage.Reader = e.store
	if e.shared != nil {
		snap, _, w, err := e.shared.store.SnapshotAll(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		ctx, r = e.search.withQuerySnapshot(ctx, w), snap
	}
	if _, err := e.search.of(c); err != nil { // built, however long it takes
		t.Fatal(err)
	}
	st, view, err := e.search.viewOf(ctx, c, r)
	if err != nil {
		t.Fatal(err)
	}
	if !e.search.kept() {
		if st != nil {
			t.Fatal("a store over several places keeps search indexes: their LSNs are not one order")
		}
		return
	}
	if st == nil {
		t.Fatal("no search indexes")
	}
	defer view.Done()
	prefix := keys.ItemContainerPrefix(c.rid)
	it, err := r.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		t.Fatal(err)
	}
	vecs := map[string][]float32{}
	texts := map[string]string{}
	for it.Next() {
		s, err := decodeItem(it.Key(), it.Value())
		if err != nil {
			t.Fatal(err)
		}
		k := string(it.Key()[len(prefix):])
		if v := searchindex.VectorAt(searchindex.RawAt(s.doc, []string{vpath}), st.Vectors[0].Index.Config()); v != nil {
			vecs[k] = v
		}
		var text string
		if raw := searchindex.RawAt(s.doc, []string{"text"}); raw != nil && json.Unmarshal(raw, &text) == nil {
			texts[k] = text
		}
	}
	it.Close()
	vi := st.Vectors[0]
	q := make([]float32, searchDims)
	for i := range q {
		q[i] = float32(i + 1)
	}
	got, err := vi.Index.Search(ctx, q, vector.SearchOptions{K: len(vecs) + 10, Exact: true, Reader: vi.State(r)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(vecs) || vi.Index.Len() != len(vecs) {
		t.Fatalf("the vector index holds %d items (Len %d), the store %d with a vector", len(got), vi.Index.Len(), len(vecs))
	}
	for _, r := range got {
		v, ok := vecs[string(r.Key)]
		if !ok {
			t.Fatalf("the vector index holds %q, which has no vector in the store", r.Key)
		}
		if want := vector.Score(vi.Index.Config().Metric, q, v); math.Abs(want-r.Score) > 1e-4 {
			t.Fatalf("item %q scores %v in the index, %v from its stored vector", r.Key, r.Score, want)
		}
	}
	if len(st.Texts) == 0 {
		return
	}
	ti := st.Texts[0]
	stats, err := ti.Index.Stats(ctx, ti.State(r), searchWords)
	if err != nil {
		t.Fatal(err)
	}
	an := ti.Index.Analyzer()
	var words int64
	hits := make([]int64, len(searchWords))
	for _, text := range texts {
		terms := an.Analyze(text)
		words += int64(len(terms))
		for i, w := range searchWords {
			kw := an.Analyze(w)
			for _, term := range terms {
				if len(kw) == 1 && term.Text == kw[0].Text {
					hits[i]++
					break
				}
			}
		}
	}
	if stats.Documents != int64(len(texts)) || stats.Words != words || !slices.Equal(stats.Hits, hits) {
		t.Fatalf("full-text statistics %d documents, %d words, hits %v; the items give %d, %d, %v",
			stats.Documents, stats.Words, stats.Hits, len(texts), words, hits)
	}
	// The statistics queries rank by come from the index, and equal those
	// counted over the items (phrases included).
	kws := append(slices.Clone(searchWords), "quick slow", "glass river")
	fromIndex, ok := e.search.fullTextIndexStats(ctx, c, r, []string{"text"}, kws)
	if !ok {
		t.Fatal("the full-text index gave no statistics")
	}
	counted, err := e.search.fullTextStats(ctx, c, r, "/text", kws, an)
	if err != nil {
		t.Fatal(err)
	}
	if fromIndex.Documents != counted.Documents || fromIndex.Words != counted.Words || !slices.Equal(fromIndex.Hits, counted.Hits) {
		t.Fatalf("BM25 statistics from the index %+v, counted over the items %+v", fromIndex, counted)
	}
}

// TestSearchIndexesFollowEveryKindOfWrite: creates, replaces, upserts,
// patches, deletes, TTL expiry and partition-key deletes all change the
// vector and full-text indexes in the item's transaction, so that after
// each the indexes hold exactly the stored items' vectors and texts.
func TestSearchIndexesFollowEveryKindOfWrite(t *testing.T) {
	for _, kind := range []string{"flat", "quantizedFlat", "diskANN"} {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			now := time.Unix(1_700_000_000, 0)
			var mu sync.Mutex
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			e := openSearchEngine(t, newTestStore(t), Options{Now: clock}, kind, `,"defaultTtl":-1`)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range 60 {
				pk := fmt.Sprintf("p%d", i%4)
				extra := ""
				if i%10 == 0 {
					extra = `,"ttl":5`
				}
				if _, err := e.CreateItem(ctx, req("", pk, searchItem(fmt.Sprint(i), pk, randomVector(r), randomText(r), extra))); err != nil {
					t.Fatal(err)
				}
			}
			checkSearchIndexesMatchItems(t, e)
			// Replace and upsert change vectors and texts; one loses its
			// vector, one gets a vector of the wrong dimensions.
			if _, err := e.ReplaceItem(ctx, req("1", "p1", searchItem("1", "p1", randomVector(r), randomText(r), ""))); err != nil {
				t.Fatal(err)
			}
			if _, err := e.UpsertItem(ctx, req("", "p2", `{"id":"2","pk":"p2","text":"no vector here"}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.UpsertItem(ctx, req("", "p3", `{"id":"3","pk":"p3","v":[1,2,3],"text":7}`)); err != nil {
				t.Fatal(err)
			}
			checkSearchIndexesMatchItems(t, e)
			// Patch sets a vector component and the text.
			patch := `[{"op":"set","path":"/v/0","value":42.5},{"op":"set","path":"/text","value":"glass river"}]`
			if _, err := e.PatchItem(ctx, &ItemRequest{Database: "db", Container: "c", ID: "5", PartitionKey: StringKey("p1"), HasPartitionKey: true, Body: []byte(patch)}); err != nil {
				t.Fatal(err)
			}
			checkSearchIndexesMatchItems(t, e)
			// Deletes.
			for _, id := range []string{"4", "8"} {
				if _, err := e.DeleteItem(ctx, req(id, "p0", "")); err != nil {
					t.Fatal(err)
				}
			}
			checkSearchIndexesMatchItems(t, e)
			// TTL expiry, by the sweeper.
			mu.Lock()
			now = now.Add(time.Minute)
			mu.Unlock()
			if n, err := e.sweeper.sweep(ctx); err != nil || n == 0 {
				t.Fatalf("sweep: %d deleted, %v", n, err)
			}
			checkSearchIndexesMatchItems(t, e)
			// A partition-key delete.
			if _, err := e.DeleteAllItemsByPartitionKey(ctx, "db", "c", StringKey("p3")); err != nil {
				t.Fatal(err)
			}
			checkSearchIndexesMatchItems(t, e)
		})
	}
}

// TestFailedWriteLeavesSearchIndexesAsTheyWere: a transaction that fails
// after its item writes (an atomic batch whose last create conflicts) aborts
// its index changes with it.
func TestFailedWriteLeavesSearchIndexesAsTheyWere(t *testing.T) {
	ctx := t.Context()
	e := openSearchEngine(t, newTestStore(t), Options{}, "diskANN", "")
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		if _, err := e.CreateItem(ctx, req("", "a", searchItem(fmt.Sprint(i), "a", randomVector(r), randomText(r), ""))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CreateItem(ctx, req("", "a", searchItem("3", "a", randomVector(r), randomText(r), ""))); statusOf(err) != 409 {
		t.Fatalf("create of an existing id: %v", err)
	}
	// An atomic batch whose writes are all indexed before its last
	// operation fails: nothing of it stays, in the store or the indexes.
	res, err := e.ExecuteBatch(ctx, &BatchRequest{Database: "db", Container: "c", PartitionKey: StringKey("a"), HasPartitionKey: true, Atomic: true,
		Operations: []BatchOperation{
			{Type: BatchUpsert, Body: []byte(searchItem("1", "a", randomVector(r), randomText(r), ""))},
			{Type: BatchCreate, Body: []byte(searchItem("new", "a", randomVector(r), randomText(r), ""))},
			{Type: BatchDelete, ID: "2"},
			{Type: BatchCreate, Body: []byte(searchItem("3", "a", randomVector(r), randomText(r), ""))},
		}})
	if err != nil || res.Results[3].Status != 409 {
		t.Fatalf("batch: %+v, %v", res, err)
	}
	checkSearchIndexesMatchItems(t, e)
	big := strings.Repeat("x", MaxItemBytes)
	if _, err := e.UpsertItem(ctx, req("", "a", searchItem("4", "a", randomVector(r), big, ""))); statusOf(err) != 413 {
		t.Fatalf("upsert of an item too large: %v", err)
	}
	checkSearchIndexesMatchItems(t, e)
}

// vectorQueryIDs runs a query over the whole container and returns its rows' ids
// and whether a vector index served it.
func vectorQueryIDs(t *testing.T, e *Engine, text string) ([]string, bool) {
	t.Helper()
	res, err := e.QueryItems(t.Context(), &QueryRequest{Database: "db", Container: "c", Query: text, SinglePartitionKeyRange: true, IndexMetrics: true, MaxItems: 1000})
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	var ids []string
	for _, row := range res.Items {
		var v struct{ ID string }
		if err := json.Unmarshal(row, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	used := false
	if res.IndexUtilization != nil {
		for _, u := range res.IndexUtilization.UtilizedSingle {
			used = used || strings.Contains(u.Spec, "vector index")
		}
	}
	return ids, used
}

// TestFilteredVectorSearchKeepsRecall: a top-10 vector query whose WHERE
// admits one item in ten gets its candidates from the index with the
// filter applied during the search, so it finds (nearly) the exact top 10,
// not the few of an unfiltered top 10 that pass; the index metrics name the
// vector index.
func TestFilteredVectorSearchKeepsRecall(t *testing.T) {
	for _, kind := range []string{"flat", "quantizedFlat", "diskANN"} {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			e := openSearchEngine(t, newTestStore(t), Options{}, kind, "")
			r := rand.New(rand.NewPCG(5, 6))
			n := 1500
			if testOnPostgres {
				n = 300
			}
			for i := range n {
				pk := fmt.Sprintf("p%d", i%7)
				cat := "common"
				if i%10 == 0 {
					cat = "rare"
				}
				if _, err := e.CreateItem(ctx, req("", pk, searchItem(fmt.Sprint(i), pk, randomVector(r), "", fmt.Sprintf(`,"cat":%q`, cat)))); err != nil {
					t.Fatal(err)
				}
			}
			warmSearchIndexes(t, e) // a query waits for a build only so long
			var recall, queries float64
			for range 10 {
				qv, _ := json.Marshal(randomVector(r))
				q := fmt.Sprintf("SELECT TOP 10 c.id FROM c WHERE c.cat = 'rare' ORDER BY VectorDistance(c.v, %s)", qv)
				exact, usedExact := vectorQueryIDs(t, e, fmt.Sprintf("SELECT TOP 10 c.id FROM c WHERE c.cat = 'rare' ORDER BY VectorDistance(c.v, %s, true)", qv))
				got, used := vectorQueryIDs(t, e, q)
				if usedExact {
					t.Fatal("a bruteForce query used the vector index")
				}
				if used != (e.search.kept()) {
					t.Fatalf("vector index used: %v, on a store over several places: %v", used, testOnPlaced)
				}
				if len(got) != 10 || len(exact) != 10 {
					t.Fatalf("%d rows from the index, %d exact; want 10", len(got), len(exact))
				}
				for _, id := range got {
					if slices.Contains(exact, id) {
						recall++
					}
				}
				queries++
			}
			recall /= queries * 10
			want := 0.9
			if kind == "flat" {
				want = 1
			}
			if recall < want {
				t.Fatalf("filtered recall@10 %.2f, want at least %.2f", recall, want)
			}
		})
	}
}

// TestSearchIndexesReopenFromTheirState: an engine opened again on the same
// store loads the indexes from their keys, as they were; one whose state
// was lost (the meta record gone, as a rebuild cut short leaves it) rebuilds
// them from the items.
func TestSearchIndexesReopenFromTheirState(t *testing.T) {
	skipOnPostgres(t, "the indexes are kept on single-process stores only")
	if testOnShared {
		t.Skip("the indexes are kept on single-process stores only")
	}
	ctx := t.Context()
	store := newTestStore(t)
	e := openSearchEngine(t, store, Options{}, "diskANN", "")
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 100 {
		if _, err := e.CreateItem(ctx, req("", "a", searchItem(fmt.Sprint(i), "a", randomVector(r), randomText(r), ""))); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.lookupContainer("db", "c")
	checkSearchIndexesMatchItems(t, e)
	e.Close()
	reopen := func() *Engine {
		e, err := Open(ctx, store, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	e = reopen()
	checkSearchIndexesMatchItems(t, e)
	e.Close()
	b := store.NewBatch()
	if err := b.Delete(keys.SearchMetaKey(c.rid)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	e = reopen()
	checkSearchIndexesMatchItems(t, e)
	if _, err := e.store.Get(ctx, keys.SearchMetaKey(c.rid)); err != nil {
		t.Fatalf("the rebuild left no meta record: %v", err)
	}
}

// TestSearchIndexesRebuiltWhenThePolicyChanges: replacing the full-text
// policy (another language for the path) rebuilds the full-text index from
// the items, in the new language's analysis.
func TestSearchIndexesRebuiltWhenThePolicyChanges(t *testing.T) {
	ctx := t.Context()
	e := openSearchEngine(t, newTestStore(t), Options{}, "flat", "")
	for i, text := range []string{"the running dogs", "los perros corren", "running and jumping"} {
		if _, err := e.CreateItem(ctx, req("", "a", searchItem(fmt.Sprint(i), "a", make([]float64, searchDims), text, ""))); err != nil {
			t.Fatal(err)
		}
	}
	checkSearchIndexesMatchItems(t, e)
	body := strings.Replace(string(searchContainerBody("c", "flat", "")), `"fullTextPaths":[{"path":"/text","language":"en-US"}]`, `"fullTextPaths":[{"path":"/text","language":"es-ES"}]`, 1)
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(body), ""); err != nil {
		t.Fatal(err)
	}
	c, _ := e.lookupContainer("db", "c")
	st, err := e.search.of(c)
	if err != nil {
		t.Fatal(err)
	}
	if st != nil && st.Texts[0].Index.Analyzer().Language() != "es-ES" {
		t.Fatalf("after the replace the full-text index analyzes in %s", st.Texts[0].Index.Analyzer().Language())
	}
	checkSearchIndexesMatchItems(t, e)
	if _, err := e.CreateItem(ctx, req("", "a", searchItem("9", "a", make([]float64, searchDims), "perros", ""))); err != nil {
		t.Fatal(err)
	}
	checkSearchIndexesMatchItems(t, e)
}

// TestConcurrentWritersKeepSearchIndexesWhole: writers of many partitions
// at once, some failing, leave the indexes equal to the items.
func TestConcurrentWritersKeepSearchIndexesWhole(t *testing.T) {
	ctx := context.Background()
	e := openSearchEngine(t, newTestStore(t), Options{}, "diskANN", "")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			pk := fmt.Sprintf("p%d", w)
			for i := range 60 {
				id := fmt.Sprint(i % 20)
				switch i % 3 {
				case 0, 1:
					e.UpsertItem(ctx, req("", pk, searchItem(id, pk, randomVector(r), randomText(r), "")))
				case 2:
					e.DeleteItem(ctx, req(id, pk, ""))
				}
			}
		}()
	}
	wg.Wait()
	checkSearchIndexesMatchItems(t, e)
}

// TestPolicyChangeUnderWritesKeepsIndexesWhole: replaces of the full-text
// policy while writers write rebuild the indexes without losing a write or
// leaving the old indexes' records in the new ones' keyspace: afterwards,
// and after the engine is opened again from its store, the indexes hold
// exactly the items.
func TestPolicyChangeUnderWritesKeepsIndexesWhole(t *testing.T) {
	ctx := context.Background()
	store := newTestStore(t)
	e := openSearchEngine(t, store, Options{}, "diskANN", "")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			pk := fmt.Sprintf("p%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprint(i % 30)
				if i%4 == 3 {
					e.DeleteItem(ctx, req(id, pk, ""))
				} else {
					e.UpsertItem(ctx, req("", pk, searchItem(id, pk, randomVector(r), randomText(r), "")))
				}
			}
		}()
	}
	for i := range 6 {
		lang := []string{"es-ES", "en-US"}[i%2]
		body := strings.Replace(string(searchContainerBody("c", "diskANN", "")), `"language":"en-US"}]`, `"language":"`+lang+`"}]`, 1)
		if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(body), ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	checkSearchIndexesMatchItems(t, e)
	if e.shared != nil {
		return
	}
	e.Close()
	e, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	checkSearchIndexesMatchItems(t, e)
}

// TestSearchIndexDroppedAndAddedAgainIsRebuilt: a full-text index removed
// by a replace misses the writes made without it; added again, it is
// rebuilt from the items, not taken back as it was (nor after a restart).
func TestSearchIndexDroppedAndAddedAgainIsRebuilt(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	e, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	with := `{"id":"c","partitionKey":{"paths":["/pk"]},"fullTextPolicy":{"defaultLanguage":"en-US","fullTextPaths":[{"path":"/text","language":"en-US"}]},
		"indexingPolicy":{"includedPaths":[{"path":"/*"}],"fullTextIndexes":[{"path":"/text"}]}}`
	without := strings.Replace(with, `,"fullTextIndexes":[{"path":"/text"}]`, `,"fullTextIndexes":[]`, 1)
	if _, err := e.CreateContainer(ctx, "db", []byte(with), nil); err != nil {
		t.Fatal(err)
	}
	write := func(id, text string) {
		t.Helper()
		if _, err := e.UpsertItem(ctx, req("", "a", fmt.Sprintf(`{"id":%q,"pk":"a","text":%q}`, id, text))); err != nil {
			t.Fatal(err)
		}
	}
	stats := func() (fromIndex, counted string) {
		t.Helper()
		c, _ := e.lookupContainer("db", "c")
		kws := []string{"river", "stone"}
		st, ok := e.search.fullTextIndexStats(ctx, c, e.store, []string{"text"}, kws)
		an, _ := fulltext.AnalyzerFor("en-US")
		ct, err := e.search.fullTextStats(ctx, c, e.store, "/text", kws, an)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ok, st), fmt.Sprint(true, ct)
	}
	write("1", "river stone")
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(without), ""); err != nil {
		t.Fatal(err)
	}
	write("2", "stone stone")
	write("1", "a river")
	if _, err := e.ReplaceContainer(ctx, "db", "c", []byte(with), ""); err != nil {
		t.Fatal(err)
	}
	if e.shared != nil {
		return
	}
	if got, want := stats(); got != want {
		t.Fatalf("after the index was added again: statistics %s from the index, %s counted", got, want)
	}
	e.Close()
	if e, err = Open(ctx, store, Options{}); err != nil {
		t.Fatal(err)
	}
	if got, want := stats(); got != want {
		t.Fatalf("after a restart: statistics %s from the index, %s counted", got, want)
	}
}
