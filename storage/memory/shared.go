package memory

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/orrery-db/orrery/storage"
)

// SharedStore is a handle on a memory store that implements
// storage.Shared in-process: the same contract as a store shared by
// several processes (PostgreSQL), for tests that run several engines, each
// on its own handle, in one process. Open makes another handle on the same
// data; Sever makes a handle lose its duties as a lost connection would.
type SharedStore struct {
	st      *sharedState
	closed  atomic.Bool
	leadsMu sync.Mutex
	leads   map[*memLead]struct{}
}

var _ storage.Shared = (*SharedStore)(nil)

// sharedState is what every handle of one store shares.
type sharedState struct {
	store *Store

	mu       sync.Mutex
	handles  int
	locks    map[string]*lockState
	next     uint64              // the last sequence number given
	inflight map[uint64]struct{} // sequence numbers of open batches
	ended    uint64              // the highest sequence number of an ended batch
	duties   map[string]chan struct{}
}

// NewShared returns a handle on a new, empty shared store.
func NewShared() *SharedStore {
	st := &sharedState{
		store:    New(),
		locks:    map[string]*lockState{},
		inflight: map[uint64]struct{}{},
		duties:   map[string]chan struct{}{},
	}
	return st.open()
}

func (st *sharedState) open() *SharedStore {
	st.mu.Lock()
	st.handles++
	st.mu.Unlock()
	return &SharedStore{st: st, leads: map[*memLead]struct{}{}}
}

// Open returns another handle on the same store, as a second process
// opening the same database. The data goes when the last handle is closed.
func (s *SharedStore) Open() *SharedStore { return s.st.open() }

// Get returns a copy of the value stored under key.
func (s *SharedStore) Get(ctx context.Context, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	return s.st.store.Get(ctx, key)
}

// NewIterator iterates over a point-in-time view of [lower, upper).
func (s *SharedStore) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	return s.st.store.NewIterator(ctx, lower, upper, reverse)
}

// NewBatch starts a batch; on a closed handle every method of it returns
// storage.ErrClosed.
func (s *SharedStore) NewBatch() storage.Batch {
	b := &batch{store: s.st.store, pending: newTree()}
	if s.closed.Load() {
		b.Close()
	}
	return b
}

// NewSnapshot returns a consistent view of the store as it is now.
func (s *SharedStore) NewSnapshot(ctx context.Context) (storage.Snapshot, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	return s.st.store.NewSnapshot(ctx)
}

// Close closes the handle, giving up its duties; the last one closes the
// store.
func (s *SharedStore) Close() error {
	if s.closed.Swap(true) {
		return storage.ErrClosed
	}
	s.Sever()
	st := s.st
	st.mu.Lock()
	st.handles--
	last := st.handles == 0
	st.mu.Unlock()
	if last {
		return st.store.Close()
	}
	return nil
}

// lockState is one named lock: its holders and, in arrival order, its
// waiters.
type lockState struct {
	excl   *sharedBatch
	shared map[*sharedBatch]int
	queue  []*lockWaiter
}

type lockWaiter struct {
	b       *sharedBatch
	excl    bool
	ready   chan struct{}
	granted bool
}

// grantable reports whether b may hold l in the mode asked now.
func (l *lockState) grantable(b *sharedBatch, excl bool) bool {
	if l.excl != nil && l.excl != b {
		return false
	}
	if !excl {
		return true
	}
	for holder := range l.shared {
		if holder != b {
			return false
		}
	}
	return true
}

func (l *lockState) grant(b *sharedBatch, excl bool) {
	if excl {
		l.excl = b
	} else {
		l.shared[b]++
	}
}

// serve grants the waiters at the head of the queue that can hold the lock
// now, in order, stopping at the first that cannot.
func (l *lockState) serve() {
	for len(l.queue) > 0 {
		w := l.queue[0]
		if !l.grantable(w.b, w.excl) {
			return
		}
		l.queue = l.queue[1:]
		l.grant(w.b, w.excl)
		w.granted = true
		close(w.ready)
	}
}

// sharedBatch is a storage.SharedBatch of the memory store.
type sharedBatch struct {
	*batch
	st   *sharedState
	held []string // names of locks held, once per grant
	seq  uint64
}

// NewSharedBatch starts a batch that can take locks and a sequence number.
func (s *SharedStore) NewSharedBatch(ctx context.Context) (storage.SharedBatch, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return &sharedBatch{batch: &batch{store: s.st.store, pending: newTree()}, st: s.st}, nil
}

// Lock takes the lock named key, waiting in arrival order behind holders
// and earlier waiters in a conflicting mode.
func (b *sharedBatch) Lock(ctx context.Context, key []byte, exclusive bool) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	if err := ctxErr(ctx); err != nil {
		return err
	}
	name := string(key)
	st := b.st
	st.mu.Lock()
	l := st.locks[name]
	if l == nil {
		l = &lockState{shared: map[*sharedBatch]int{}}
		st.locks[name] = l
	}
	mine := l.excl == b || (!exclusive && l.shared[b] > 0)
	if mine || (len(l.queue) == 0 && l.grantable(b, exclusive)) {
		l.grant(b, exclusive)
		b.held = append(b.held, name)
		st.mu.Unlock()
		return nil
	}
	w := &lockWaiter{b: b, excl: exclusive, ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	st.mu.Unlock()
	select {
	case <-w.ready:
		st.mu.Lock()
		b.held = append(b.held, name)
		st.mu.Unlock()
		return nil
	case <-ctx.Done():
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if w.granted {
		b.held = append(b.held, name)
		return ctx.Err() // held until the batch ends, like a late grant on a server
	}
	for i, q := range l.queue {
		if q == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			break
		}
	}
	l.serve()
	return ctx.Err()
}

// Sequence gives the batch the next number at its first call.
func (b *sharedBatch) Sequence(ctx context.Context) (uint64, error) {
	if b.pending == nil {
		return 0, storage.ErrClosed
	}
	if b.seq != 0 {
		return b.seq, nil
	}
	b.st.mu.Lock()
	b.st.next++
	b.seq = b.st.next
	b.st.inflight[b.seq] = struct{}{}
	b.st.mu.Unlock()
	return b.seq, nil
}

// Begin takes locks in order, then reads keys, then the sequence number.
func (b *sharedBatch) Begin(ctx context.Context, locks []storage.LockRequest, keys [][]byte, sequence bool) ([][]byte, error) {
	for _, l := range locks {
		if err := b.Lock(ctx, l.Key, l.Exclusive); err != nil {
			return nil, err
		}
	}
	values, err := storage.GetMany(ctx, b, keys)
	if err != nil {
		return nil, err
	}
	if sequence {
		if _, err := b.Sequence(ctx); err != nil {
			return nil, err
		}
	}
	return values, nil
}

// CommitWatermark is Commit, then the watermark.
func (b *sharedBatch) CommitWatermark(ctx context.Context) (uint64, error) {
	if err := b.Commit(ctx); err != nil {
		return 0, err
	}
	return b.st.watermark(), nil
}

// end releases the batch's locks and sequence number.
func (b *sharedBatch) end() {
	st := b.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if b.seq != 0 {
		delete(st.inflight, b.seq)
		st.ended = max(st.ended, b.seq)
	}
	for _, name := range b.held {
		l := st.locks[name]
		if l == nil {
			continue // held twice, and freed at the first
		}
		if l.excl == b {
			l.excl = nil
		}
		delete(l.shared, b)
		l.serve()
		if l.excl == nil && len(l.shared) == 0 && len(l.queue) == 0 {
			delete(st.locks, name)
		}
	}
	b.held = nil
}

// Commit applies the writes, then releases the locks.
func (b *sharedBatch) Commit(ctx context.Context) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	err := b.batch.Commit(ctx)
	b.end()
	b.pending = nil
	return err
}

// CommitPipelined is Commit.
func (b *sharedBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// Close discards an uncommitted batch and releases its locks.
func (b *sharedBatch) Close() error {
	err := b.batch.Close()
	b.end()
	return err
}

// Watermark is the lowest sequence number of an open batch, or the next
// number when none is open.
func (s *SharedStore) Watermark(ctx context.Context) (uint64, error) {
	if s.closed.Load() {
		return 0, storage.ErrClosed
	}
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	return s.st.watermark(), nil
}

func (st *sharedState) watermark() uint64 {
	w, _ := st.marks()
	return w
}

// marks returns the watermark and the highest sequence number of a batch
// that has ended, as of one moment.
func (st *sharedState) marks() (watermark, ended uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := st.next + 1
	for seq := range st.inflight {
		w = min(w, seq)
	}
	return w, st.ended
}

// GetAll reads keys in one snapshot, then the watermark: taken just after
// the snapshot, it can only be newer than the snapshot's own, which a
// caller may take it for (it only rises).
func (s *SharedStore) GetAll(ctx context.Context, keys [][]byte) ([][]byte, uint64, error) {
	if s.closed.Load() {
		return nil, 0, storage.ErrClosed
	}
	snap, err := s.st.store.NewSnapshot(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer snap.Close()
	values, err := storage.GetMany(ctx, snap, keys)
	if err != nil {
		return nil, 0, err
	}
	return values, s.st.watermark(), nil
}

// memLead is a duty held by a handle.
type memLead struct {
	token chan struct{}
	lost  chan struct{}
	once  sync.Once
}

// Lead takes duty, waiting while any handle holds it.
func (s *SharedStore) Lead(ctx context.Context, duty string) (<-chan struct{}, func(), error) {
	if s.closed.Load() {
		return nil, nil, storage.ErrClosed
	}
	st := s.st
	st.mu.Lock()
	token := st.duties[duty]
	if token == nil {
		token = make(chan struct{}, 1)
		st.duties[duty] = token
	}
	st.mu.Unlock()
	select {
	case token <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	l := &memLead{token: token, lost: make(chan struct{})}
	s.leadsMu.Lock()
	s.leads[l] = struct{}{}
	s.leadsMu.Unlock()
	release := func() {
		s.leadsMu.Lock()
		delete(s.leads, l)
		s.leadsMu.Unlock()
		l.free()
	}
	return l.lost, release, nil
}

func (l *memLead) free() { l.once.Do(func() { <-l.token }) }

// Sever makes the handle lose every duty it holds, as a process whose
// connection to a shared server broke: each lost channel closes and the
// duty passes on.
func (s *SharedStore) Sever() {
	s.leadsMu.Lock()
	leads := s.leads
	s.leads = map[*memLead]struct{}{}
	s.leadsMu.Unlock()
	for l := range leads {
		close(l.lost)
		l.free()
	}
}

// SnapshotAll reads the watermark, then opens a snapshot and reads keys in
// it: every batch below a watermark read first has ended before the
// snapshot is taken. The snapshot tells the highest sequence number of a
// batch that had ended when the watermark was read (storage.Ended).
func (s *SharedStore) SnapshotAll(ctx context.Context, keys [][]byte) (storage.Snapshot, [][]byte, uint64, error) {
	if s.closed.Load() {
		return nil, nil, 0, storage.ErrClosed
	}
	w, ended := s.st.marks()
	snap, err := s.st.store.NewSnapshot(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	values, err := storage.GetMany(ctx, snap, keys)
	if err != nil {
		snap.Close()
		return nil, nil, 0, err
	}
	return endedSnapshot{Snapshot: snap, ended: ended}, values, w, nil
}

// endedSnapshot is a snapshot of SnapshotAll, which tells the highest
// sequence number of a batch that had ended when it was taken.
type endedSnapshot struct {
	storage.Snapshot
	ended uint64
}

func (s endedSnapshot) Ended() uint64 { return s.ended }
