package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/searchindex"
)

// TestSharedBM25StatisticsCountStaleItemsAsTheSnapshotHasThem: on a shared
// store, while writers write on both gateways and later queries catch a
// gateway's indexes up past a query's snapshot (its items written since are
// stale in them), the BM25 statistics the full-text index gives that query
// are still the ones counted over every item of its snapshot (words and
// phrases), without counting over the items: the stale items are
// corrected for one by one.
func TestSharedBM25StatisticsCountStaleItemsAsTheSnapshotHasThem(t *testing.T) {
	ctx := t.Context()
	a, b := openSearchPair(t, "flat")
	if searchMode(a.store) != searchindex.Shared {
		t.Skip("search indexes follow a shared store only")
	}
	r := rand.New(rand.NewPCG(27, 3))
	for i := range 40 {
		pk := fmt.Sprintf("base%d", i%3)
		if _, err := a.CreateItem(ctx, req("", pk, searchItem(fmt.Sprint("base", i), pk, randomVector(r), randomText(r), ""))); err != nil {
			t.Fatal(err)
		}
	}
	warmSearchIndexes(t, a, b)
	stop := noiseWriters(t, a, b)
	defer stop()
	an, err := fulltext.AnalyzerFor("en-US")
	if err != nil {
		t.Fatal(err)
	}
	rounds := 30
	if testOnPostgres {
		rounds = 12
	}
	withStale := 0
	for i := range rounds {
		e := []*Engine{a, b}[i%2]
		c, snap, _, w, err := e.seam.itemsSnapshot(ctx, "db", "c", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		qctx := e.search.withQuerySnapshot(ctx, w)
		time.Sleep(5 * time.Millisecond)
		searchQueryOn(t, e, "SELECT TOP 1 c.id FROM c WHERE FullTextContains(c.text, 'red') ORDER BY VectorDistance(c.v, [1,2,3,4,5,6,7,8])")
		_, view, err := e.search.viewOf(qctx, c, snap)
		if err != nil {
			t.Fatal(err)
		}
		if view != nil && view.Stale() > 0 {
			withStale++
		}
		view.Done()
		kws := []string{searchWords[r.IntN(len(searchWords))], searchWords[r.IntN(len(searchWords))] + " " + searchWords[r.IntN(len(searchWords))], "the"}
		got, ok := e.search.fullTextIndexStats(qctx, c, snap, []string{"text"}, kws)
		if !ok {
			t.Fatalf("round %d: the full-text index gave no statistics", i)
		}
		want, err := e.search.fullTextStats(qctx, c, snap, "/text", kws, an)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d (%d stale): the index's statistics for %q are %v, counted over the snapshot's items %v", i, withStale, kws, got, want)
		}
		snap.Close()
	}
	stop()
	if withStale == 0 {
		t.Fatal("no query had a stale item: the test did not test the correction")
	}
	t.Logf("%d of %d queries had stale items", withStale, rounds)
}
