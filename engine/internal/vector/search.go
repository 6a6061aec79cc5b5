package vector

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"sync/atomic"
)

// graphDistances counts the distances diskANN searches have computed, for
// the benchmarks' distances per query (a cost that does not depend on the
// machine's load).
var graphDistances atomic.Int64

// SearchOptions shape one search.
type SearchOptions struct {
	// K is how many items to return.
	K int
	// ListSize is the beam width of a diskANN search; 0 means 10·K, at
	// least 100 (the service's default searchListSizeMultiplier of 10).
	ListSize int
	// Filter, when set, admits items by key; the search returns only items
	// it admits, and looks further (a wider beam) until it has K of them or
	// has seen the whole graph's reach. It is asked only about items that
	// would make the K closest so far (it may be costly: the engine's reads
	// the item; a widened search may ask again about the same item).
	Filter func(key []byte) bool
	// Exact searches every vector exactly whatever the index's kind (the
	// service's bruteForce argument).
	Exact bool
	// Reader reads the keyspace as of the search's snapshot: a trained
	// quantizedFlat index reads the exact vectors of its best candidates
	// (and an exact search all of them) through it.
	Reader Reader
	// Rerank is how many candidates of a quantizedFlat scan are re-ranked
	// with their exact vectors; 0 means max(20·K, 200).
	Rerank int
}

// Result is one item found: its key and its VectorDistance score.
type Result struct {
	Key   []byte
	Score float64
}

// errNoReader is returned by a search that needs the keyspace without one.
var errNoReader = errors.New("vector: a search of a trained quantizedFlat index needs a Reader")

// Search returns the K items whose vectors are closest to q, closest first,
// with their scores as VectorDistance gives them. q must have the index's
// dimensions.
func (ix *Index) Search(ctx context.Context, q []float32, opt SearchOptions) ([]Result, error) {
	if len(q) != ix.dim {
		return nil, errors.New("vector: the query vector's dimensions differ from the index's")
	}
	if opt.K <= 0 {
		return nil, nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	qs := q
	if ix.cfg.Metric == Cosine {
		qs = normalized(q)
	}
	var top []candidate
	var err error
	switch {
	case !ix.holdsVectors():
		top, err = ix.searchCodes(ctx, qs, opt)
	case ix.cfg.Kind == DiskANN && !opt.Exact:
		top = ix.searchGraph(qs, opt)
	default:
		top = ix.scan(qs, opt)
	}
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(top))
	for i, c := range top {
		out[i] = Result{Key: ix.keys[c.id], Score: ix.score(c.d)}
	}
	return out, nil
}

// dist is the search distance of q (unit length for cosine) to v: lower
// is closer.
func (ix *Index) dist(q, v []float32) float32 {
	switch ix.cfg.Metric {
	case Euclidean:
		return l2sq(q, v)
	case DotProduct:
		return -dot(q, v)
	}
	return 1 - dot(q, v)
}

// score turns a search distance into the service's score.
func (ix *Index) score(d float32) float64 {
	switch ix.cfg.Metric {
	case Euclidean:
		return math.Sqrt(float64(max(d, 0)))
	case DotProduct:
		return -float64(d)
	}
	return 1 - float64(d)
}

// admits reports whether node id is a live item the filter admits.
func (ix *Index) admits(id uint32, f func([]byte) bool) bool {
	return ix.usable(id) && (f == nil || f(ix.keys[id]))
}

// topK keeps the k closest candidates offered, in a max-heap on distance.
type topK struct {
	k int
	h []candidate
}

func (t *topK) worst() float32 {
	if len(t.h) < t.k {
		return float32(math.Inf(1))
	}
	return t.h[0].d
}

func (t *topK) offer(c candidate) {
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if t.h[p].d >= t.h[i].d {
				break
			}
			t.h[p], t.h[i] = t.h[i], t.h[p]
			i = p
		}
		return
	}
	if c.d >= t.h[0].d {
		return
	}
	t.h[0] = c
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && t.h[l].d > t.h[m].d {
			m = l
		}
		if r < len(t.h) && t.h[r].d > t.h[m].d {
			m = r
		}
		if m == i {
			break
		}
		t.h[m], t.h[i] = t.h[i], t.h[m]
		i = m
	}
}

// sorted returns the candidates kept, closest first (ties by id).
func (t *topK) sorted() []candidate {
	out := slices.Clone(t.h)
	sort.Slice(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].id < out[j].id
	})
	return out
}

// scan is the exact search over the vectors in memory.
func (ix *Index) scan(q []float32, opt SearchOptions) []candidate {
	t := topK{k: opt.K}
	for id := range ix.keys {
		if !ix.usable(uint32(id)) {
			continue
		}
		// The filter may read the item: only a node that would make the
		// top k is asked.
		d := ix.dist(q, ix.vec(uint32(id)))
		if d < t.worst() && ix.admits(uint32(id), opt.Filter) {
			t.offer(candidate{d: d, id: uint32(id)})
		}
	}
	return t.sorted()
}

// searchGraph walks the diskANN graph. Every node the walk measures is
// offered to the results when the filter admits it; the beam keeps every
// node for navigation. With a filter, when the walk admitted too few of the
// nodes it measured, it walks once more with the beam widened by the share
// admitted (a filter that admits one item in ten searches ten times as
// wide), at most 64 times the first beam: the results are then the closest
// admitted items of that wider neighbourhood, not a filtered top-k.
func (ix *Index) searchGraph(q []float32, opt SearchOptions) []candidate {
	if !ix.m.hasEntry || ix.live == 0 {
		return nil
	}
	L := opt.ListSize
	if L <= 0 {
		L = max(10*opt.K, 100)
	}
	L = max(L, opt.K)
	s := ix.getScratch()
	defer ix.putScratch(s)
	for widened := false; ; widened = true {
		t := topK{k: opt.K}
		measured, asked, admitted := 0, 0, 0
		ix.walk(s, q, L, false, func(id uint32) float32 {
			d := ix.dist(q, ix.vec(id))
			measured++
			// The filter may read the item: only a node that would make
			// the top k is asked, and the share it admits of those asked
			// estimates its selectivity.
			if d < t.worst() && ix.usable(id) {
				asked++
				if ix.admits(id, opt.Filter) {
					admitted++
					t.offer(candidate{d: d, id: id})
				}
			}
			return d
		})
		graphDistances.Add(int64(measured))
		if opt.Filter == nil || widened || measured >= ix.live {
			return t.sorted()
		}
		share := float64(admitted) / float64(max(asked, 1))
		if share >= 0.9 {
			return t.sorted()
		}
		next := min(int(float64(L)/max(share, 1.0/64)), 64*L)
		if next <= L {
			return t.sorted()
		}
		L = next
	}
}

// searchCodes searches a trained quantizedFlat index: a scan of the codes
// keeps the Rerank closest by the quantized distance, whose exact vectors,
// read from the keyspace, rank the K returned. Exact reads every vector.
func (ix *Index) searchCodes(ctx context.Context, q []float32, opt SearchOptions) ([]candidate, error) {
	if opt.Reader == nil {
		return nil, errNoReader
	}
	var pool []candidate
	if opt.Exact {
		for id := range ix.keys {
			if ix.admits(uint32(id), opt.Filter) {
				pool = append(pool, candidate{id: uint32(id)})
			}
		}
	} else {
		n := opt.Rerank
		if n <= 0 {
			n = max(20*opt.K, 200)
		}
		table := make([]float32, ix.pq.m*pqCentroids)
		ix.pq.table(q, table)
		t := topK{k: n}
		m := ix.pq.m
		for id := range ix.keys {
			if !ix.usable(uint32(id)) {
				continue
			}
			d := adc(table, ix.codes[id*m:(id+1)*m])
			if d < t.worst() && ix.admits(uint32(id), opt.Filter) {
				t.offer(candidate{d: d, id: uint32(id)})
			}
		}
		pool = t.h
	}
	best := topK{k: opt.K}
	buf := make([]float32, ix.dim)
	for _, c := range pool {
		raw, err := opt.Reader.Get(ctx, idKey(recNode, c.id))
		if err != nil {
			return nil, err
		}
		if raw == nil {
			continue // not in the reader's snapshot
		}
		if _, err := decodeNode(ix.cfg.DataType, ix.dim, raw, buf); err != nil {
			return nil, err
		}
		v := buf
		if ix.cfg.Metric == Cosine {
			v = normalized(buf)
		}
		d := ix.dist(q, v)
		if d < best.worst() {
			best.offer(candidate{d: d, id: c.id})
		}
	}
	return best.sorted(), nil
}
