package fulltext

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Reader reads an index's keyspace (keys relative to it).
type Reader interface {
	// Get returns the value stored under key, or nil when there is none.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn for every key k with lower <= k < upper, ascending.
	// key and value are valid only during the call.
	Scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error
}

// Writer takes an index's changes; the engine's puts them in the storage
// transaction of the item they come from.
type Writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
}

// The keyspace:
//
//	"m"                     meta: format, language, next document id,
//	                        documents and terms in all
//	"d" id                  a document: its item key, its number of terms,
//	                        its distinct terms
//	"k" key                 the document id of an item key
//	"p" term 0x00 id        a posting: the term's count in the document and
//	                        its positions
//
// Document ids are 4-byte big-endian and never reused.
const (
	recMeta    = 'm'
	recDoc     = 'd'
	recKey     = 'k'
	recPosting = 'p'
)

const formatVersion = 1

// ErrCorrupt reports a keyspace this package did not write.
var ErrCorrupt = errors.New("fulltext: index keyspace is corrupt")

// BM25's parameters, Lucene's defaults (the query package's too).
const (
	K1 = 1.2
	B  = 0.75
)

// Index is the inverted index of one full-text path of a container.
type Index struct {
	mu sync.RWMutex
	an *Analyzer

	next  uint32
	docs  []doc // by document id
	byKey map[string]uint32
	df    map[string]uint32 // documents holding each term
	n     int64             // documents with text
	words int64             // their terms in all
	// bounds are each term's block-max bounds, by block (see Top).
	bounds map[string][]blockBound
}

type doc struct {
	key    []byte // nil: gone
	length uint32
	terms  []string // distinct
}

// Open loads the index kept in r, or starts an empty one for language.
func Open(ctx context.Context, r Reader, language string) (*Index, error) {
	an, err := AnalyzerFor(language)
	if err != nil {
		return nil, err
	}
	ix := &Index{an: an, byKey: map[string]uint32{}, df: map[string]uint32{}}
	raw, err := r.Get(ctx, []byte{recMeta})
	if err != nil || raw == nil {
		return ix, err
	}
	rd := reader{b: raw}
	if rd.byte() != formatVersion {
		return nil, fmt.Errorf("%w: format", ErrCorrupt)
	}
	lang := string(rd.bytes(int(rd.uvarint())))
	ix.next = uint32(rd.uvarint())
	if rd.err {
		return nil, fmt.Errorf("%w: meta", ErrCorrupt)
	}
	if lang != an.Language() {
		return nil, fmt.Errorf("%w: the keyspace holds an index of %s, not %s", ErrCorrupt, lang, an.Language())
	}
	ix.docs = make([]doc, ix.next)
	err = r.Scan(ctx, []byte{recDoc}, []byte{recDoc + 1}, func(k, v []byte) error {
		if len(k) != 5 {
			return fmt.Errorf("%w: document key", ErrCorrupt)
		}
		id := binary.BigEndian.Uint32(k[1:])
		if id >= ix.next {
			return fmt.Errorf("%w: document %d past %d", ErrCorrupt, id, ix.next)
		}
		d, err := decodeDoc(v)
		if err != nil {
			return err
		}
		ix.docs[id] = d
		ix.byKey[string(d.key)] = id
		ix.n++
		ix.words += int64(d.length)
		for _, t := range d.terms {
			ix.df[t]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := ix.loadBounds(ctx, r); err != nil {
		return nil, err
	}
	return ix, nil
}

// Analyzer returns the index's analyzer.
func (ix *Index) Analyzer() *Analyzer { return ix.an }

func docKey(id uint32) []byte { return binary.BigEndian.AppendUint32([]byte{recDoc}, id) }

func itemKey(key []byte) []byte { return append([]byte{recKey}, key...) }

func postingKey(term string, id uint32) []byte {
	k := make([]byte, 0, len(term)+6)
	k = append(k, recPosting)
	k = append(k, term...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, id)
}

func postingPrefix(term string) []byte {
	return append(append([]byte{recPosting}, term...), 0)
}

func encodeDoc(d doc) []byte {
	b := binary.AppendUvarint(nil, uint64(len(d.key)))
	b = append(b, d.key...)
	b = binary.AppendUvarint(b, uint64(d.length))
	b = binary.AppendUvarint(b, uint64(len(d.terms)))
	for _, t := range d.terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	return b
}

// readDoc reads the record of document id, which a posting names: its
// absence is corruption.
func readDoc(ctx context.Context, r Reader, id uint32) (doc, error) {
	v, err := r.Get(ctx, docKey(id))
	if err != nil {
		return doc{}, err
	}
	if v == nil {
		return doc{}, fmt.Errorf("%w: a posting of document %d without its record", ErrCorrupt, id)
	}
	return decodeDoc(v)
}

func decodeDoc(v []byte) (doc, error) {
	r := reader{b: v}
	var d doc
	d.key = bytes.Clone(r.bytes(int(r.uvarint())))
	d.length = uint32(r.uvarint())
	n := int(r.uvarint())
	if r.err || n > len(v) {
		return doc{}, fmt.Errorf("%w: document record", ErrCorrupt)
	}
	d.terms = make([]string, n)
	for i := range d.terms {
		d.terms[i] = string(r.bytes(int(r.uvarint())))
	}
	if r.err || len(r.b) != 0 {
		return doc{}, fmt.Errorf("%w: document record", ErrCorrupt)
	}
	return d, nil
}

type reader struct {
	b   []byte
	err bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.err = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// Change is one item's new text at the index's path, or its removal
// (Remove, or a nil Text: the item has no text there).
type Change struct {
	Key  []byte
	Text *string
}

// Pending is a transaction's changes to an index, held as package vector's
// are: written to its Writer, applied in memory, hidden from searches until
// Commit; Abort undoes them.
type Pending struct {
	ix   *Index
	w    Writer
	undo []func()
	done bool
}

// Prepare writes the changes to w; the caller must Commit once the
// transaction is applied (or Abort when it was not).
func (ix *Index) Prepare(w Writer, changes ...Change) (*Pending, error) {
	ix.mu.Lock()
	p := &Pending{ix: ix, w: w}
	if err := p.Add(changes...); err != nil {
		p.Abort()
		return nil, err
	}
	return p, nil
}

// Add writes more changes of the same transaction.
func (p *Pending) Add(changes ...Change) error {
	if p.done {
		return errors.New("fulltext: Add on a finished Pending")
	}
	ix := p.ix
	metaChanged := false
	for _, c := range changes {
		id, had := ix.byKey[string(c.Key)]
		if had {
			if err := p.removeDoc(id); err != nil {
				return err
			}
			metaChanged = true
		}
		if c.Text == nil {
			if had {
				if err := p.w.Delete(itemKey(c.Key)); err != nil {
					return err
				}
				delete(ix.byKey, string(c.Key))
				p.undo = append(p.undo, func() { ix.byKey[string(c.Key)] = id })
			}
			continue
		}
		if !had {
			id = ix.next
			ix.next++
			ix.docs = append(ix.docs, doc{})
			key := string(c.Key)
			ix.byKey[key] = id
			p.undo = append(p.undo, func() {
				ix.next--
				ix.docs = ix.docs[:id]
				delete(ix.byKey, key)
			})
			if err := p.w.Set(itemKey(c.Key), binary.BigEndian.AppendUint32(nil, id)); err != nil {
				return err
			}
		}
		if err := p.addDoc(id, c.Key, *c.Text); err != nil {
			return err
		}
		metaChanged = true
	}
	if metaChanged {
		return p.w.Set([]byte{recMeta}, ix.meta())
	}
	return nil
}

func (ix *Index) meta() []byte {
	b := []byte{formatVersion}
	b = binary.AppendUvarint(b, uint64(len(ix.an.Language())))
	b = append(b, ix.an.Language()...)
	return binary.AppendUvarint(b, uint64(ix.next))
}

// addDoc indexes the text of document id.
func (p *Pending) addDoc(id uint32, key []byte, text string) error {
	ix := p.ix
	terms := ix.an.Analyze(text)
	positions := map[string][]int{}
	var distinct []string
	for _, t := range terms {
		if strings.IndexByte(t.Text, 0) >= 0 {
			continue
		}
		if _, ok := positions[t.Text]; !ok {
			distinct = append(distinct, t.Text)
		}
		positions[t.Text] = append(positions[t.Text], t.Pos)
	}
	sort.Strings(distinct)
	d := doc{key: bytes.Clone(key), length: uint32(len(terms)), terms: distinct}
	for _, term := range distinct {
		ps := positions[term]
		v := binary.AppendUvarint(nil, uint64(len(ps)))
		prev := 0
		for _, pos := range ps {
			v = binary.AppendUvarint(v, uint64(pos-prev))
			prev = pos
		}
		if err := p.w.Set(postingKey(term, id), v); err != nil {
			return err
		}
		ix.raiseBound(term, id, len(ps), d.length)
	}
	if err := p.w.Set(docKey(id), encodeDoc(d)); err != nil {
		return err
	}
	ix.docs[id] = d
	ix.n++
	ix.words += int64(d.length)
	for _, t := range distinct {
		ix.df[t]++
	}
	p.undo = append(p.undo, func() {
		ix.docs[id] = doc{}
		ix.n--
		ix.words -= int64(d.length)
		for _, t := range distinct {
			if ix.df[t]--; ix.df[t] == 0 {
				delete(ix.df, t)
			}
		}
	})
	return nil
}

// removeDoc takes document id's text out of the index.
func (p *Pending) removeDoc(id uint32) error {
	ix := p.ix
	d := ix.docs[id]
	for _, t := range d.terms {
		if err := p.w.Delete(postingKey(t, id)); err != nil {
			return err
		}
	}
	if err := p.w.Delete(docKey(id)); err != nil {
		return err
	}
	ix.docs[id] = doc{}
	ix.n--
	ix.words -= int64(d.length)
	for _, t := range d.terms {
		if ix.df[t]--; ix.df[t] == 0 {
			delete(ix.df, t)
		}
	}
	p.undo = append(p.undo, func() {
		ix.docs[id] = d
		ix.n++
		ix.words += int64(d.length)
		for _, t := range d.terms {
			ix.df[t]++
		}
	})
	return nil
}

// Commit makes the changes visible and lets the next Pending start.
func (p *Pending) Commit() {
	if !p.done {
		p.done = true
		p.ix.mu.Unlock()
	}
}

// Abort undoes the changes in memory and lets the next Pending start.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i]()
	}
	p.ix.mu.Unlock()
}

// Stats are the corpus statistics of BM25 for some keywords.
type Stats struct {
	Documents int64
	Words     int64
	Hits      []int64
}

// Match is a document holding a keyword, and how often.
type Match struct {
	Key   []byte
	Count int
}

// Len returns the number of documents with text.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return int(ix.n)
}

// posting is one document's occurrences of a term.
type posting struct {
	doc uint32
	pos []int
}

// postingsIn reads a term's postings of the documents lo <= id < hi from r.
func postingsIn(ctx context.Context, r Reader, term string, lo, hi uint64) ([]posting, error) {
	var out []posting
	prefix := postingPrefix(term)
	lower, upper := postingKey(term, uint32(lo)), append(bytes.Clone(prefix[:len(prefix)-1]), 1)
	if hi <= math.MaxUint32 {
		upper = postingKey(term, uint32(hi))
	}
	err := r.Scan(ctx, lower, upper, func(k, v []byte) error {
		if len(k) != len(prefix)+4 {
			return fmt.Errorf("%w: posting key", ErrCorrupt)
		}
		rd := reader{b: v}
		n := int(rd.uvarint())
		if n > len(v) {
			return fmt.Errorf("%w: posting", ErrCorrupt)
		}
		ps := make([]int, n)
		prev := 0
		for i := range ps {
			prev += int(rd.uvarint())
			ps[i] = prev
		}
		if rd.err {
			return fmt.Errorf("%w: posting", ErrCorrupt)
		}
		out = append(out, posting{doc: binary.BigEndian.Uint32(k[len(prefix):]), pos: ps})
		return nil
	})
	return out, err
}

// matches returns each document holding the keyword (its terms adjacent
// and in order) with its count, by document id.
func (ix *Index) matches(ctx context.Context, r Reader, keyword []Term) (map[uint32]int, error) {
	return matchesIn(ctx, r, keyword, 0, math.MaxUint32+1)
}

// matchesIn is matches for the documents lo <= id < hi.
func matchesIn(ctx context.Context, r Reader, keyword []Term, lo, hi uint64) (map[uint32]int, error) {
	if len(keyword) == 0 {
		return nil, nil
	}
	first, err := postingsIn(ctx, r, keyword[0].Text, lo, hi)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]int, len(first))
	if len(keyword) == 1 {
		for _, p := range first {
			out[p.doc] = len(p.pos)
		}
		return out, nil
	}
	// Candidate starts per document, narrowed term by term.
	starts := make(map[uint32][]int, len(first))
	for _, p := range first {
		starts[p.doc] = p.pos
	}
	for k := 1; k < len(keyword); k++ {
		ps, err := postingsIn(ctx, r, keyword[k].Text, lo, hi)
		if err != nil {
			return nil, err
		}
		offset := keyword[k].Pos - keyword[0].Pos
		next := make(map[uint32][]int, len(starts))
		for _, p := range ps {
			cand := starts[p.doc]
			if len(cand) == 0 {
				continue
			}
			have := make(map[int]bool, len(p.pos))
			for _, x := range p.pos {
				have[x] = true
			}
			var keep []int
			for _, s := range cand {
				if have[s+offset] {
					keep = append(keep, s)
				}
			}
			if len(keep) > 0 {
				next[p.doc] = keep
			}
		}
		starts = next
	}
	for d, s := range starts {
		out[d] = len(s)
	}
	return out, nil
}

// Contains returns the keys of the documents holding the keyword (a word
// or a phrase), with their counts, in document order.
func (ix *Index) Contains(ctx context.Context, r Reader, keyword string) ([]Match, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	m, err := ix.matches(ctx, r, ix.an.Analyze(keyword))
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, 0, len(m))
	for id := range m {
		if int(id) < len(ix.docs) && ix.docs[id].key != nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]Match, len(ids))
	for i, id := range ids {
		out[i] = Match{Key: ix.docs[id].key, Count: m[id]}
	}
	return out, nil
}

// Stats returns the container's statistics for keywords: documents with
// text, their terms in all, and how many documents hold each keyword (from
// memory for a keyword of one term, from the postings for a phrase).
func (ix *Index) Stats(ctx context.Context, r Reader, keywords []string) (Stats, error) {
	return ix.StatsExcept(ctx, r, keywords, nil)
}

// StatsExcept is Stats with the documents of the item keys except left out
// of the counts, read at the same moment: the caller counts those items'
// texts as it has them (a query whose snapshot holds another state of them
// than the index does).
func (ix *Index) StatsExcept(ctx context.Context, r Reader, keywords []string, except [][]byte) (Stats, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	st, err := ix.stats(ctx, r, keywords)
	if err != nil || len(except) == 0 {
		return st, err
	}
	kws := make([][]Term, len(keywords))
	for i, kw := range keywords {
		kws[i] = ix.an.Analyze(kw)
	}
	for _, k := range except {
		id, ok := ix.byKey[string(k)]
		if !ok || int(id) >= len(ix.docs) || ix.docs[id].key == nil {
			continue
		}
		d := ix.docs[id]
		st.Documents--
		st.Words -= int64(d.length)
		for i, kw := range kws {
			held := false
			switch len(kw) {
			case 0:
			case 1:
				_, held = slices.BinarySearch(d.terms, kw[0].Text)
			default:
				m, err := matchesIn(ctx, r, kw, uint64(id), uint64(id)+1)
				if err != nil {
					return Stats{}, err
				}
				held = len(m) > 0
			}
			if held {
				st.Hits[i]--
			}
		}
	}
	return st, nil
}

// stats is Stats; the caller holds ix.mu.
func (ix *Index) stats(ctx context.Context, r Reader, keywords []string) (Stats, error) {
	st := Stats{Documents: ix.n, Words: ix.words, Hits: make([]int64, len(keywords))}
	for i, kw := range keywords {
		terms := ix.an.Analyze(kw)
		switch len(terms) {
		case 0:
		case 1:
			st.Hits[i] = int64(ix.df[terms[0].Text])
		default:
			m, err := ix.matches(ctx, r, terms)
			if err != nil {
				return Stats{}, err
			}
			st.Hits[i] = int64(len(m))
		}
	}
	return st, nil
}

// Score is BM25 of one document: tf[i] is how often keyword i occurs in it,
// length its number of terms, and st the corpus's statistics.
func Score(tf []int, length int, st Stats) float64 {
	if st.Documents <= 0 || st.Words <= 0 {
		return 0
	}
	n := float64(st.Documents)
	avgdl := float64(st.Words) / n
	s := 0.0
	for i, f := range tf {
		if f == 0 || i >= len(st.Hits) {
			continue
		}
		h := float64(st.Hits[i])
		idf := math.Log(1 + (n-h+0.5)/(h+0.5))
		ff := float64(f)
		s += idf * ff * (K1 + 1) / (ff + K1*(1-B+B*float64(length)/avgdl))
	}
	return s
}

// Result is a document found by Search and its BM25 score.
type Result struct {
	Key   []byte
	Score float64
}

// Search returns the k documents with the highest BM25 score for the
// keywords (FullTextScore's), highest first, among those the filter admits
// (nil: all); documents holding none of the keywords score 0 and are not
// returned.
func (ix *Index) Search(ctx context.Context, r Reader, keywords []string, k int, filter func(key []byte) bool) ([]Result, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	st := Stats{Documents: ix.n, Words: ix.words, Hits: make([]int64, len(keywords))}
	tfs := map[uint32][]int{}
	for i, kw := range keywords {
		m, err := ix.matches(ctx, r, ix.an.Analyze(kw))
		if err != nil {
			return nil, err
		}
		for id, c := range m {
			if int(id) >= len(ix.docs) || ix.docs[id].key == nil {
				continue
			}
			st.Hits[i]++
			tf := tfs[id]
			if tf == nil {
				tf = make([]int, len(keywords))
				tfs[id] = tf
			}
			tf[i] = c
		}
	}
	out := make([]Result, 0, len(tfs))
	for id, tf := range tfs {
		d := ix.docs[id]
		if filter != nil && !filter(d.key) {
			continue
		}
		out = append(out, Result{Key: d.key, Score: Score(tf, int(d.length), st)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return bytes.Compare(out[i].Key, out[j].Key) < 0
	})
	if len(out) > k {
		out = out[:k]
	}
	return out, nil
}

// Holding returns the item keys of the documents holding the keyword (a
// word or a phrase, as Contains matches it) as r sees them, in document
// order. Unlike Contains it reads nothing of the index's memory but its
// analyzer: given a snapshot of the store, its answer is the snapshot's,
// whatever was committed since.
func (ix *Index) Holding(ctx context.Context, r Reader, keyword string) ([][]byte, error) {
	m, err := ix.matches(ctx, r, ix.an.Analyze(keyword))
	if err != nil {
		return nil, err
	}
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([][]byte, 0, len(ids))
	for _, id := range ids {
		d, err := readDoc(ctx, r, id)
		if err != nil {
			return nil, err
		}
		out = append(out, d.key)
	}
	return out, nil
}
