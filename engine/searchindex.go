package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
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
// (searchshared.go).

// searchIndexes is the engine's open search indexes, by container RID.
type searchIndexes struct {
	mu   sync.Mutex
	byID map[string]*searchState
	// samples are the shared store's watermarks the TTL sweep read, for
	// pruning the change records (pruneSearchChanges).
	samples []watermarkSample
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
func objectGetter(o object) valueGetter {
	return func(segs []string) json.RawMessage {
		v, ok := o.get(segs[0])
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
		o, err := parseObject(raw)
		if err != nil {
			return nil
		}
		var ok bool
		if raw, ok = o.get(s); !ok {
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
func (t *txn) reindexSearch(key []byte, doc object) error {
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
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	out := make([]float64, 0, bytes.Count(raw, []byte{','})+1)
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, skipSpace(raw, i+1) == len(raw)
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
		i = skipSpace(raw, j)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return out, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}
