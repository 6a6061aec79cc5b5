package vector

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The assembly kernels agree with the plain Go ones on every length,
// including the tails that are not multiples of the vector width.
func TestDistanceKernelsAgreeWithGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		a, b := randVec(rng, n), randVec(rng, n)
		if d, g := dot(a, b), dotGo(a, b); !close32(d, g) {
			t.Fatalf("dot n=%d: %v, Go %v", n, d, g)
		}
		if d, g := l2sq(a, b), l2sqGo(a, b); !close32(d, g) {
			t.Fatalf("l2sq n=%d: %v, Go %v", n, d, g)
		}
	}
}

func close32(a, b float32) bool {
	return math.Abs(float64(a-b)) <= 1e-4*math.Max(1, math.Abs(float64(b)))
}

// float16 storage rounds to the nearest half-precision value, as the
// service stores a float16 embedding.
func TestHalfPrecisionRoundsToNearest(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{0, 0}, {1, 1}, {-2.5, -2.5}, {0.1, 0.0999755859375}, {65504, 65504},
		{1.0009765625, 1.0009765625}, {1.00048828125, 1}, {6e-8, 5.960464477539063e-08},
	} {
		if got := halfToFloat(floatToHalf(tc.in)); got != tc.want {
			t.Errorf("%v -> %v, want %v", tc.in, got, tc.want)
		}
	}
	if _, ok := Normalize(Config{Dimensions: 1, DataType: Float16}, []float64{70000}); ok {
		t.Error("a float16 component past 65504 was accepted")
	}
	if _, ok := Normalize(Config{Dimensions: 2, DataType: Uint8}, []float64{1, 256}); ok {
		t.Error("a uint8 component of 256 was accepted")
	}
	if _, ok := Normalize(Config{Dimensions: 2, DataType: Int8}, []float64{1.5, 2}); ok {
		t.Error("an int8 component of 1.5 was accepted")
	}
	if _, ok := Normalize(Config{Dimensions: 3, DataType: Float32}, []float64{1, 2}); ok {
		t.Error("a vector of 2 dimensions was accepted for 3")
	}
}

// Score gives VectorDistance's values: cosine similarity, dot product and
// Euclidean distance.
func TestScoreIsTheServicesVectorDistance(t *testing.T) {
	a, b := []float32{1, 2, 3}, []float32{4, 5, 6}
	if got := Score(DotProduct, a, b); got != 32 {
		t.Errorf("dot %v", got)
	}
	if got := Score(Euclidean, a, b); math.Abs(got-math.Sqrt(27)) > 1e-6 {
		t.Errorf("euclidean %v", got)
	}
	if got := Score(Cosine, a, b); math.Abs(got-32/(math.Sqrt(14)*math.Sqrt(77))) > 1e-6 {
		t.Errorf("cosine %v", got)
	}
	if got := Score(Cosine, a, []float32{0, 0, 0}); got != 0 {
		t.Errorf("cosine with zero %v", got)
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// clustered returns n vectors of dim around a few centres.
func clustered(rng *rand.Rand, n, dim, centres int) [][]float32 {
	cs := make([][]float32, centres)
	for i := range cs {
		cs[i] = randVec(rng, dim)
	}
	out := make([][]float32, n)
	for i := range out {
		c := cs[rng.IntN(centres)]
		v := make([]float32, dim)
		for j := range v {
			v[j] = c[j] + 0.5*float32(rng.NormFloat64())
		}
		out[i] = v
	}
	return out
}

func key(i int) []byte { return []byte(fmt.Sprintf("item-%06d", i)) }

// load writes every vector through one Pending per vector, applied at once.
func load(t testing.TB, ix *Index, st *MemStore, vecs [][]float32, from int) {
	t.Helper()
	for i, v := range vecs {
		var b Batch
		p, err := ix.Prepare(&b, Change{Key: key(from + i), Vector: v})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Apply(st); err != nil {
			t.Fatal(err)
		}
		p.Commit()
	}
}

// exact is the brute-force answer over the vectors still present.
func exact(m Metric, vecs map[string][]float32, q []float32, k int, admit func(string) bool) []string {
	type kd struct {
		k string
		s float64
	}
	var all []kd
	for key, v := range vecs {
		if admit != nil && !admit(key) {
			continue
		}
		all = append(all, kd{key, Score(m, q, v)})
	}
	slices.SortFunc(all, func(a, b kd) int {
		if a.s == b.s {
			return 0
		}
		if (a.s > b.s) == m.HigherIsCloser() {
			return -1
		}
		return 1
	})
	out := []string{}
	for i := 0; i < k && i < len(all); i++ {
		out = append(out, all[i].k)
	}
	return out
}

func recall(got []Result, want []string) float64 {
	if len(want) == 0 {
		return 1
	}
	set := map[string]bool{}
	for _, w := range want {
		set[w] = true
	}
	hit := 0
	for _, g := range got {
		if set[string(g.Key)] {
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}

// Each index kind finds the nearest items as an exact search does (flat
// exactly, the approximate kinds with high recall), for every metric.
func TestSearchFindsTheNearestItems(t *testing.T) {
	defer func(n int) { TrainAt = n }(TrainAt)
	TrainAt = 400
	ctx := context.Background()
	for _, kind := range []Kind{Flat, QuantizedFlat, DiskANN} {
		for _, m := range []Metric{Cosine, DotProduct, Euclidean} {
			t.Run(kind.String()+"/"+m.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(kind), uint64(m)))
				const n, dim = 800, 24
				vecs := clustered(rng, n, dim, 20)
				st := NewMemStore()
				ix, err := Open(ctx, st, Config{Kind: kind, Dimensions: dim, Metric: m, QuantizationByteSize: 12})
				if err != nil {
					t.Fatal(err)
				}
				load(t, ix, st, vecs, 0)
				byKey := map[string][]float32{}
				for i, v := range vecs {
					byKey[string(key(i))] = v
				}
				total := 0.0
				const queries = 40
				for range queries {
					q := randVec(rng, dim)
					got, err := ix.Search(ctx, q, SearchOptions{K: 10, Reader: st})
					if err != nil {
						t.Fatal(err)
					}
					want := exact(m, byKey, q, 10, nil)
					total += recall(got, want)
					if kind == Flat {
						for i := range got {
							if string(got[i].Key) != want[i] {
								t.Fatalf("flat result %d: %s, want %s", i, got[i].Key, want[i])
							}
							if s := Score(m, q, byKey[want[i]]); math.Abs(s-got[i].Score) > 1e-4*math.Max(1, math.Abs(s)) {
								t.Fatalf("flat score %v, exact %v", got[i].Score, s)
							}
						}
					}
				}
				if r := total / queries; r < 0.9 {
					t.Fatalf("recall@10 %.3f", r)
				}
			})
		}
	}
}

// A search with a filter returns only the items the filter admits, and
// finds the nearest of them even when one in ten passes.
func TestFilteredSearchKeepsRecall(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	const n, dim = 2000, 16
	vecs := clustered(rng, n, dim, 30)
	st := NewMemStore()
	ix, err := Open(ctx, st, Config{Kind: DiskANN, Dimensions: dim, Metric: Euclidean})
	if err != nil {
		t.Fatal(err)
	}
	load(t, ix, st, vecs, 0)
	byKey := map[string][]float32{}
	for i, v := range vecs {
		byKey[string(key(i))] = v
	}
	admit := func(k string) bool { return k[len(k)-1] == '3' } // one in ten
	total := 0.0
	for range 30 {
		q := randVec(rng, dim)
		got, err := ix.Search(ctx, q, SearchOptions{K: 10, Filter: func(k []byte) bool { return admit(string(k)) }})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if !admit(string(g.Key)) {
				t.Fatalf("%s does not pass the filter", g.Key)
			}
		}
		total += recall(got, exact(Euclidean, byKey, q, 10, admit))
	}
	if r := total / 30; r < 0.95 {
		t.Fatalf("filtered recall@10 %.3f", r)
	}
}

// An index opened from its keyspace answers as the one that wrote it, for
// every kind, after inserts, updates and deletes; nothing deleted is found.
func TestReopenedIndexAnswersAsTheOneThatWroteIt(t *testing.T) {
	defer func(n int) { TrainAt = n }(TrainAt)
	TrainAt = 120
	ctx := context.Background()
	for _, kind := range []Kind{Flat, QuantizedFlat, DiskANN} {
		t.Run(kind.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(kind)))
			const dim = 12
			cfg := Config{Kind: kind, Dimensions: dim, Metric: Cosine, QuantizationByteSize: 6, MaxDegree: 16, SearchListSize: 40}
			st := NewMemStore()
			ix, err := Open(ctx, st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			present := map[string][]float32{}
			for round := range 1200 {
				i := rng.IntN(400)
				var b Batch
				var c Change
				if rng.IntN(3) == 0 {
					c = Change{Key: key(i)}
					delete(present, string(key(i)))
				} else {
					v := randVec(rng, dim)
					c = Change{Key: key(i), Vector: v}
					present[string(key(i))] = v
				}
				p, err := ix.Prepare(&b, c)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Apply(st); err != nil {
					t.Fatal(err)
				}
				p.Commit()
				if round%300 == 299 && ix.Len() != len(present) {
					t.Fatalf("round %d: %d items, want %d", round, ix.Len(), len(present))
				}
			}
			re, err := Open(ctx, st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if re.Len() != len(present) {
				t.Fatalf("reopened: %d items, want %d", re.Len(), len(present))
			}
			for range 20 {
				q := randVec(rng, dim)
				a, err := ix.Search(ctx, q, SearchOptions{K: 10, Reader: st})
				if err != nil {
					t.Fatal(err)
				}
				b, err := re.Search(ctx, q, SearchOptions{K: 10, Reader: st})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(a, b, func(x, y Result) bool { return string(x.Key) == string(y.Key) && x.Score == y.Score }) {
					t.Fatalf("the reopened index answers %v, the writer %v", keysOf(b), keysOf(a))
				}
				for _, r := range a {
					if _, ok := present[string(r.Key)]; !ok {
						t.Fatalf("found %s, which was deleted", r.Key)
					}
				}
				if r := recall(a, exact(Cosine, present, q, 10, nil)); r < 0.8 {
					t.Fatalf("recall %.2f after churn", r)
				}
			}
		})
	}
}

func keysOf(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Key))
	}
	return out
}

// An aborted Pending leaves the index as it was, in memory; its writes,
// dropped by the caller, never reach the keyspace.
func TestAbortLeavesTheIndexAsItWas(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	for _, kind := range []Kind{Flat, QuantizedFlat, DiskANN} {
		st := NewMemStore()
		cfg := Config{Kind: kind, Dimensions: 8, Metric: Euclidean, QuantizationByteSize: 4}
		ix, err := Open(ctx, st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		load(t, ix, st, clustered(rng, 200, 8, 4), 0)
		q := randVec(rng, 8)
		before, _ := ix.Search(ctx, q, SearchOptions{K: 20, Reader: st})
		var b Batch
		p, err := ix.Prepare(&b, Change{Key: key(1)}, Change{Key: key(500), Vector: q}, Change{Key: key(2), Vector: randVec(rng, 8)})
		if err != nil {
			t.Fatal(err)
		}
		p.Abort()
		after, _ := ix.Search(ctx, q, SearchOptions{K: 20, Reader: st})
		if !slices.EqualFunc(before, after, func(x, y Result) bool { return string(x.Key) == string(y.Key) && x.Score == y.Score }) {
			t.Fatalf("%v: after an abort %v, before %v", kind, keysOf(after), keysOf(before))
		}
		if ix.Len() != 200 {
			t.Fatalf("%v: %d items after an abort", kind, ix.Len())
		}
		re, err := Open(ctx, st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := re.Search(ctx, q, SearchOptions{K: 20, Reader: st})
		if !slices.EqualFunc(before, again, func(x, y Result) bool { return string(x.Key) == string(y.Key) }) {
			t.Fatalf("%v: reopened %v, before %v", kind, keysOf(again), keysOf(before))
		}
	}
}

// A keyspace written for one configuration is not opened with another.
func TestOpenRefusesAnotherConfiguration(t *testing.T) {
	ctx := context.Background()
	st := NewMemStore()
	ix, _ := Open(ctx, st, Config{Kind: Flat, Dimensions: 4})
	load(t, ix, st, [][]float32{{1, 2, 3, 4}}, 0)
	if _, err := Open(ctx, st, Config{Kind: DiskANN, Dimensions: 4}); err == nil {
		t.Fatal("a flat keyspace opened as diskANN")
	}
}
