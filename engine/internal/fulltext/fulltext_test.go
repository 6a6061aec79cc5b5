package fulltext

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/btree"
)

// memStore is an ordered in-memory keyspace for the tests.
type memStore struct {
	mu   sync.Mutex
	keys *btree.BTreeG[string]
	vals map[string][]byte
}

func newMemStore() *memStore {
	return &memStore{keys: btree.NewOrderedG[string](16), vals: map[string][]byte{}}
}

func (s *memStore) Get(_ context.Context, key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.vals[string(key)]), nil
}

func (s *memStore) Scan(_ context.Context, lower, upper []byte, fn func(k, v []byte) error) error {
	s.mu.Lock()
	var keys []string
	s.keys.AscendGreaterOrEqual(string(lower), func(k string) bool {
		if upper != nil && k >= string(upper) {
			return false
		}
		keys = append(keys, k)
		return true
	})
	s.mu.Unlock()
	for _, k := range keys {
		s.mu.Lock()
		v, ok := s.vals[k]
		s.mu.Unlock()
		if ok {
			if err := fn([]byte(k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *memStore) Set(key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.ReplaceOrInsert(string(key))
	s.vals[string(key)] = bytes.Clone(value)
	return nil
}

func (s *memStore) Delete(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.Delete(string(key))
	delete(s.vals, string(key))
	return nil
}

// batch holds writes until applied: an aborted transaction's are dropped.
type batch struct{ ops []func(w Writer) error }

func (b *batch) Set(k, v []byte) error {
	k, v = bytes.Clone(k), bytes.Clone(v)
	b.ops = append(b.ops, func(w Writer) error { return w.Set(k, v) })
	return nil
}

func (b *batch) Delete(k []byte) error {
	k = bytes.Clone(k)
	b.ops = append(b.ops, func(w Writer) error { return w.Delete(k) })
	return nil
}

func (b *batch) apply(w Writer) {
	for _, op := range b.ops {
		if err := op(w); err != nil {
			panic(err)
		}
	}
}

func write(t *testing.T, ix *Index, st *memStore, changes ...Change) {
	t.Helper()
	var b batch
	p, err := ix.Prepare(&b, changes...)
	if err != nil {
		t.Fatal(err)
	}
	b.apply(st)
	p.Commit()
}

func text(s string) *string { return &s }

// Each language the service supports analyzes with its stop words and
// stemming; another language is refused, naming the supported ones.
func TestAnalyzersStemAndDropStopWords(t *testing.T) {
	for lang, tc := range map[string]struct{ in, want string }{
		"en-US": {"The running dogs aren't barking", "run dog bark"},
		"fr-FR": {"Les enfants de l'école", "enfant ecol"},
		"de-DE": {"Die Häuser und die Kinder", "haus kind"},
		"es-ES": {"Los niños corriendo en el parque", "niñ corriend parqu"},
		"it-IT": {"Le case degli italiani", "case italian"},
		"pt-BR": {"Os meninos correndo no parque", "menin corrend parqu"},
		"pt-PT": {"Os meninos correndo no parque", "menin corrend parqu"},
	} {
		a, err := AnalyzerFor(lang)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, term := range a.Analyze(tc.in) {
			got = append(got, term.Text)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %q -> %q, want %q", lang, tc.in, strings.Join(got, " "), tc.want)
		}
	}
	if _, err := AnalyzerFor("spa-SPA"); err == nil || !strings.Contains(err.Error(), "en-US, fr-FR, de-DE, it-IT, pt-BR, pt-PT, es-ES") {
		t.Fatalf("unsupported language: %v", err)
	}
	a, _ := AnalyzerFor("en-us")
	if a.Language() != "en-US" {
		t.Fatal("language codes are not case-insensitive")
	}
}

var corpusWords = strings.Fields("red blue green car bicycle train house garden river mountain city road quick slow the a of and runs running ran jumps over lazy dog fox")

func randomText(rng *rand.Rand) string {
	n := 3 + rng.IntN(25)
	w := make([]string, n)
	for i := range w {
		// Zipf-like: early words are common.
		w[i] = corpusWords[int(float64(len(corpusWords))*math.Pow(rng.Float64(), 2))]
	}
	return strings.Join(w, " ")
}

// bruteScore scores every document by analyzing them all.
func bruteScore(a *Analyzer, docs map[string]string, keywords []string) map[string]float64 {
	st := Stats{Hits: make([]int64, len(keywords))}
	kws := make([][]Term, len(keywords))
	for i, k := range keywords {
		kws[i] = a.Analyze(k)
	}
	type row struct {
		tf  []int
		len int
	}
	rows := map[string]row{}
	for key, d := range docs {
		terms := a.Analyze(d)
		st.Documents++
		st.Words += int64(len(terms))
		r := row{tf: make([]int, len(kws)), len: len(terms)}
		for i, kw := range kws {
			r.tf[i] = Occurrences(terms, kw)
			if r.tf[i] > 0 {
				st.Hits[i]++
			}
		}
		rows[key] = r
	}
	out := map[string]float64{}
	for key, r := range rows {
		if s := Score(r.tf, r.len, st); s > 0 {
			out[key] = s
		}
	}
	return out
}

// The index's BM25 scores, statistics and matches equal those of analyzing
// every document anew, through inserts, updates and deletes, and after the
// index is reopened from its keyspace.
func TestIndexScoresAsABruteForceOverTheDocuments(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	st := newMemStore()
	ix, err := Open(ctx, st, "en-US")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for round := range 600 {
		key := fmt.Sprintf("doc%03d", rng.IntN(200))
		if rng.IntN(5) == 0 {
			delete(docs, key)
			write(t, ix, st, Change{Key: []byte(key)})
		} else {
			d := randomText(rng)
			docs[key] = d
			write(t, ix, st, Change{Key: []byte(key), Text: text(d)})
		}
		if round%150 != 149 {
			continue
		}
		re, err := Open(ctx, st, "en-US")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*Index{ix, re} {
			if x.Len() != len(docs) {
				t.Fatalf("round %d: %d documents, want %d", round, x.Len(), len(docs))
			}
			for _, kws := range [][]string{{"red"}, {"running"}, {"red car", "the lazy dog"}, {"blue", "river", "fox"}} {
				want := bruteScore(x.Analyzer(), docs, kws)
				got, err := x.Search(ctx, st, kws, 1000, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%v: %d found, want %d", kws, len(got), len(want))
				}
				for _, r := range got {
					if math.Abs(r.Score-want[string(r.Key)]) > 1e-9 {
						t.Fatalf("%v: %s scores %v, want %v", kws, r.Key, r.Score, want[string(r.Key)])
					}
				}
				if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Score > got[j].Score }) {
					t.Fatalf("%v: not sorted", kws)
				}
			}
			m, err := x.Contains(ctx, st, "lazy dog")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, d := range docs {
				if Occurrences(x.Analyzer().Analyze(d), x.Analyzer().Analyze("lazy dog")) > 0 {
					n++
				}
			}
			if len(m) != n {
				t.Fatalf("contains: %d, want %d", len(m), n)
			}
		}
	}
}

// An aborted Pending leaves statistics and postings as they were.
func TestAbortLeavesTheIndexAsItWas(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	ix, _ := Open(ctx, st, "en-US")
	write(t, ix, st, Change{Key: []byte("a"), Text: text("red car")}, Change{Key: []byte("b"), Text: text("blue car")})
	before, _ := ix.Stats(ctx, st, []string{"car", "red"})
	var b batch
	p, err := ix.Prepare(&b, Change{Key: []byte("a")}, Change{Key: []byte("b"), Text: text("red red")}, Change{Key: []byte("c"), Text: text("car")})
	if err != nil {
		t.Fatal(err)
	}
	p.Abort()
	after, _ := ix.Stats(ctx, st, []string{"car", "red"})
	if fmt.Sprint(before) != fmt.Sprint(after) || ix.Len() != 2 {
		t.Fatalf("after an abort %v, before %v", after, before)
	}
	if m, _ := ix.Contains(ctx, st, "red"); len(m) != 1 || string(m[0].Key) != "a" {
		t.Fatalf("contains after an abort: %v", m)
	}
}
