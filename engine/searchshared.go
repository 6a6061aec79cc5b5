package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// On a shared store (several gateways on one PostgreSQL database) each
// gateway keeps its own search indexes, in its memory, and makes them
// follow the store:
//
//   - Every item write records, in its own transaction, the item's key
//     under the write's LSN (keys.SearchChangeKey): one more key in the
//     write, and no key that two writers of different partitions share.
//   - A query's snapshot comes with the store's watermark W: every write
//     numbered below W is in it, or rolled back. Before the indexes answer
//     the query they catch up from it: the change records the snapshot
//     holds from the indexes' own watermark on are read, and each item they
//     name is indexed again as the snapshot has it (a gateway's indexes are
//     built the same way, from a snapshot of the items, when first used).
//   - The indexes then hold every change below W, and possibly some above
//     it (committed while an older write was still open, or by a later
//     snapshot of another query): the items whose newest change applied is
//     numbered W or above are stale for the query, which leaves them out of
//     what the index answers and evaluates them from its snapshot instead.
//     Every other item is in the indexes exactly as in the snapshot, so the
//     answer is the one an exact evaluation over the snapshot gives.
//
// The change records older than searchChangeRetention are pruned by the
// gateway that runs the TTL sweep, which moves the container's horizon
// (keys.SearchChangeHorizon) in the same batch; a gateway whose indexes are
// older than the horizon (idle that long) rebuilds them from a snapshot.
//
// On a store over several places (storage/placed) the LSNs of one place are
// not ordered with another's, and no index is kept: searches are exact.

// searchChangeRetention is how long the change records are kept.
const searchChangeRetention = 10 * time.Minute

// searchAppliedKept is how many items' newest applied change a catch-up
// keeps before it forgets those below the watermark.
const searchAppliedKept = 4096

// errSearchBehind reports indexes older than the change records' horizon.
var errSearchBehind = errors.New("engine: the search indexes are older than the change records kept")

// sharedSearch is a gateway's catch-up state of one container's search
// indexes on a shared store.
type sharedSearch struct {
	// lock is taken for writing by a catch-up and for reading by the
	// searches, which read the indexes and applied.
	lock readerLock
	// covered is a watermark: every change numbered below it is applied.
	covered uint64
	// applied maps an item key's suffix to the number of the newest of its
	// changes applied, for every change applied numbered floor or above.
	floor   uint64
	applied map[string]uint64
}

// sharedSearchOn reports whether the search indexes are kept on this
// engine's shared store.
func (e *Engine) sharedSearchOn() bool {
	return e.shared != nil && e.shared.placer == nil
}

// hasSearchIndexes reports whether c's policy names a vector or full-text
// index.
func hasSearchIndexes(c *Container) bool {
	sp := c.Search()
	if sp == nil {
		return false
	}
	if sp.Vector != nil && len(sp.Vector.Indexes) > 0 {
		return true
	}
	if sp.FullText != nil {
		for _, p := range sp.FullText.Paths {
			if p.Indexed {
				return true
			}
		}
	}
	return false
}

// recordSearchChange records in a shared transaction that the item of key
// changed.
func (t *txn) recordSearchChange(key []byte) error {
	c := t.p.c
	if !t.e.sharedSearchOn() || !hasSearchIndexes(c) {
		return nil
	}
	return t.b.Set(keys.SearchChangeKey(c.rid, t.lsn, key[len(keys.ItemContainerPrefix(c.rid)):]), []byte{})
}

// loadSharedSearch builds st's indexes, in memory, from a snapshot of c's
// items, and catches them up with the change records of the snapshot.
func (e *Engine) loadSharedSearch(ctx context.Context, c *Container, st *searchState) error {
	sp := c.Search()
	for i, v := range st.vecs {
		v.mem = vector.NewMemStore()
		ix, err := vector.Open(ctx, v.mem, sp.Vector.Indexes[i].Config)
		if err != nil {
			return err
		}
		v.ix = ix
	}
	for _, t := range st.texts {
		t.mem = vector.NewMemStore()
		ix, err := fulltext.Open(ctx, t.mem, sp.FullText.Language(t.path))
		if err != nil {
			return err
		}
		t.ix = ix
	}
	snap, _, w, err := e.shared.store.SnapshotAll(ctx, nil)
	if err != nil {
		return err
	}
	defer snap.Close()
	prefix := keys.ItemContainerPrefix(c.rid)
	it, err := snap.NewIterator(ctx, prefix, storage.PrefixEnd(prefix), false)
	if err != nil {
		return err
	}
	defer it.Close()
	sx := &searchTxn{}
	defer func() { sx.commit() }()
	if err := sx.begin(st, nil); err != nil {
		return err
	}
	for it.Next() {
		s, err := decodeItem(it.Key(), it.Value())
		if err != nil {
			return err
		}
		if err := sx.add(st, bytes.Clone(s.key[len(prefix):]), docGetter(bytes.Clone(s.doc))); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	sx.commit()
	if st.shared == nil {
		st.shared = &sharedSearch{}
	}
	// The indexes are the snapshot's. What changed from searchBuildMargin
	// LSNs before its watermark on is noted as applied, so that the
	// queries whose snapshots are older than this one (the one that asked
	// for the build, say) can tell the items they see otherwise.
	sh := st.shared
	from := uint64(1)
	if w > searchBuildMargin {
		from = w - searchBuildMargin
	}
	sh.covered, sh.applied = from, map[string]uint64{}
	horizon, err := e.catchUpSharedSearch(ctx, c, st, snap, w, false)
	if err != nil {
		return err
	}
	sh.floor = max(from, horizon)
	return nil
}

// searchBuildMargin is how far below its snapshot's watermark a build of
// the indexes notes the changes, for older queries.
const searchBuildMargin = 1 << 16

// catchUpSharedSearch applies to st the changes snapshot r holds from its
// indexes' watermark on; w is r's watermark. The caller holds st's lock for
// writing. errSearchBehind means the records were pruned past the indexes.
// With apply false the changes are only noted as applied (the indexes are
// r's already), and the horizon below which they are pruned is returned.
func (e *Engine) catchUpSharedSearch(ctx context.Context, c *Container, st *searchState, r storage.Reader, w uint64, apply bool) (uint64, error) {
	sh := st.shared
	prefix := keys.SearchChangePrefix(c.rid)
	horizonKey := keys.SearchChangeHorizon(c.rid)
	it, err := r.NewIterator(ctx, keys.SearchChangeKey(c.rid, sh.covered, nil), storage.PrefixEnd(prefix), false)
	if err != nil {
		return 0, err
	}
	newest := map[string]uint64{}
	var horizon uint64
	for it.Next() {
		k := it.Key()
		if bytes.Equal(k, horizonKey) {
			if len(it.Value()) == 8 {
				horizon = binary.BigEndian.Uint64(it.Value())
			}
			continue
		}
		if len(k) < len(prefix)+8 {
			continue
		}
		lsn := binary.BigEndian.Uint64(k[len(prefix):])
		suffix := string(k[len(prefix)+8:])
		if lsn > newest[suffix] {
			newest[suffix] = lsn
		}
	}
	if err := it.Err(); err != nil {
		it.Close()
		return 0, err
	}
	it.Close()
	if horizon > sh.covered && apply {
		return 0, errSearchBehind
	}
	var todo []string
	for suffix, lsn := range newest {
		if !apply {
			sh.applied[suffix] = lsn
		} else if lsn > sh.applied[suffix] {
			todo = append(todo, suffix)
		}
	}
	slices.Sort(todo)
	for len(todo) > 0 {
		n := min(len(todo), searchRebuildChunk)
		itemKeys := make([][]byte, n)
		for i, s := range todo[:n] {
			itemKeys[i] = keys.ItemKeyFromSuffix(c.rid, []byte(s))
		}
		values, err := storage.GetMany(ctx, r, itemKeys)
		if err != nil {
			return 0, err
		}
		sx := &searchTxn{}
		if err := sx.begin(st, nil); err != nil {
			sx.abort()
			return 0, err
		}
		for i, s := range todo[:n] {
			var get valueGetter
			if values[i] != nil {
				it, err := decodeItem(itemKeys[i], values[i])
				if err != nil {
					sx.commit()
					return 0, err
				}
				get = docGetter(it.doc)
			}
			if err := sx.add(st, []byte(s), get); err != nil {
				sx.commit()
				return 0, err
			}
			sh.applied[s] = newest[s]
		}
		sx.commit()
		todo = todo[n:]
	}
	if w > sh.covered {
		sh.covered = w
	}
	if len(sh.applied) > searchAppliedKept {
		for s, lsn := range sh.applied {
			if lsn < sh.covered {
				delete(sh.applied, s)
			}
		}
		sh.floor = sh.covered
	}
	return horizon, nil
}

// searchView is what a search of one query may take from its container's
// indexes: on a shared store, the indexes caught up with the query's
// snapshot, and the items (stale) whose state there is not the snapshot's.
// done lets the indexes catch up for others again.
type searchView struct {
	stale   map[string]bool // item key suffixes
	release func()
}

// isStale reports whether the index's state of the item of suffix is not
// the query's: the query evaluates it from its snapshot.
func (v *searchView) isStale(suffix []byte) bool { return v != nil && v.stale[string(suffix)] }

// staleKeys returns the stale items' key suffixes, in order.
func (v *searchView) staleKeys() [][]byte {
	if v == nil {
		return nil
	}
	out := make([][]byte, 0, len(v.stale))
	for s := range v.stale {
		out = append(out, []byte(s))
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

func (v *searchView) done() {
	if v != nil && v.release != nil {
		v.release()
		v.release = nil
	}
}

// sharedSearchQuery is a query's snapshot's watermark, and the indexes
// caught up with it already (an index is asked several times by one query,
// from within its own searches too).
type sharedSearchQuery struct {
	watermark uint64
	mu        sync.Mutex
	caught    map[*searchState]bool
}

type sharedSearchQueryKey struct{}

// withQuerySnapshot marks ctx as a query's over a snapshot taken at
// watermark w, for the search indexes of a shared store.
func (e *Engine) withQuerySnapshot(ctx context.Context, w uint64) context.Context {
	if !e.sharedSearchOn() {
		return ctx
	}
	return context.WithValue(ctx, sharedSearchQueryKey{}, &sharedSearchQuery{watermark: w, caught: map[*searchState]bool{}})
}

// searchViewOf returns c's search indexes and the view of them a query over
// r may take; nil when c has none, when the indexes cannot answer for r
// (on a shared store: r is no query snapshot, or older than what the
// indexes remember). The caller calls the view's done once its searches
// are over.
func (e *Engine) searchViewOf(ctx context.Context, c *Container, r storage.Reader) (*searchState, *searchView, error) {
	if !e.sharedSearchOn() {
		st, err := e.searchIndexesOf(c)
		if st == nil || err != nil {
			return nil, nil, err
		}
		return st, &searchView{}, nil
	}
	q, _ := ctx.Value(sharedSearchQueryKey{}).(*sharedSearchQuery)
	if q == nil {
		return nil, nil, nil
	}
	st, err := e.searchIndexesWithin(ctx, c, searchBuildWait)
	if st == nil || err != nil {
		return nil, nil, err
	}
	sh := st.shared
	q.mu.Lock()
	caught := q.caught[st]
	q.mu.Unlock()
	if !caught {
		sh.lock.lock()
		_, err := e.catchUpSharedSearch(ctx, c, st, r, q.watermark, true)
		if errors.Is(err, errSearchBehind) {
			err = e.loadSharedSearch(ctx, c, st)
		}
		sh.lock.unlock()
		if err != nil {
			return nil, nil, err
		}
		q.mu.Lock()
		q.caught[st] = true
		q.mu.Unlock()
	}
	sh.lock.rlock()
	if q.watermark < sh.floor {
		sh.lock.runlock()
		return nil, nil, nil
	}
	v := &searchView{stale: map[string]bool{}, release: sh.lock.runlock}
	for s, lsn := range sh.applied {
		if lsn >= q.watermark {
			v.stale[s] = true
		}
	}
	return st, v, nil
}

// searchBuildWait is how long a query on a shared store waits for its
// gateway to build a container's search indexes (the first use, a policy
// change, a gateway idle past the change records) before it evaluates
// exactly instead, the build going on.
const searchBuildWait = time.Second

// searchIndexesWithin is searchIndexesOf for a query: when the indexes are
// not open yet it waits for them at most wait (or until ctx ends) and
// returns nil if they are still being built.
func (e *Engine) searchIndexesWithin(ctx context.Context, c *Container, wait time.Duration) (*searchState, error) {
	if !c.retired.Load() {
		e.search.mu.Lock()
		st := e.search.byID[string(c.rid)]
		e.search.mu.Unlock()
		if st != nil && st.fp == searchFingerprint(c) {
			select {
			case <-st.ready:
				if st.err == nil {
					return st, nil
				}
			default:
			}
		}
	}
	var st *searchState
	var err error
	done := make(chan struct{})
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer close(done)
		st, err = e.searchIndexesOf(c)
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-done:
		return st, err
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil, nil
}

// readerLock is a readers-writer lock that never makes a reader wait for a
// writer that is only waiting: a search holding it may take it again from
// within (a query's filter asking the index's statistics) while a catch-up
// waits for it.
type readerLock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	readers int
	writing bool
}

func (l *readerLock) wait() {
	if l.cond == nil {
		l.cond = sync.NewCond(&l.mu)
	}
	l.cond.Wait()
}

func (l *readerLock) rlock() {
	l.mu.Lock()
	for l.writing {
		l.wait()
	}
	l.readers++
	l.mu.Unlock()
}

func (l *readerLock) runlock() {
	l.mu.Lock()
	l.readers--
	if l.readers == 0 && l.cond != nil {
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}

func (l *readerLock) lock() {
	l.mu.Lock()
	for l.writing || l.readers > 0 {
		l.wait()
	}
	l.writing = true
	l.mu.Unlock()
}

func (l *readerLock) unlock() {
	l.mu.Lock()
	l.writing = false
	if l.cond != nil {
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}

// watermarkSample is a watermark and when it was read.
type watermarkSample struct {
	at time.Time
	w  uint64
}

// pruneSearchChanges deletes the change records older than
// searchChangeRetention of colls: those below the newest watermark this
// engine read that long ago (the TTL sweep calls it, on one gateway at a
// time).
func (e *Engine) pruneSearchChanges(ctx context.Context, colls []*Container) error {
	if !e.sharedSearchOn() {
		return nil
	}
	now := time.Now()
	e.search.mu.Lock()
	due := len(e.search.samples) == 0 || now.Sub(e.search.samples[len(e.search.samples)-1].at) >= searchPruneEvery
	e.search.mu.Unlock()
	if !due {
		return nil
	}
	w, err := e.shared.store.Watermark(ctx)
	if err != nil {
		return err
	}
	e.search.mu.Lock()
	e.search.samples = append(e.search.samples, watermarkSample{now, w})
	var cutoff uint64
	i := 0
	for i < len(e.search.samples) && now.Sub(e.search.samples[i].at) >= searchChangeRetention {
		cutoff = e.search.samples[i].w
		i++
	}
	e.search.samples = e.search.samples[i:]
	e.search.mu.Unlock()
	if cutoff == 0 {
		return nil
	}
	for _, c := range colls {
		if c.Search() == nil {
			continue
		}
		if err := e.pruneSearchChangesOf(ctx, c, cutoff); err != nil {
			return err
		}
	}
	return nil
}

// searchPruneEvery is how often the TTL sweep prunes the change records.
const searchPruneEvery = time.Minute

// searchPruneChunk is how many change records one batch of a prune deletes.
const searchPruneChunk = 1000

// pruneSearchChangesOf deletes c's change records numbered below cutoff,
// moving the horizon to cutoff in each batch that deletes some.
func (e *Engine) pruneSearchChangesOf(ctx context.Context, c *Container, cutoff uint64) error {
	horizonKey := keys.SearchChangeHorizon(c.rid)
	raw, err := e.store.Get(ctx, horizonKey)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if len(raw) == 8 && binary.BigEndian.Uint64(raw) >= cutoff {
		return nil
	}
	for !e.stopping() {
		it, err := e.store.NewIterator(ctx, keys.SearchChangeKey(c.rid, 0, nil), keys.SearchChangeKey(c.rid, cutoff, nil), false)
		if err != nil {
			return err
		}
		b := e.store.NewBatch()
		for it.Next() && b.Count() < searchPruneChunk {
			if err := b.Delete(bytes.Clone(it.Key())); err != nil {
				it.Close()
				b.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			b.Close()
			return err
		}
		n := b.Count()
		if n == 0 {
			b.Close()
			return nil
		}
		if err := b.Set(horizonKey, binary.BigEndian.AppendUint64(nil, cutoff)); err != nil {
			b.Close()
			return err
		}
		err = b.Commit(ctx)
		b.Close()
		if err != nil || n < searchPruneChunk {
			return err
		}
	}
	return nil
}

// holding returns the keys of the view's stale items that hold any of the
// keywords in the text at ti's path as r has them (FullTextContainsAny's
// match): the stale items a ranking by FullTextScore takes as candidates.
func (v *searchView) holding(ctx context.Context, c *Container, r storage.Reader, ti *textIndex, keywords []string) ([][]byte, error) {
	suffixes := v.staleKeys()
	if len(suffixes) == 0 {
		return nil, nil
	}
	an := ti.ix.Analyzer()
	kws := make([][]fulltext.Term, len(keywords))
	for i, k := range keywords {
		kws[i] = an.Analyze(k)
	}
	itemKeys := make([][]byte, len(suffixes))
	for i, s := range suffixes {
		itemKeys[i] = keys.ItemKeyFromSuffix(c.rid, s)
	}
	values, err := storage.GetMany(ctx, r, itemKeys)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for i, raw := range values {
		if raw == nil {
			continue
		}
		s, err := decodeItem(itemKeys[i], raw)
		if err != nil {
			return nil, err
		}
		text, ok := stringAt(s.doc, ti.segs)
		if !ok {
			continue
		}
		terms := an.Analyze(text)
		for _, kw := range kws {
			if len(kw) > 0 && fulltext.Occurrences(terms, kw) > 0 {
				out = append(out, itemKeys[i])
				break
			}
		}
	}
	return out, nil
}
