package fulltext

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// The top documents of FullTextScore are found without scoring every
// document that holds a keyword: the postings are cut into blocks of
// blockSize document ids, and the index keeps, for each term and block, an
// upper bound of what any document of the block can score for the term
// (block-max, as Lucene's and Ding & Suel's block-max WAND keep). BM25 of
// one term in one document grows with the term's count and falls with the
// document's length, so the most a block's documents score is reached at one
// of its Pareto-best (count, length) pairs, whatever the container's
// statistics are: the bound is a few such pairs (maxImpacts), the best
// ones of the block, from which the bound for any statistics follows.
//
// Top reads the blocks in order of their bound, best first, scores the
// documents of each from its postings, and hands the documents out highest
// score first once no unread block can hold a better one; it stops when the
// caller has admitted k and no unread document can score as much as the
// k-th.
//
// The bounds are kept in memory and only ever raised: a document's
// removal leaves them as they were (a looser bound, still a bound), an
// aborted change too. So they bound every document of every state the
// index has held since it was opened, which is what a query reading the
// postings of an older snapshot needs.
const (
	blockSize  = 64
	maxImpacts = 4
)

// impact is a (count, length) pair of a term in a document.
type impact struct {
	tf     uint32
	length uint32
}

// dominates reports whether a scores at least as much as b for any
// statistics.
func (a impact) dominates(b impact) bool { return a.tf >= b.tf && a.length <= b.length }

// blockBound is the bound of one term in one block: the Pareto-best pairs
// of its documents, at most maxImpacts (more are merged into one pair that
// dominates them).
type blockBound struct {
	block uint32
	n     uint8
	pts   [maxImpacts]impact
}

// raise makes b bound a document with pair p too.
func (b *blockBound) raise(p impact) {
	for i := 0; i < int(b.n); i++ {
		if b.pts[i].dominates(p) {
			return
		}
	}
	k := 0
	for i := 0; i < int(b.n); i++ {
		if !p.dominates(b.pts[i]) {
			b.pts[k] = b.pts[i]
			k++
		}
	}
	if k == maxImpacts {
		// Merge the two last into the pair that dominates both.
		a, c := b.pts[k-2], b.pts[k-1]
		b.pts[k-2] = impact{tf: max(a.tf, c.tf), length: min(a.length, c.length)}
		k--
	}
	b.pts[k] = p
	b.n = uint8(k + 1)
}

// raiseBound makes the bounds of term cover document id, with count tf
// and length. The caller holds ix.mu for writing.
func (ix *Index) raiseBound(term string, id uint32, tf int, length uint32) {
	if ix.bounds == nil {
		ix.bounds = map[string][]blockBound{}
	}
	p := impact{tf: uint32(min(tf, math.MaxUint32)), length: length}
	blk := id / blockSize
	bs := ix.bounds[term]
	i := len(bs)
	if i == 0 || bs[i-1].block < blk {
		ix.bounds[term] = append(bs, blockBound{block: blk, n: 1, pts: [maxImpacts]impact{p}})
		return
	}
	i = sort.Search(len(bs), func(j int) bool { return bs[j].block >= blk })
	if i == len(bs) || bs[i].block != blk {
		bs = slices.Insert(bs, i, blockBound{block: blk})
		ix.bounds[term] = bs
	}
	bs[i].raise(p)
}

// loadBounds computes the bounds from the postings kept in r (Open).
func (ix *Index) loadBounds(ctx context.Context, r Reader) error {
	return r.Scan(ctx, []byte{recPosting}, []byte{recPosting + 1}, func(k, v []byte) error {
		if len(k) < 6 || k[len(k)-5] != 0 {
			return fmt.Errorf("%w: posting key", ErrCorrupt)
		}
		id := binary.BigEndian.Uint32(k[len(k)-4:])
		tf, n := binary.Uvarint(v)
		if n <= 0 || id >= uint32(len(ix.docs)) {
			return fmt.Errorf("%w: posting", ErrCorrupt)
		}
		ix.raiseBound(string(k[1:len(k)-5]), id, int(min(tf, math.MaxUint32)), ix.docs[id].length)
		return nil
	})
}

// termScore is BM25 of one keyword of idf in a document where it occurs
// tf times, of length terms (Score's, term by term).
func termScore(idf float64, tf, length, avgdl float64) float64 {
	return idf * tf * (K1 + 1) / (tf + K1*(1-B+B*length/avgdl))
}

// TopOptions are the arguments of Top.
type TopOptions struct {
	// K is how many documents the caller wants admitted.
	K int
	// Stats are the statistics to score with: the ones the execution of the
	// query ranks by, so that Top's order is the execution's.
	Stats Stats
	// Admit says which documents (by item key) count: the query's scope
	// and filter; ok[i] is keys[i]'s answer. Top asks it highest score
	// first, once for each document it hands out, several at a time (as
	// many as it expects to need to reach K, from the share admitted so
	// far; at most maxAdmitBatch) so that a caller reading the items reads
	// them in few round trips; nil admits all. An error stops Top.
	Admit func(keys [][]byte) (ok []bool, err error)
}

// maxAdmitBatch is the most documents Top hands Admit at once.
const maxAdmitBatch = 256

// admitBatch is how many documents to hand Admit next: enough to admit the
// need missing at the share admitted so far (counting one more admitted
// than seen, so that the first batch is need), or a full batch for the
// ties of the k-th.
func admitBatch(need, admitted, seen int) int {
	if need <= 0 {
		return maxAdmitBatch
	}
	n := int(math.Ceil(float64(need) * float64(seen+1) / float64(admitted+1)))
	return min(max(n, 1), maxAdmitBatch)
}

// TopReport says what Top read.
type TopReport struct {
	// Postings is how many documents hold the keywords' first terms (in
	// the index's memory; summed over the keywords), Scored how many
	// documents Top scored from the postings.
	Postings, Scored int
	// Blocks is how many blocks of postings hold a keyword, Read how many
	// of them Top read.
	Blocks, Read int
}

// ErrBound reports that a document read from the postings scores above the
// bound the index keeps for its block: the postings are not of a state the
// index's memory has held. The caller then ranks every holder instead.
var ErrBound = errors.New("fulltext: a document scores above its block's bound")

// tieTolerance is how far below the k-th admitted score a document still
// counts as tied with it: the execution computes the same BM25, but may add
// its terms in another order.
func tieTolerance(s float64) float64 { return 1e-9 * max(1, math.Abs(s)) }

// Top returns the documents holding any of the keywords that Admit admits,
// highest BM25 score (with opt.Stats) first, as many as it takes to have
// the opt.K best and every document scoring as much as the k-th of them
// (within a rounding tolerance): every admitted document left out scores
// below the k-th returned. Fewer than K are returned when fewer are
// admitted, and then every admitted holder is. Documents of equal score
// come in document order; the caller orders ties as it must. Postings
// and document records are read from r, the bounds from the index's
// memory.
func (ix *Index) Top(ctx context.Context, r Reader, keywords []string, opt TopOptions) ([]Result, TopReport, error) {
	var rep TopReport
	st := opt.Stats
	if opt.K <= 0 || st.Documents <= 0 || st.Words <= 0 || len(st.Hits) != len(keywords) {
		return nil, rep, errors.New("fulltext: Top needs K > 0 and the statistics of every keyword")
	}
	n := float64(st.Documents)
	avgdl := float64(st.Words) / n
	kws := make([][]Term, len(keywords))
	idf := make([]float64, len(keywords))
	for i, kw := range keywords {
		kws[i] = ix.an.Analyze(kw)
		h := float64(st.Hits[i])
		idf[i] = math.Log(1 + (n-h+0.5)/(h+0.5))
	}
	// Each block's bound: the sum over the keywords of the best of their
	// first term's pairs (a phrase occurs no more often than its first
	// term).
	ub := map[uint32]float64{}
	ix.mu.RLock()
	for i, kw := range kws {
		if len(kw) == 0 {
			continue
		}
		for _, b := range ix.bounds[kw[0].Text] {
			best := 0.0
			for _, p := range b.pts[:b.n] {
				best = max(best, termScore(idf[i], float64(p.tf), float64(p.length), avgdl))
			}
			ub[b.block] += best
		}
		rep.Postings += int(ix.df[kw[0].Text])
	}
	ix.mu.RUnlock()
	type blockUB struct {
		block uint32
		ub    float64
	}
	blocks := make([]blockUB, 0, len(ub))
	for b, u := range ub {
		blocks = append(blocks, blockUB{b, u})
	}
	sort.Slice(blocks, func(i, j int) bool {
		if blocks[i].ub != blocks[j].ub {
			return blocks[i].ub > blocks[j].ub
		}
		return blocks[i].block < blocks[j].block
	})
	rep.Blocks = len(blocks)

	h := &scoredHeap{}
	var out []Result
	threshold := math.Inf(-1) // the k-th admitted score, once there is one
	next, seen := 0, 0        // seen: the documents handed to Admit
	for {
		nextUB := math.Inf(-1)
		if next < len(blocks) {
			nextUB = blocks[next].ub
		}
		if h.Len() > 0 && (*h)[0].score >= nextUB {
			// The documents no unread block can outscore, best first.
			var batch []scored
			want := admitBatch(opt.K-len(out), len(out), seen)
			for h.Len() > 0 && (*h)[0].score >= nextUB && len(batch) < want {
				if len(out) >= opt.K && (*h)[0].score < threshold-tieTolerance(threshold) {
					break
				}
				batch = append(batch, heap.Pop(h).(scored))
			}
			if len(batch) == 0 {
				break // every document not handed out scores below the k-th
			}
			seen += len(batch)
			var ok []bool
			if opt.Admit != nil {
				keys := make([][]byte, len(batch))
				for i, d := range batch {
					keys[i] = d.key
				}
				var err error
				if ok, err = opt.Admit(keys); err != nil {
					return nil, rep, err
				}
				if len(ok) != len(keys) {
					return nil, rep, fmt.Errorf("fulltext: Admit answered %d of %d documents", len(ok), len(keys))
				}
			}
			for i, d := range batch {
				if ok != nil && !ok[i] || len(out) >= opt.K && d.score < threshold-tieTolerance(threshold) {
					continue
				}
				out = append(out, Result{Key: d.key, Score: d.score})
				if len(out) == opt.K {
					threshold = d.score
				}
			}
			continue
		}
		if next == len(blocks) || len(out) >= opt.K && nextUB < threshold-tieTolerance(threshold) {
			break
		}
		b := blocks[next]
		next++
		rep.Read++
		docs, err := ix.scoreBlock(ctx, r, kws, idf, avgdl, b.block)
		if err != nil {
			return nil, rep, err
		}
		rep.Scored += len(docs)
		for _, d := range docs {
			if d.score > b.ub+tieTolerance(b.ub) {
				return nil, rep, ErrBound
			}
			heap.Push(h, d)
		}
	}
	return out, rep, nil
}

// scored is a document Top has scored.
type scored struct {
	id    uint32
	key   []byte
	score float64
}

// scoredHeap pops the highest score first, then the lowest id.
type scoredHeap []scored

func (h scoredHeap) Len() int { return len(h) }
func (h scoredHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].id < h[j].id
}
func (h scoredHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *scoredHeap) Push(x any)   { *h = append(*h, x.(scored)) }
func (h *scoredHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// scoreBlock scores the documents of block blk holding any keyword, from
// their postings and records in r.
func (ix *Index) scoreBlock(ctx context.Context, r Reader, kws [][]Term, idf []float64, avgdl float64, blk uint32) ([]scored, error) {
	lo := uint64(blk) * blockSize
	hi := lo + blockSize
	tfs := map[uint32][]int{}
	for i, kw := range kws {
		m, err := matchesIn(ctx, r, kw, lo, hi)
		if err != nil {
			return nil, err
		}
		for id, c := range m {
			tf := tfs[id]
			if tf == nil {
				tf = make([]int, len(kws))
				tfs[id] = tf
			}
			tf[i] = c
		}
	}
	out := make([]scored, 0, len(tfs))
	for id, tf := range tfs {
		d, err := readDoc(ctx, r, id)
		if err != nil {
			return nil, err
		}
		s := 0.0
		for i, f := range tf {
			if f > 0 {
				s += termScore(idf[i], float64(f), float64(d.length), avgdl)
			}
		}
		out = append(out, scored{id: id, key: d.key, score: s})
	}
	return out, nil
}
