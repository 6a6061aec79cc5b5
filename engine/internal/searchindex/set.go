package searchindex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// Mode is how a Set keeps its indexes.
type Mode int

const (
	// Off keeps none: the store is over several places.
	Off Mode = iota
	// Local keeps them in the store, in the items' transactions.
	Local
	// Shared keeps them in this process's memory, caught up with the
	// store's change records.
	Shared
)

// Options configure a Set.
type Options struct {
	Mode Mode
	// Store is the engine's store (a storage.Shared when Mode is Shared).
	Store storage.Store
	// Decode returns the document of a stored item record.
	Decode func(key, value []byte) (doc []byte, err error)
	// Purge deletes every key under a prefix, a committed chunk at a time.
	Purge func(ctx context.Context, prefix []byte) error
	Log   *slog.Logger
	// Ctx is the context of background work: a client that goes away must
	// not leave indexes half built. Bg counts the builds a query started
	// and left running.
	Ctx context.Context
	Bg  *sync.WaitGroup
}

// Container is what a Set needs of a container.
type Container interface {
	// RID is the container's resource id.
	RID() []byte
	// Spec is what the indexes of this definition of the container are
	// built for.
	Spec() Spec
	// HasIndexes reports whether this definition names a vector or
	// full-text index (Spec().Fingerprint != "", without building it).
	HasIndexes() bool
	// Retired reports whether a replace made another definition current.
	Retired() bool
	// Successor returns the current definition (an error: deleted).
	Successor() (Container, error)
}

// Spec is what a container's search indexes are built for.
type Spec struct {
	RID []byte
	// Name names the container in logs.
	Name string
	// Fingerprint is the vector indexes' paths and configurations and the
	// full-text indexes' paths and languages; "" when there are none.
	Fingerprint string
	Vectors     []VectorSpec
	Texts       []TextSpec
}

// VectorSpec is one vector index of a container.
type VectorSpec struct {
	Path   string
	Config vector.Config
	// ShardKey is the path of its vectorIndexShardKey, "" when none.
	ShardKey string
}

// TextSpec is one full-text index of a container.
type TextSpec struct {
	Path     string
	Language string
}

// Fingerprint returns the fingerprint of indexes built for vs and ts.
func Fingerprint(vs []VectorSpec, ts []TextSpec) string {
	var b strings.Builder
	for _, v := range vs {
		if v.ShardKey == "" {
			fmt.Fprintf(&b, "v%q %+v\n", v.Path, v.Config)
		} else {
			fmt.Fprintf(&b, "v%q %+v shard%q\n", v.Path, v.Config, v.ShardKey)
		}
	}
	for _, t := range ts {
		fmt.Fprintf(&b, "t%q %s\n", t.Path, t.Language)
	}
	return b.String()
}

// Set is the engine's open search indexes, by container RID.
type Set struct {
	opts Options
	keep keeper
	mu   sync.Mutex
	byID map[string]*State
}

// keeper is what differs between the modes.
type keeper interface {
	// kept reports whether indexes are kept at all.
	kept() bool
	// open opens st's indexes (made, not loaded) for spec.
	open(ctx context.Context, spec Spec, st *State) error
	// retire retires st, whose writers (if any) finish first; the
	// indexes are held until release.
	retire(st *State) (release func())
	// reindex changes the indexes of c for one item write in the
	// transaction of b (numbered lsn), w its pending changes.
	reindex(w *Write, b storage.Batch, lsn uint64, c Container, suffix []byte, get Getter) error
	// view returns c's indexes and the view of them a query over r takes.
	view(ctx context.Context, c Container, r storage.Reader) (*State, *View, error)
	// whole reports whether the snapshot r holds st's state whole.
	whole(ctx context.Context, st *State, r storage.Reader) (bool, error)
	// withQuery marks ctx as a query's over a snapshot at watermark w.
	withQuery(ctx context.Context, w uint64) context.Context
}

// New returns an empty Set keeping indexes as opts.Mode says.
func New(opts Options) *Set {
	s := &Set{opts: opts}
	switch opts.Mode {
	case Local:
		s.keep = &local{s}
	case Shared:
		s.keep = &shared{s}
	default:
		s.keep = off{}
	}
	return s
}

// Kept reports whether the Set keeps indexes (Mode is not Off).
func (s *Set) Kept() bool { return s.keep.kept() }

// State is the open search indexes of one container's policy.
type State struct {
	spec  Spec
	ready chan struct{} // closed once opened or built
	err   error         // why opening failed (set before ready closes)
	// retired is set once the indexes of another policy replace these: a
	// writer that prepared them then lets go and looks again.
	retired atomic.Bool

	Vectors []*VectorIndex
	Texts   []*TextIndex

	// caught is the indexes' catch-up state in Shared mode.
	caught *catchUp
}

// VectorIndex is one open vector index.
type VectorIndex struct {
	Path string
	segs []string
	cfg  vector.Config
	// Index is the index, nil when it has a shard key (shards).
	Index  *vector.Index
	space  keyspace
	shards *shards
}

// TextIndex is one open full-text index.
type TextIndex struct {
	Path  string
	segs  []string
	Index *fulltext.Index
	space keyspace
}

// Segments returns the property path of t's texts.
func (t *TextIndex) Segments() []string { return t.segs }

// State reads v's keyspace as r has it (or as this process's memory does
// in Shared mode); not for an index with a shard key.
func (v *VectorIndex) State(r storage.Reader) vector.Reader { return v.space.reader(r) }

// Config returns v's configuration.
func (v *VectorIndex) Config() vector.Config { return v.cfg }

// ShardKey returns the path of v's shard key, nil when it has none.
func (v *VectorIndex) ShardKey() []string {
	if v.shards == nil {
		return nil
	}
	return v.shards.segs
}

// Len returns how many items v holds.
func (v *VectorIndex) Len() int {
	if v.shards != nil {
		return v.shards.len()
	}
	return v.Index.Len()
}

// Search returns the opt.K items of v closest to q that pass opt.Filter,
// with v's keyspace as r has it: of every shard, or, when values is not
// nil and v has a shard key, of the shards of values only (the shard
// key's values a query's WHERE clause allows).
func (v *VectorIndex) Search(ctx context.Context, q []float32, opt vector.SearchOptions, r storage.Reader, values []json.RawMessage) ([]vector.Result, error) {
	if v.shards == nil {
		opt.Reader = v.space.reader(r)
		return v.Index.Search(ctx, q, opt)
	}
	var encs []string
	if values != nil {
		encs = make([]string, len(values))
		for i, raw := range values {
			encs[i] = shardEncoding(raw)
		}
	}
	return v.shards.search(ctx, q, opt, r, encs)
}

// State reads t's keyspace as r has it (or as this process's memory does
// in Shared mode).
func (t *TextIndex) State(r storage.Reader) fulltext.Reader { return t.space.reader(r) }

// CountedIn returns where t's counters were read from, of the store and a
// query's snapshot r: the store, or in Shared mode r, with which the
// in-memory index was caught up.
func (t *TextIndex) CountedIn(store, r storage.Reader) storage.Reader {
	return t.space.countedIn(store, r)
}

// VectorAt returns st's vector index of a path, nil when none.
func (st *State) VectorAt(path []string) *VectorIndex {
	for _, v := range st.Vectors {
		if v.Path == "/"+strings.Join(path, "/") {
			return v
		}
	}
	return nil
}

// TextAt returns st's full-text index of a path, nil when none.
func (st *State) TextAt(path []string) *TextIndex {
	for _, t := range st.Texts {
		if t.Path == "/"+strings.Join(path, "/") {
			return t
		}
	}
	return nil
}

func pathSegments(p string) []string { return strings.Split(strings.TrimPrefix(p, "/"), "/") }

// Of returns c's open search indexes, opening or building them first; nil
// when c has none or none are kept.
func (s *Set) Of(c Container) (*State, error) {
	if !s.keep.kept() {
		return nil, nil
	}
	if c.Retired() {
		// A replace made another definition current: index by its
		// policy (a deleted container's writes need no index).
		next, err := c.Successor()
		if err != nil {
			return nil, nil
		}
		c = next
	}
	spec := c.Spec()
	s.mu.Lock()
	st := s.byID[string(spec.RID)]
	if spec.Fingerprint == "" {
		s.mu.Unlock()
		return nil, nil
	}
	if st == nil || st.spec.Fingerprint != spec.Fingerprint {
		old := st
		st = &State{spec: spec, ready: make(chan struct{})}
		if s.byID == nil {
			s.byID = map[string]*State{}
		}
		s.byID[string(spec.RID)] = st
		s.mu.Unlock()
		// The writers of the indexes replaced finish first, and none
		// starts again on them: the rebuild's snapshot then holds every
		// item they indexed, and nothing of theirs lands in its keyspace.
		release := s.retire(old)
		// The opening is the engine's: a client that goes away must not
		// leave the indexes half built.
		st.err = s.keep.open(s.opts.Ctx, spec, st)
		release()
		if st.err != nil {
			s.mu.Lock()
			if s.byID[string(spec.RID)] == st {
				delete(s.byID, string(spec.RID)) // the next use tries again
			}
			s.mu.Unlock()
		}
		close(st.ready)
	} else {
		s.mu.Unlock()
		<-st.ready
	}
	if st.err != nil {
		return nil, st.err
	}
	return st, nil
}

// retire waits for the transactions holding st's indexes (nil: none) to
// finish, holds the indexes until release, and retires them.
func (s *Set) retire(st *State) (release func()) {
	if st == nil {
		return func() {}
	}
	<-st.ready
	if st.err != nil {
		return func() {}
	}
	return s.keep.retire(st)
}

// Within is Of for a query: when the indexes are not open yet it waits for
// them at most wait (or until ctx ends) and returns nil if they are still
// being built.
func (s *Set) Within(ctx context.Context, c Container, wait time.Duration) (*State, error) {
	if !c.Retired() {
		spec := c.Spec()
		s.mu.Lock()
		st := s.byID[string(spec.RID)]
		s.mu.Unlock()
		if st != nil && st.spec.Fingerprint == spec.Fingerprint {
			select {
			case <-st.ready:
				if st.err == nil {
					return st, nil
				}
			default:
			}
		}
	}
	var st *State
	var err error
	done := make(chan struct{})
	s.opts.Bg.Add(1)
	go func() {
		defer s.opts.Bg.Done()
		defer close(done)
		st, err = s.Of(c)
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

// PolicyReplaced is called with the batch of a container replace: when the
// search indexes change (say, the full-text ones are dropped, to be added
// again later), their state is marked stale in the batch, so that no later
// opening takes it for current, and the open ones are forgotten when none
// remain. The indexes are rebuilt when next used.
func (s *Set) PolicyReplaced(b storage.Batch, rid []byte, prev, next string) error {
	if prev == next {
		return nil
	}
	if err := b.Delete(keys.SearchMetaKey(rid)); err != nil {
		return err
	}
	if next == "" {
		s.Drop(rid)
	}
	return nil
}

// Drop forgets a container's indexes.
func (s *Set) Drop(rid []byte) {
	s.mu.Lock()
	delete(s.byID, string(rid))
	s.mu.Unlock()
}

// Retain forgets the indexes of the containers live says are gone (a
// catalog reload no longer holds them: deleted, or deleted and created
// again under a new RID, by another gateway).
func (s *Set) Retain(live func(rid []byte) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for rid := range s.byID {
		if !live([]byte(rid)) {
			delete(s.byID, rid)
		}
	}
}

// Holds reports whether the Set holds indexes of the container of rid.
func (s *Set) Holds(rid []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[string(rid)] != nil
}

// Reindex changes c's search indexes for one item write in the storage
// transaction of b, numbered lsn: suffix is the item key's part after the
// container's item prefix, get reads the item's new document (nil: the
// item is deleted). w holds the transaction's pending changes: Commit it
// once b is applied, Abort it otherwise.
func (s *Set) Reindex(w *Write, b storage.Batch, lsn uint64, c Container, suffix []byte, get Getter) error {
	return s.keep.reindex(w, b, lsn, c, suffix, get)
}

// View returns c's search indexes and the view of them a query over r may
// take; nil when c has none, when none are kept, when the indexes cannot
// answer for r (in Shared mode: r is no query snapshot, or older than what
// the indexes remember). The caller calls the view's Done once its searches
// are over.
func (s *Set) View(ctx context.Context, c Container, r storage.Reader) (*State, *View, error) {
	return s.keep.view(ctx, c, r)
}

// Whole reports whether the snapshot r holds st's state whole for its
// policy, so that reading the indexes' postings from r answers for r's
// items (false: r was taken before a rebuild finished).
func (s *Set) Whole(ctx context.Context, st *State, r storage.Reader) (bool, error) {
	return s.keep.whole(ctx, st, r)
}

// WithQuery marks ctx as a query's over a snapshot taken at watermark w,
// for the indexes of Shared mode.
func (s *Set) WithQuery(ctx context.Context, w uint64) context.Context {
	return s.keep.withQuery(ctx, w)
}

// View is what a search of one query may take from its container's
// indexes: in Shared mode, the indexes caught up with the query's
// snapshot, and the items (stale) whose state there is not the snapshot's.
// Done lets the indexes catch up for others again.
type View struct {
	stale   map[string]bool // item key suffixes
	release func()
}

// IsStale reports whether the index's state of the item of suffix is not
// the query's: the query evaluates it from its snapshot.
func (v *View) IsStale(suffix []byte) bool { return v != nil && v.stale[string(suffix)] }

// Stale reports how many items are stale.
func (v *View) Stale() int {
	if v == nil {
		return 0
	}
	return len(v.stale)
}

// StaleKeys returns the stale items' key suffixes, in order.
func (v *View) StaleKeys() [][]byte {
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

// Done ends the view.
func (v *View) Done() {
	if v != nil && v.release != nil {
		v.release()
		v.release = nil
	}
}

// off keeps no index.
type off struct{}

func (off) kept() bool                                                  { return false }
func (off) open(context.Context, Spec, *State) error                    { return nil }
func (off) retire(st *State) func()                                     { st.retired.Store(true); return func() {} }
func (off) whole(context.Context, *State, storage.Reader) (bool, error) { return false, nil }
func (off) withQuery(ctx context.Context, _ uint64) context.Context     { return ctx }
func (off) reindex(*Write, storage.Batch, uint64, Container, []byte, Getter) error {
	return nil
}
func (off) view(context.Context, Container, storage.Reader) (*State, *View, error) {
	return nil, nil, nil
}
