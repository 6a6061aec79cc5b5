package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// The search indexes of a container: one vector index per path of
// indexingPolicy.vectorIndexes and one full-text index per path of
// indexingPolicy.fullTextIndexes (which also keeps the path's BM25
// statistics). Each keeps its state under its own prefix of the search key
// family (keys.SearchIndexPrefix), and every item write, delete, patch,
// TTL expiry and partition-key delete changes it in the item's own storage
// transaction: the change is prepared (written to the transaction's batch,
// applied in memory but hidden from searches) as the item is written,
// committed once the batch is applied, aborted when it is not. An index is
// therefore exactly as durable as the items, and after a crash it is the
// index of the items that survived.
//
// The indexes are opened when a container is first written or queried: from
// their state when the search meta record (keys.SearchMetaKey) says it was
// built for the container's current policy, else rebuilt from the items (a
// policy change, a store written before the indexes existed, a rebuild a
// crash cut short: the meta record is written last).
//
// On a shared store (several gateways writing one PostgreSQL database) the
// indexes' state is kept by each gateway in its memory instead, and caught
// up with the store's change records before a query reads it
// (sharedSearch, below).

// searchIndexes is the engine's open search indexes, by container RID.
type searchIndexes struct {
	mu   sync.Mutex
	byID map[string]*searchState
}

// searchState is the open search indexes of one container's policy.
type searchState struct {
	fp    string        // the policy they were built for
	ready chan struct{} // closed once opened or built
	err   error         // why opening failed (set before ready closes)
	// retired is set once the indexes of another policy replace these: a
	// writer that prepared them then lets go and looks again.
	retired atomic.Bool

	vecs  []*vectorIndex
	texts []*textIndex

	// shared is the indexes' catch-up state on a shared store, where their
	// keyspaces are in this process's memory (mem); nil on a local store.
	shared *sharedSearch
}

type vectorIndex struct {
	path   string
	segs   []string
	prefix []byte
	ix     *vector.Index
	mem    *vector.MemStore
}

type textIndex struct {
	path   string
	segs   []string
	prefix []byte
	ix     *fulltext.Index
	mem    *vector.MemStore
}

// state reads v's keyspace: r's keys under v's prefix, or v's own memory
// on a shared store.
func (v *vectorIndex) state(r storage.Reader) vector.Reader {
	if v.mem != nil {
		return v.mem
	}
	return prefixedReader{r, v.prefix}
}

// state reads t's keyspace: r's keys under t's prefix, or t's own memory
// on a shared store.
func (t *textIndex) state(r storage.Reader) fulltext.Reader {
	if t.mem != nil {
		return t.mem
	}
	return prefixedReader{r, t.prefix}
}

// searchFingerprint is what a container's search indexes are built for: the
// vector indexes' paths and configurations and the full-text indexes'
// paths and languages. "" when it has none.
func searchFingerprint(c *Container) string {
	sp := c.Search()
	if sp == nil {
		return ""
	}
	var b strings.Builder
	if sp.Vector != nil {
		for _, ix := range sp.Vector.Indexes {
			fmt.Fprintf(&b, "v%q %+v\n", ix.Path, ix.Config)
		}
	}
	if sp.FullText != nil {
		for _, p := range sp.FullText.Paths {
			if p.Indexed {
				fmt.Fprintf(&b, "t%q %s\n", p.Path, p.Language)
			}
		}
	}
	return b.String()
}

func pathSegments(p string) []string { return strings.Split(strings.TrimPrefix(p, "/"), "/") }

// searchIndexesOf returns c's open search indexes, opening or building them
// first; nil when c has none or the store is over several places.
func (e *Engine) searchIndexesOf(c *Container) (*searchState, error) {
	if e.shared != nil && !e.sharedSearchOn() {
		return nil, nil
	}
	if c.retired.Load() {
		// A replace made another definition current: index by its
		// policy (a deleted container's writes need no index).
		next, err := e.successor(e.bgCtx, c)
		if err != nil {
			return nil, nil
		}
		c = next
	}
	fp := searchFingerprint(c)
	e.search.mu.Lock()
	st := e.search.byID[string(c.rid)]
	if fp == "" {
		e.search.mu.Unlock()
		return nil, nil
	}
	if st == nil || st.fp != fp {
		old := st
		st = &searchState{fp: fp, ready: make(chan struct{})}
		if e.search.byID == nil {
			e.search.byID = map[string]*searchState{}
		}
		e.search.byID[string(c.rid)] = st
		e.search.mu.Unlock()
		// The writers of the indexes replaced finish first, and none
		// starts again on them: the rebuild's snapshot then holds every
		// item they indexed, and nothing of theirs lands in its keyspace.
		release := old.quiesce()
		// The opening is the engine's: a client that goes away must not
		// leave the indexes half built.
		st.err = e.openSearchIndexes(e.bgCtx, c, st)
		release()
		if st.err != nil {
			e.search.mu.Lock()
			if e.search.byID[string(c.rid)] == st {
				delete(e.search.byID, string(c.rid)) // the next use tries again
			}
			e.search.mu.Unlock()
		}
		close(st.ready)
	} else {
		e.search.mu.Unlock()
		<-st.ready
	}
	if st.err != nil {
		return nil, st.err
	}
	return st, nil
}

// quiesce waits for the transactions holding st's indexes (nil: none) to
// finish, holds the indexes until release, and retires them.
func (st *searchState) quiesce() (release func()) {
	if st == nil {
		return func() {}
	}
	<-st.ready
	if st.err != nil {
		return func() {}
	}
	if st.shared != nil {
		// No writer holds a gateway's indexes on a shared store.
		st.retired.Store(true)
		return func() {}
	}
	sx := &searchTxn{}
	if err := sx.begin(st, &vector.Batch{}); err != nil {
		sx.abort()
		st.retired.Store(true)
		return func() {}
	}
	st.retired.Store(true)
	return sx.abort
}

// searchPolicyReplaced is called with the batch of a container replace: when
// the search indexes change (say, the full-text ones are dropped, to be added
// again later), their state is marked stale in the batch, so that no later
// opening takes it for current, and the open ones are forgotten. The
// indexes are rebuilt when next used.
func (e *Engine) searchPolicyReplaced(b storage.Batch, prev, next *Container) error {
	if searchFingerprint(prev) == searchFingerprint(next) {
		return nil
	}
	if err := b.Delete(keys.SearchMetaKey(next.rid)); err != nil {
		return err
	}
	if searchFingerprint(next) == "" {
		e.dropSearchIndexes(next.rid)
	}
	return nil
}

// dropSearchIndexes forgets a deleted container's indexes.
func (e *Engine) dropSearchIndexes(collRID []byte) {
	e.search.mu.Lock()
	delete(e.search.byID, string(collRID))
	e.search.mu.Unlock()
}

// openSearchIndexes opens c's indexes from their state, or rebuilds them
// from the items when the state is not the current policy's.
func (e *Engine) openSearchIndexes(ctx context.Context, c *Container, st *searchState) error {
	sp := c.Search()
	for _, ip := range sp.Vector.Indexes {
		st.vecs = append(st.vecs, &vectorIndex{path: ip.Path, segs: pathSegments(ip.Path),
			prefix: keys.SearchIndexPrefix(c.rid, keys.SearchVector, ip.Path)})
	}
	for _, p := range sp.FullText.Paths {
		if p.Indexed {
			st.texts = append(st.texts, &textIndex{path: p.Path, segs: pathSegments(p.Path),
				prefix: keys.SearchIndexPrefix(c.rid, keys.SearchFullText, p.Path)})
		}
	}
	if e.shared != nil {
		return e.loadSharedSearch(ctx, c, st)
	}
	built, err := e.store.Get(ctx, keys.SearchMetaKey(c.rid))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err == nil && string(built) == st.fp {
		if err := st.open(ctx, e.store, sp); err == nil {
			return nil
		} else if !errors.Is(err, vector.ErrCorrupt) && !errors.Is(err, fulltext.ErrCorrupt) {
			return err
		}
		e.log.Warn("a container's search index state is unreadable: rebuilding it from the items", "container", c.ID)
	}
	return e.rebuildSearchIndexes(ctx, c, st)
}

// open loads every index of st from the store.
func (st *searchState) open(ctx context.Context, r storage.Reader, sp *SearchPolicy) error {
	for i, v := range st.vecs {
		ix, err := vector.Open(ctx, prefixedReader{r, v.prefix}, sp.Vector.Indexes[i].Config)
		if err != nil {
			return err
		}
		v.ix = ix
	}
	for _, t := range st.texts {
		ix, err := fulltext.Open(ctx, prefixedReader{r, t.prefix}, sp.FullText.Language(t.path))
		if err != nil {
			return err
		}
		t.ix = ix
	}
	return nil
}

// searchRebuildChunk is how many items one batch of a search index rebuild
// indexes.
const searchRebuildChunk = 256

// rebuildSearchIndexes deletes c's search index state and indexes every
// stored item again, a committed batch at a time, then writes the meta
// record that says the state is whole. The container's writers wait for it
// (searchIndexesOf); a crash before the meta record makes the next opening
// start over.
func (e *Engine) rebuildSearchIndexes(ctx context.Context, c *Container, st *searchState) error {
	if err := purgePrefix(ctx, e.store, keys.SearchPrefix(c.rid)); err != nil {
		return err
	}
	empty := storage.Reader(emptyReader{})
	if err := st.open(ctx, empty, c.Search()); err != nil {
		return err
	}
	snap, err := e.store.NewSnapshot(ctx)
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
	type entry struct {
		key []byte
		doc []byte
	}
	var chunk []entry
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		b := e.store.NewBatch()
		defer b.Close()
		sx := &searchTxn{}
		defer sx.abort()
		if err := sx.begin(st, b); err != nil {
			return err
		}
		for _, en := range chunk {
			if err := sx.add(st, en.key[len(prefix):], docGetter(en.doc)); err != nil {
				return err
			}
		}
		if err := b.Commit(ctx); err != nil {
			return err
		}
		sx.commit()
		chunk = chunk[:0]
		return nil
	}
	for it.Next() {
		s, err := decodeItem(it.Key(), it.Value())
		if err != nil {
			return err
		}
		chunk = append(chunk, entry{bytes.Clone(s.key), bytes.Clone(s.doc)})
		if len(chunk) == searchRebuildChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	b := e.store.NewBatch()
	defer b.Close()
	if err := b.Set(keys.SearchMetaKey(c.rid), []byte(st.fp)); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// searchTxn is a transaction's pending changes to its container's search
// indexes: every index is prepared at the transaction's first item write
// (always in the same order, so that two transactions never wait for each
// other's indexes), and committed or aborted with the transaction.
type searchTxn struct {
	vecs  []*vector.Pending
	texts []*fulltext.Pending
}

// begin prepares every index of st with w (on a shared store, with the
// index's own memory).
func (sx *searchTxn) begin(st *searchState, w vector.Writer) error {
	for _, v := range st.vecs {
		var vw vector.Writer = prefixedWriter{w, v.prefix}
		if v.mem != nil {
			vw = v.mem
		}
		p, err := v.ix.Prepare(vw)
		if err != nil {
			return err
		}
		sx.vecs = append(sx.vecs, p)
	}
	for _, t := range st.texts {
		var tw fulltext.Writer = prefixedWriter{w, t.prefix}
		if t.mem != nil {
			tw = t.mem
		}
		p, err := t.ix.Prepare(tw)
		if err != nil {
			return err
		}
		sx.texts = append(sx.texts, p)
	}
	return nil
}

// valueGetter returns the raw value of a document's property path, nil when
// it has none.
type valueGetter func(segs []string) json.RawMessage

// docGetter reads paths of a stored document's JSON.
func docGetter(doc []byte) valueGetter {
	return func(segs []string) json.RawMessage { return rawAt(doc, segs) }
}

// objectGetter reads paths of a parsed document (the write path has it so).
func objectGetter(o jsondoc.Object) valueGetter {
	return func(segs []string) json.RawMessage {
		v, ok := o.Get(segs[0])
		if !ok {
			return nil
		}
		return rawAt(v, segs[1:])
	}
}

// rawAt returns the value at segs under the JSON value raw, nil when absent
// (read as the write path reads a parsed document: objectGetter).
func rawAt(raw json.RawMessage, segs []string) json.RawMessage {
	for _, s := range segs {
		o, err := jsondoc.Parse(raw)
		if err != nil {
			return nil
		}
		var ok bool
		if raw, ok = o.Get(s); !ok {
			return nil
		}
	}
	return raw
}

// add writes one item's change: its vectors and texts as get reads them
// (get nil: the item is deleted). key is the item key's part after the
// container's item prefix.
func (sx *searchTxn) add(st *searchState, key []byte, get valueGetter) error {
	for i, v := range st.vecs {
		ch := vector.Change{Key: key}
		if get != nil {
			ch.Vector = vectorAt(get(v.segs), v.ix.Config())
		}
		if err := sx.vecs[i].Add(ch); err != nil {
			return err
		}
	}
	for i, t := range st.texts {
		ch := fulltext.Change{Key: key}
		if get != nil {
			var s string
			if raw := get(t.segs); raw != nil && json.Unmarshal(raw, &s) == nil {
				ch.Text = &s
			}
		}
		if err := sx.texts[i].Add(ch); err != nil {
			return err
		}
	}
	return nil
}

// vectorAt reads an embedding: nil when raw is not an array of numbers that
// fits the index (the service leaves such an item out of it).
func vectorAt(raw json.RawMessage, cfg vector.Config) []float32 {
	if raw == nil {
		return nil
	}
	xs, ok := parseNumberArray(raw)
	if !ok {
		return nil
	}
	v, ok := vector.Normalize(cfg, xs)
	if !ok {
		return nil
	}
	return v
}

// commit makes the transaction's index changes visible; call it once the
// transaction's batch is applied.
func (sx *searchTxn) commit() {
	if sx == nil {
		return
	}
	for _, p := range sx.vecs {
		p.Commit()
	}
	for _, p := range sx.texts {
		p.Commit()
	}
}

// abort undoes them (a no-op after commit).
func (sx *searchTxn) abort() {
	if sx == nil {
		return
	}
	for i := len(sx.texts) - 1; i >= 0; i-- {
		sx.texts[i].Abort()
	}
	for i := len(sx.vecs) - 1; i >= 0; i-- {
		sx.vecs[i].Abort()
	}
}

// reindexSearch changes the container's search indexes for one item write
// (doc nil: a delete) in the transaction.
func (t *txn) reindexSearch(key []byte, doc jsondoc.Object) error {
	c := t.p.c
	if c.Search() == nil {
		return nil
	}
	if t.sb != nil {
		// Each gateway's indexes catch up from the change records.
		return t.recordSearchChange(key)
	}
	if t.search == nil {
		for {
			st, err := t.e.searchIndexesOf(c)
			if st == nil || err != nil {
				return err
			}
			// What preparing writes is held until the indexes are known
			// to be current: the records of retired ones must not reach
			// the batch.
			w := &heldWriter{}
			t.search, t.searchState = &searchTxn{}, st
			if err := t.search.begin(st, w); err != nil {
				return err
			}
			if !st.retired.Load() {
				if err := w.release(t.b); err != nil {
					return err
				}
				break
			}
			// A policy change replaced the indexes while this waited
			// for them: index by the new ones.
			t.search.abort()
		}
	}
	st := t.searchState
	var get valueGetter
	if doc != nil {
		get = objectGetter(doc)
	}
	return t.search.add(st, key[len(keys.ItemContainerPrefix(c.rid)):], get)
}

// prefixedReader reads one index's keyspace: the store's keys under prefix.
type prefixedReader struct {
	r      storage.Reader
	prefix []byte
}

func (p prefixedReader) key(k []byte) []byte {
	out := make([]byte, 0, len(p.prefix)+len(k))
	return append(append(out, p.prefix...), k...)
}

// Get implements vector.Reader and fulltext.Reader.
func (p prefixedReader) Get(ctx context.Context, key []byte) ([]byte, error) {
	v, err := p.r.Get(ctx, p.key(key))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if v == nil && err == nil {
		v = []byte{}
	}
	return v, err
}

// Scan implements vector.Reader and fulltext.Reader.
func (p prefixedReader) Scan(ctx context.Context, lower, upper []byte, fn func(key, value []byte) error) error {
	hi := storage.PrefixEnd(p.prefix)
	if upper != nil {
		hi = p.key(upper)
	}
	it, err := p.r.NewIterator(ctx, p.key(lower), hi, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		if err := fn(it.Key()[len(p.prefix):], it.Value()); err != nil {
			return err
		}
	}
	return it.Err()
}

// prefixedWriter writes one index's keyspace into a storage batch.
type prefixedWriter struct {
	b      vector.Writer
	prefix []byte
}

// Set implements vector.Writer and fulltext.Writer.
func (p prefixedWriter) Set(key, value []byte) error {
	return p.b.Set(prefixedReader{prefix: p.prefix}.key(key), value)
}

// Delete implements vector.Writer and fulltext.Writer.
func (p prefixedWriter) Delete(key []byte) error {
	return p.b.Delete(prefixedReader{prefix: p.prefix}.key(key))
}

// heldWriter holds writes until release, then passes them on to b.
type heldWriter struct {
	held vector.Batch
	b    storage.Batch
}

// Set implements vector.Writer.
func (h *heldWriter) Set(key, value []byte) error {
	if h.b != nil {
		return h.b.Set(key, value)
	}
	return h.held.Set(key, value)
}

// Delete implements vector.Writer.
func (h *heldWriter) Delete(key []byte) error {
	if h.b != nil {
		return h.b.Delete(key)
	}
	return h.held.Delete(key)
}

// release writes what was held to b, and what follows straight to it.
func (h *heldWriter) release(b storage.Batch) error {
	h.b = b
	err := h.held.Apply(b)
	h.held = vector.Batch{}
	return err
}

// emptyReader is a keyspace with nothing in it: a rebuild opens its indexes
// on it.
type emptyReader struct{}

func (emptyReader) Get(context.Context, []byte) ([]byte, error) { return nil, storage.ErrNotFound }

func (emptyReader) NewIterator(context.Context, []byte, []byte, bool) (storage.Iterator, error) {
	return emptyIterator{}, nil
}

type emptyIterator struct{}

func (emptyIterator) Next() bool    { return false }
func (emptyIterator) Key() []byte   { return nil }
func (emptyIterator) Value() []byte { return nil }
func (emptyIterator) Err() error    { return nil }
func (emptyIterator) Close() error  { return nil }

// parseNumberArray reads a JSON array of numbers (an embedding), without
// encoding/json's reflection: on the write path of every item it is most of
// what a vector index costs.
func parseNumberArray(raw []byte) ([]float64, bool) {
	i := jsondoc.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	out := make([]float64, 0, bytes.Count(raw, []byte{','})+1)
	i = jsondoc.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, jsondoc.SkipSpace(raw, i+1) == len(raw)
	}
	for {
		j := i
		for j < len(raw) && (raw[j] == '-' || raw[j] == '+' || raw[j] == '.' || raw[j] == 'e' || raw[j] == 'E' || raw[j] >= '0' && raw[j] <= '9') {
			j++
		}
		if j == i || !json.Valid(raw[i:j]) {
			return nil, false
		}
		x, err := strconv.ParseFloat(string(raw[i:j]), 64)
		if err != nil {
			return nil, false
		}
		out = append(out, x)
		i = jsondoc.SkipSpace(raw, j)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = jsondoc.SkipSpace(raw, i+1)
		case ']':
			return out, jsondoc.SkipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

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
	if e.shared == nil {
		return false
	}
	p, ok := e.store.(interface{ Places() int })
	return !ok || p.Places() <= 1
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
	snap, _, w, err := e.store.(storage.Shared).SnapshotAll(ctx, nil)
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
		var text string
		if raw := rawAt(s.doc, ti.segs); raw == nil || json.Unmarshal(raw, &text) != nil {
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
