package fulltext

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// admitByHash admits about frac of the keys, the same ones every time.
func admitByHash(frac float64) func(key []byte) (bool, error) {
	return func(key []byte) (bool, error) {
		h := fnv.New32a()
		h.Write(key)
		return float64(h.Sum32()%1000) < frac*1000, nil
	}
}

// many is TopOptions.Admit of a filter of one key, which it asks once per
// key (a key asked twice fails the test).
func many(t *testing.T, one func([]byte) (bool, error)) func([][]byte) ([]bool, error) {
	if one == nil {
		return nil
	}
	asked := map[string]bool{}
	return func(keys [][]byte) ([]bool, error) {
		ok := make([]bool, len(keys))
		for i, k := range keys {
			if asked[string(k)] {
				t.Fatalf("%s handed to Admit twice", k)
			}
			asked[string(k)] = true
			var err error
			if ok[i], err = one(k); err != nil {
				return nil, err
			}
		}
		return ok, nil
	}
}

// checkTop compares Top's answer with the full evaluation: every admitted
// holder scored (Search over all of them), ordered by score.
func checkTop(t *testing.T, ix *Index, r Reader, kws []string, k int, admit func([]byte) (bool, error)) TopReport {
	t.Helper()
	ctx := context.Background()
	st, err := ix.Stats(ctx, r, kws)
	if err != nil {
		t.Fatal(err)
	}
	filter := func(key []byte) bool {
		if admit == nil {
			return true
		}
		ok, _ := admit(key)
		return ok
	}
	all, err := ix.Search(ctx, r, kws, math.MaxInt, filter)
	if err != nil {
		t.Fatal(err)
	}
	if st.Documents == 0 {
		return TopReport{}
	}
	got, rep, err := ix.Top(ctx, r, kws, TopOptions{K: k, Stats: st, Admit: many(t, admit)})
	if err != nil {
		t.Fatalf("%v top %d: %v", kws, k, err)
	}
	want := map[string]float64{}
	for _, x := range all {
		want[string(x.Key)] = x.Score
	}
	gotKeys := map[string]bool{}
	for i, x := range got {
		s, ok := want[string(x.Key)]
		if !ok {
			t.Fatalf("%v top %d: %s is not an admitted holder", kws, k, x.Key)
		}
		if s != x.Score {
			t.Fatalf("%v top %d: %s scores %v, the full evaluation %v", kws, k, x.Key, x.Score, s)
		}
		if i > 0 && x.Score > got[i-1].Score {
			t.Fatalf("%v top %d: not highest first", kws, k)
		}
		gotKeys[string(x.Key)] = true
	}
	if len(all) <= k {
		if len(got) != len(all) {
			t.Fatalf("%v top %d: %d returned, %d admitted holders", kws, k, len(got), len(all))
		}
		return rep
	}
	if len(got) < k {
		t.Fatalf("%v top %d: %d returned of %d admitted holders", kws, k, len(got), len(all))
	}
	// Every admitted holder scoring as much as the k-th best is returned
	// (ties included), and what is returned beyond k ties with the k-th.
	kth := all[k-1].Score
	for _, x := range all {
		if x.Score >= kth && !gotKeys[string(x.Key)] {
			t.Fatalf("%v top %d: %s (score %v) left out, the %d-th scores %v", kws, k, x.Key, x.Score, k, kth)
		}
	}
	for _, x := range got[k:] {
		if x.Score < kth-tieTolerance(kth) {
			t.Fatalf("%v top %d: %s (score %v) returned below the %d-th (%v)", kws, k, x.Key, x.Score, k, kth)
		}
	}
	return rep
}

// Top's best-first walk over block bounds gives the full evaluation's top k
// (same documents, same scores, every tie of the k-th), for random corpora,
// keywords (words and phrases), filters and k, through inserts, updates and
// deletes and after the index is reopened; a bound below what a block's
// documents score makes it fail.
func TestTopFindsTheFullEvaluationsBest(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		st := newMemStore()
		ix, err := Open(ctx, st, "en-US")
		if err != nil {
			t.Fatal(err)
		}
		keyspace := 300 + rng.IntN(900)
		for round := range 1500 {
			key := fmt.Sprintf("doc%04d", rng.IntN(keyspace))
			if rng.IntN(6) == 0 {
				write(t, ix, st, Change{Key: []byte(key)})
			} else {
				write(t, ix, st, Change{Key: []byte(key), Text: text(randomText(rng))})
			}
			if round%500 != 499 {
				continue
			}
			re, err := Open(ctx, st, "en-US")
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []*Index{ix, re} {
				for range 12 {
					var kws []string
					for range 1 + rng.IntN(3) {
						w := corpusWords[rng.IntN(len(corpusWords))]
						if rng.IntN(4) == 0 {
							w += " " + corpusWords[rng.IntN(len(corpusWords))]
						}
						kws = append(kws, w)
					}
					var admit func([]byte) (bool, error)
					if rng.IntN(2) == 0 {
						admit = admitByHash(rng.Float64())
					}
					checkTop(t, x, st, kws, 1+rng.IntN(30), admit)
				}
			}
		}
	}
}

// For a word most documents hold, Top reads a few of its blocks, not all:
// the documents that score highest are found from the bounds. (A bound
// that does not depend on the block, or none, reads them all.)
func TestTopOfACommonWordReadsFewBlocks(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	st := newMemStore()
	ix, _ := Open(ctx, st, "en-US")
	filler := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda")
	for i := range 5000 {
		w := make([]string, 5+rng.IntN(20))
		for j := range w {
			w[j] = filler[rng.IntN(len(filler))]
		}
		w[0] = "common"
		if i%400 == 17 {
			w = append(w[:3], "common", "common")
		}
		write(t, ix, st, Change{Key: fmt.Appendf(nil, "doc%05d", i), Text: text(strings.Join(w, " "))})
	}
	rep := checkTop(t, ix, st, []string{"common"}, 10, nil)
	if rep.Read*4 > rep.Blocks || rep.Scored*4 > rep.Postings {
		t.Fatalf("read %d of %d blocks, scored %d of %d holders", rep.Read, rep.Blocks, rep.Scored, rep.Postings)
	}
	t.Logf("read %d of %d blocks, scored %d of %d holders", rep.Read, rep.Blocks, rep.Scored, rep.Postings)
}

// StatsExcept counts as Stats would over the documents without the ones
// left out (words and phrases, keys the index does not hold ignored).
func TestStatsExceptLeavesTheDocumentsOut(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 9))
	st := newMemStore()
	ix, _ := Open(ctx, st, "en-US")
	docs := map[string]string{}
	for i := range 300 {
		key := fmt.Sprintf("doc%03d", rng.IntN(200))
		if i%7 == 0 {
			delete(docs, key)
			write(t, ix, st, Change{Key: []byte(key)})
			continue
		}
		docs[key] = randomText(rng)
		write(t, ix, st, Change{Key: []byte(key), Text: text(docs[key])})
	}
	kws := []string{"red", "lazy dog", "the", "running", "blue car"}
	for range 20 {
		var except [][]byte
		rest := map[string]string{}
		for k, d := range docs {
			if rng.IntN(4) == 0 {
				except = append(except, []byte(k))
			} else {
				rest[k] = d
			}
		}
		except = append(except, []byte("never written"))
		got, err := ix.StatsExcept(ctx, st, kws, except)
		if err != nil {
			t.Fatal(err)
		}
		want := Stats{Hits: make([]int64, len(kws))}
		for _, d := range rest {
			terms := ix.Analyzer().Analyze(d)
			want.Documents++
			want.Words += int64(len(terms))
			for i, kw := range kws {
				if a := ix.Analyzer().Analyze(kw); len(a) > 0 && Occurrences(terms, a) > 0 {
					want.Hits[i]++
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("without %d documents: %v, want %v", len(except)-1, got, want)
		}
	}
}
