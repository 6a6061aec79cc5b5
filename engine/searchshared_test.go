package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

// openSearchPair opens two engines, as two gateways, on two handles of one
// shared store of the pass, and creates on A a container with a vector
// index of kind on /v and a full-text index on /text.
func openSearchPair(t *testing.T, kind string) (a, b *Engine) {
	t.Helper()
	ctx := t.Context()
	_, open := newTestShared(t)
	sa, sb := open(), open()
	var err error
	if a, err = Open(ctx, sa, Options{SweepInterval: -1}); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(ctx, sb, Options{SweepInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	if _, err := a.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateContainer(ctx, "db", searchContainerBody("c", kind, ""), nil); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// searchQueryOn runs a query over the whole container on e and returns its
// rows' ids and the search indexes the index metrics name.
func searchQueryOn(t *testing.T, e *Engine, text string) (ids []string, indexes []string) {
	t.Helper()
	res, err := e.QueryItems(context.Background(), &QueryRequest{Database: "db", Container: "c", Query: text, SinglePartitionKeyRange: true, IndexMetrics: true, MaxItems: 1000})
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return rowIDs(t, res.Items), searchIndexUses(res.IndexUtilization)
}

func rowIDs(t *testing.T, rows []json.RawMessage) []string {
	t.Helper()
	ids := []string{}
	for _, row := range rows {
		var v struct{ ID string }
		if err := json.Unmarshal(row, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	return ids
}

func searchIndexUses(u *IndexUtilization) []string {
	var out []string
	if u != nil {
		for _, use := range u.UtilizedSingle {
			if strings.Contains(use.Spec, "vector index") || strings.Contains(use.Spec, "full-text index") {
				out = append(out, use.Spec)
			}
		}
	}
	return out
}

// warmSearchIndexes builds the engines' search indexes of container c,
// however long it takes (a query waits for them only so long).
func warmSearchIndexes(t *testing.T, engines ...*Engine) {
	t.Helper()
	warmSearchIndexesIn(t, "c", engines...)
}

func warmSearchIndexesIn(t *testing.T, coll string, engines ...*Engine) {
	t.Helper()
	for _, e := range engines {
		c, err := e.Container(t.Context(), "db", coll)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.search.of(c); err != nil {
			t.Fatal(err)
		}
	}
}

// probeWord is a word no other item holds, one per probe.
func probeWord(i int, tag string) string {
	var b strings.Builder
	b.WriteString("zq" + tag)
	for {
		b.WriteByte(byte('a' + i%26))
		if i /= 26; i == 0 {
			return b.String()
		}
	}
}

// noiseWriters upserts and deletes random items in partitions of their
// own on every engine, two writers each, until the returned stop is
// called.
func noiseWriters(t *testing.T, engines ...*Engine) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g, e := range engines {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), uint64(w)))
				pk := fmt.Sprintf("noise%d-%d", g, w)
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					id := fmt.Sprint(r.IntN(30))
					var err error
					if i%4 == 3 {
						_, err = e.DeleteItem(context.Background(), req(id, pk, ""))
						if statusOf(err) == 404 {
							err = nil
						}
					} else {
						_, err = e.UpsertItem(context.Background(), req("", pk, searchItem(id, pk, randomVector(r), randomText(r), "")))
					}
					if err != nil {
						t.Errorf("noise write on gateway %d: %v", g, err)
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// TestSharedSearchIndexesFollowTheOtherGatewaysWrites: on a shared store a
// gateway's vector and full-text indexes answer for the writes of another
// gateway made just before the query, while writers write on both: an
// item created on one is the top VectorDistance match of its vector, the
// one FullTextContains of its word finds and the first FullTextScore of
// it ranks on the other; replaced, its old vector and word find it no
// more, its new word does; deleted, nothing finds it. The index metrics
// name the indexes that answered. Afterwards each gateway's indexes hold
// exactly the stored items.
func TestSharedSearchIndexesFollowTheOtherGatewaysWrites(t *testing.T) {
	for _, kind := range []string{"flat", "diskANN"} {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			a, b := openSearchPair(t, kind)
			indexed := a.search.kept()
			r := rand.New(rand.NewPCG(21, 22))
			// Items enough that a top 3 is a choice.
			for i := range 40 {
				pk := fmt.Sprintf("base%d", i%3)
				if _, err := a.CreateItem(ctx, req("", pk, searchItem(fmt.Sprint("base", i), pk, randomVector(r), randomText(r), ""))); err != nil {
					t.Fatal(err)
				}
			}
			warmSearchIndexes(t, a, b)
			stop := noiseWriters(t, a, b)
			defer stop()
			probes := 24
			if testOnPostgres {
				probes = 10
			}
			engines := []*Engine{a, b}
			for i := range probes {
				w, q := engines[i%2], engines[1-i%2]
				id, pk := fmt.Sprint("probe", i), "probe"
				v := randomVector(r)
				neg := make([]float64, len(v))
				for j := range v {
					neg[j] = -v[j]
				}
				word, word2 := probeWord(i, "a"), probeWord(i, "b")
				vq := func(v []float64) string {
					vb, _ := json.Marshal(v)
					return fmt.Sprintf("SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, %s)", vb)
				}
				contains := func(word string) string {
					return fmt.Sprintf("SELECT c.id FROM c WHERE FullTextContains(c.text, %q)", word)
				}
				rank := func(word string) string {
					// One holds the word: a TOP 1 is what the index answers.
					return fmt.Sprintf("SELECT TOP 1 c.id FROM c ORDER BY RANK FullTextScore(c.text, %q)", word)
				}
				check := func(stage, text string, ok func(ids []string) bool) {
					t.Helper()
					ids, uses := searchQueryOn(t, q, text)
					if !ok(ids) {
						t.Fatalf("probe %d %s: %s on the other gateway: %v", i, stage, text, ids)
					}
					// A ranking with no item holding the word is exact.
					if indexed && len(uses) == 0 && !(stage == "deleted" && strings.Contains(text, "RANK")) {
						t.Fatalf("probe %d %s: %s: no search index answered", i, stage, text)
					}
				}
				hasNot := func(ids []string) bool { return !slices.Contains(ids, id) }
				only := func(ids []string) bool { return slices.Equal(ids, []string{id}) }
				none := func(ids []string) bool { return len(ids) == 0 }
				first := func(ids []string) bool { return len(ids) > 0 && ids[0] == id }

				if _, err := w.CreateItem(ctx, req("", pk, searchItem(id, pk, v, "a "+word+" here", ""))); err != nil {
					t.Fatal(err)
				}
				check("created", vq(v), first)
				check("created", contains(word), only)
				check("created", rank(word), first)

				if _, err := w.ReplaceItem(ctx, req(id, pk, searchItem(id, pk, neg, "now "+word2, ""))); err != nil {
					t.Fatal(err)
				}
				check("replaced", vq(v), hasNot)
				check("replaced", contains(word), none)
				check("replaced", contains(word2), only)
				check("replaced", rank(word2), first)

				if _, err := w.DeleteItem(ctx, req(id, pk, "")); err != nil {
					t.Fatal(err)
				}
				check("deleted", vq(neg), hasNot)
				check("deleted", contains(word2), none)
				check("deleted", rank(word2), hasNot)
			}
			stop()
			checkSearchIndexesMatchItems(t, a)
			checkSearchIndexesMatchItems(t, b)
		})
	}
}

// TestSharedSearchAnswersAsExactOverTheSameSnapshot: while writers write on
// both gateways, and queries on later snapshots catch the indexes up past
// the query's snapshot, a query a gateway's indexes answer (a flat vector TOP 10,
// FullTextContains narrowed by the full-text index, a TOP 5 by
// FullTextScore) returns exactly what its exact evaluation over the same
// snapshot returns (bruteForce, the full-text call in a disjunction the
// index cannot narrow, the ranking without TOP).
func TestSharedSearchAnswersAsExactOverTheSameSnapshot(t *testing.T) {
	ctx := t.Context()
	a, b := openSearchPair(t, "flat")
	r := rand.New(rand.NewPCG(31, 32))
	for i := range 60 {
		pk := fmt.Sprintf("base%d", i%3)
		if _, err := a.CreateItem(ctx, req("", pk, searchItem(fmt.Sprint("base", i), pk, randomVector(r), randomText(r), ""))); err != nil {
			t.Fatal(err)
		}
	}
	warmSearchIndexes(t, a, b)
	stop := noiseWriters(t, a, b)
	defer stop()
	rounds := 40
	if testOnPostgres {
		rounds = 15
	}
	served := 0
	for i := range rounds {
		e := []*Engine{a, b}[i%2]
		c, snap, _, w, err := e.seam.itemsSnapshot(ctx, "db", "c", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		qctx := e.search.withQuerySnapshot(ctx, w)
		if i%3 != 0 {
			// Another query, on a later snapshot, catches the indexes up
			// past this one's.
			time.Sleep(5 * time.Millisecond)
			searchQueryOn(t, e, "SELECT TOP 1 c.id FROM c WHERE FullTextContains(c.text, 'red') ORDER BY VectorDistance(c.v, [1,2,3,4,5,6,7,8])")
		}
		run := func(text string) ([]string, []string) {
			t.Helper()
			res, err := e.queries.queryIn(qctx, c, snap, keys.ItemContainerPrefix(c.rid), &QueryRequest{Database: "db", Container: "c", Query: text, SinglePartitionKeyRange: true, IndexMetrics: true, MaxItems: 1000}, nil, pageBounds{})
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			return rowIDs(t, res.Items), searchIndexUses(res.IndexUtilization)
		}
		vb, _ := json.Marshal(randomVector(r))
		word := searchWords[r.IntN(len(searchWords))]
		for _, pair := range [][2]string{
			{fmt.Sprintf("SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, %s)", vb),
				fmt.Sprintf("SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, %s, true)", vb)},
			{fmt.Sprintf("SELECT c.id FROM c WHERE FullTextContains(c.text, %q)", word),
				fmt.Sprintf("SELECT c.id FROM c WHERE FullTextContains(c.text, %q) OR c.nothing = 1", word)},
			{fmt.Sprintf("SELECT TOP 5 c.id FROM c ORDER BY RANK FullTextScore(c.text, %q)", word),
				fmt.Sprintf("SELECT c.id FROM c ORDER BY RANK FullTextScore(c.text, %q)", word)},
		} {
			got, uses := run(pair[0])
			want, exactUses := run(pair[1])
			if strings.Contains(pair[0], "TOP 5") {
				want = want[:min(5, len(want))]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: %s answers %v; exactly over the same snapshot %v", i, pair[0], got, want)
			}
			if len(exactUses) > 0 {
				t.Fatalf("%s: an index answered the exact evaluation: %v", pair[1], exactUses)
			}
			if len(uses) > 0 {
				served++
			}
		}
		snap.Close()
	}
	stop()
	if a.search.kept() && served == 0 {
		t.Fatal("no query was answered by a search index")
	}
}

// TestSharedSearchIndexesOlderThanThePrunedChangesAreRebuilt: when the
// change records a gateway's indexes would catch up from have been pruned
// (the gateway was idle past their retention), its next query rebuilds the
// indexes from the items instead of missing those changes.
func TestSharedSearchIndexesOlderThanThePrunedChangesAreRebuilt(t *testing.T) {
	ctx := t.Context()
	a, b := openSearchPair(t, "flat")
	if !a.search.kept() {
		t.Skip("no search indexes on a store over several places")
	}
	r := rand.New(rand.NewPCG(41, 42))
	for i := range 20 {
		if _, err := a.CreateItem(ctx, req("", "p", searchItem(fmt.Sprint(i), "p", randomVector(r), randomText(r), ""))); err != nil {
			t.Fatal(err)
		}
	}
	warmSearchIndexes(t, a, b)
	if ids, _ := searchQueryOn(t, b, `SELECT c.id FROM c WHERE FullTextContains(c.text, "zqlate")`); len(ids) != 0 {
		t.Fatalf("before the write: %v", ids)
	}
	// Written on A, and its record pruned before B catches up.
	v := randomVector(r)
	if _, err := a.CreateItem(ctx, req("", "p", searchItem("late", "p", v, "zqlate", ""))); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteItem(ctx, req("3", "p", "")); err != nil {
		t.Fatal(err)
	}
	w, err := a.shared.store.Watermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Container(ctx, "db", "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.sweeper.pruneSearchChangesOf(ctx, c, w); err != nil {
		t.Fatal(err)
	}
	prefix := keys.SearchChangePrefix(c.rid)
	it, err := a.store.NewIterator(ctx, prefix, keys.SearchChangeHorizon(c.rid), false)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		t.Fatalf("a change record below the horizon is left: %x", it.Key())
	}
	it.Close()
	ids, uses := searchQueryOn(t, b, `SELECT c.id FROM c WHERE FullTextContains(c.text, "zqlate")`)
	if !slices.Equal(ids, []string{"late"}) || len(uses) == 0 {
		t.Fatalf("after the prune, on the other gateway: %v (indexes used %v)", ids, uses)
	}
	vb, _ := json.Marshal(v)
	if ids, _ := searchQueryOn(t, b, fmt.Sprintf("SELECT TOP 1 c.id FROM c ORDER BY VectorDistance(c.v, %s)", vb)); !slices.Equal(ids, []string{"late"}) {
		t.Fatalf("after the prune, the vector's top 1 on the other gateway: %v", ids)
	}
	checkSearchIndexesMatchItems(t, b)
}

// TestSharedSearchIndexesOfAContainerDeletedOnAnotherGatewayAreDropped: a
// gateway's in-memory indexes of a container another gateway deletes, or
// deletes and creates again, are let go once its catalog reload notices,
// and the container of the same name created again is searched through
// indexes of its own.
func TestSharedSearchIndexesOfAContainerDeletedOnAnotherGatewayAreDropped(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprint("recreated=", recreate), func(t *testing.T) {
			ctx := t.Context()
			a, b := openSearchPair(t, "flat")
			if !b.search.kept() {
				t.Skip("a store over several places keeps no search index")
			}
			r := rand.New(rand.NewPCG(31, 32))
			for i := range 10 {
				if _, err := a.CreateItem(ctx, req("", "p", searchItem(fmt.Sprint("old", i), "p", randomVector(r), randomText(r), ""))); err != nil {
					t.Fatal(err)
				}
			}
			warmSearchIndexes(t, b)
			old, err := b.Container(ctx, "db", "c")
			if err != nil {
				t.Fatal(err)
			}
			if !b.search.set.Holds(old.rid) {
				t.Fatal("the gateway holds no indexes of the container it searched")
			}
			if err := a.DeleteContainer(ctx, "db", "c", ""); err != nil {
				t.Fatal(err)
			}
			v := randomVector(r)
			if recreate {
				if _, err := a.CreateContainer(ctx, "db", searchContainerBody("c", "flat", ""), nil); err != nil {
					t.Fatal(err)
				}
				if _, err := a.CreateItem(ctx, req("", "p", searchItem("new", "p", v, "a new text", ""))); err != nil {
					t.Fatal(err)
				}
			}
			// Any request of the gateway's checks the catalog's version.
			if _, err := b.ListContainers(ctx, "db"); err != nil {
				t.Fatal(err)
			}
			if b.search.set.Holds(old.rid) {
				t.Fatal("the gateway still holds the indexes of the container deleted on the other")
			}
			if !recreate {
				return
			}
			vb, _ := json.Marshal(v)
			ids, uses := searchQueryOn(t, b, fmt.Sprintf("SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, %s)", vb))
			if !slices.Equal(ids, []string{"new"}) {
				t.Fatalf("the container created again answers %v", ids)
			}
			warmSearchIndexes(t, b)
			ids, uses = searchQueryOn(t, b, fmt.Sprintf("SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, %s)", vb))
			if !slices.Equal(ids, []string{"new"}) || len(uses) == 0 {
				t.Fatalf("the container created again answers %v through %v", ids, uses)
			}
		})
	}
}
