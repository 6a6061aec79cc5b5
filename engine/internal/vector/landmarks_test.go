package vector

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGraphSearchReachesEveryNodeJustPastTheLandmarkCount: with a little
// more nodes than landmarks, nearly every node is a landmark; each one the
// walk measures must also be expandable, or the few nodes that only
// landmarks link to are never reached. A search for every item with a beam
// wider than the graph returns them all.
func TestGraphSearchReachesEveryNodeJustPastTheLandmarkCount(t *testing.T) {
	ctx := t.Context()
	for _, n := range []int{landmarkCount + 3, landmarkCount + 40, 2*landmarkCount + 1} {
		store := NewMemStore()
		ix, err := Open(ctx, store, Config{Kind: DiskANN, Dimensions: 16, Metric: Euclidean, MaxDegree: 8})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(n), 1))
		for i := range n {
			v := make([]float32, 16)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			p, err := ix.Prepare(store, Change{Key: []byte(fmt.Sprint(i)), Vector: v})
			if err != nil {
				t.Fatal(err)
			}
			p.Commit()
		}
		q := make([]float32, 16)
		got, err := ix.Search(ctx, q, SearchOptions{K: n, ListSize: 4 * n})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Errorf("%d nodes: a search with a beam wider than the graph found %d", n, len(got))
		}
	}
}

// TestSearchAsksTheFilterOnlyForLikelyResults: a filter may read the item
// (the engine's loads the document and evaluates the query's WHERE), so a
// search asks it only about nodes that would make the top k, not about
// every node it measures: with 4,000 nodes and k = 10, far fewer than the
// nodes for every kind of index.
func TestSearchAsksTheFilterOnlyForLikelyResults(t *testing.T) {
	ctx := t.Context()
	const n = 4000
	for _, kind := range []Kind{Flat, QuantizedFlat, DiskANN} {
		store := NewMemStore()
		ix, err := Open(ctx, store, Config{Kind: kind, Dimensions: 16, Metric: Euclidean, MaxDegree: 16, SearchListSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, 7))
		var changes []Change
		for i := range n {
			v := make([]float32, 16)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			changes = append(changes, Change{Key: []byte(fmt.Sprint(i)), Vector: v})
		}
		p, err := ix.Prepare(store, changes...)
		if err != nil {
			t.Fatal(err)
		}
		p.Commit()
		asked := 0
		got, err := ix.Search(ctx, make([]float32, 16), SearchOptions{K: 10, Reader: store, Filter: func([]byte) bool { asked++; return true }})
		if err != nil || len(got) != 10 {
			t.Fatalf("%v: %d results, %v", kind, len(got), err)
		}
		if asked > n/4 {
			t.Errorf("%v: the filter was asked about %d of %d nodes for a top 10", kind, asked, n)
		}
	}
}
