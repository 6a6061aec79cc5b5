// Package placed spreads one shared store over several (a PostgreSQL
// database each, say): every key lives in one of its places, as a Router
// says, and the Store reads and writes each key there. The engine installs
// the router: it knows the key layout and on which place it put each of a
// container's partition key ranges.
//
// A place's transactions are that place's: a SharedBatch of Place(i) takes
// its locks, sequence number and watermark from place i alone, so that a
// transaction of one logical partition (one range) runs on one database.
// A batch or snapshot of the Store itself spans every place it touches:
// each place's part is atomic, the whole is not, which the engine accepts
// for what it writes that way (catalog changes, whose records live in
// place 0 and whose version is copied to every place under every place's
// catalog lock; background chunks).
//
// Sequence numbers of place i out of n places are the place's own numbers
// times n plus i: unique across places (item RIDs are made of them), in
// each place's own order, and a place's watermark keeps its meaning. The
// watermark of the Store is the lowest of its places'. The number of
// places must therefore stay what it was when the data was written.
package placed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/orrery-db/orrery/storage"
)

// Where a Router may say a key lives, besides a place's index.
const (
	// Everywhere: a copy in every place (read from place 0), written to
	// and locked in each, in place order.
	Everywhere = -1
	// Anywhere: the key alone does not tell (say, a delete of an entry
	// whose value named the item): a read looks in every place, a delete
	// goes to every place, a write to place 0.
	Anywhere = -2
)

// Router says where keys live.
type Router interface {
	// Key is the place of key; value is what a write stores under it (nil
	// for reads, deletes and locks).
	Key(key, value []byte) int
	// Span is the place holding every key in [lower, upper) (nil bounds
	// are open), or Anywhere.
	Span(lower, upper []byte) int
}

// Store is a storage.Shared over places.
type Store struct {
	places []storage.Shared
	views  []*Place
	router atomic.Pointer[routerBox]
	closed atomic.Bool
}

type routerBox struct{ Router }

// everythingAtZero is the router until one is set: every key in place 0.
type everythingAtZero struct{}

func (everythingAtZero) Key([]byte, []byte) int  { return 0 }
func (everythingAtZero) Span([]byte, []byte) int { return 0 }

// New is the store over places, at least one. It owns them: Close closes
// them.
func New(places ...storage.Shared) *Store {
	if len(places) == 0 {
		panic("placed: no places")
	}
	s := &Store{places: places}
	for i, p := range places {
		s.views = append(s.views, &Place{Shared: p, index: uint64(i), n: uint64(len(places))})
	}
	s.router.Store(&routerBox{everythingAtZero{}})
	return s
}

// SetRouter installs r, before the store is used.
func (s *Store) SetRouter(r Router) { s.router.Store(&routerBox{r}) }

// Places is the number of places.
func (s *Store) Places() int { return len(s.places) }

// Place is place i alone, its sequence numbers numbered as the Store's.
func (s *Store) Place(i int) storage.Shared { return s.views[i] }

func (s *Store) route() Router { return s.router.Load().Router }

// Place is one place of a Store: the place's own store, with its sequence
// numbers and watermarks numbered (x+floor)·n+index, where floor is the
// place's floor (RaiseFloor), read in the same round trip as the number
// or watermark it applies to.
type Place struct {
	storage.Shared
	index, n uint64
}

// floorKey holds a place's floor, big-endian. Its first byte is none of the
// engine's key families (letters), and no Router is asked about it.
var floorKey = []byte{0, 'f', 'l', 'o', 'o', 'r'}

func decodeFloor(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (p *Place) number(x, floor uint64) uint64 {
	if x == 0 {
		return 0
	}
	return (x+floor)*p.n + p.index
}

func (p *Place) NewSharedBatch(ctx context.Context) (storage.SharedBatch, error) {
	b, err := p.Shared.NewSharedBatch(ctx)
	if err != nil {
		return nil, err
	}
	return &placeBatch{SharedBatch: b, p: p}, nil
}

func (p *Place) Watermark(ctx context.Context) (uint64, error) {
	_, w, err := p.GetAll(ctx, nil)
	return w, err
}

// GetAll reads the floor along with keys.
func (p *Place) GetAll(ctx context.Context, keys [][]byte) ([][]byte, uint64, error) {
	v, w, err := p.Shared.GetAll(ctx, append(keys[:len(keys):len(keys)], floorKey))
	if err != nil {
		return nil, 0, err
	}
	return v[:len(keys)], p.number(w, decodeFloor(v[len(keys)])), nil
}

// SnapshotAll reads the floor along with keys.
func (p *Place) SnapshotAll(ctx context.Context, keys [][]byte) (storage.Snapshot, [][]byte, uint64, error) {
	snap, v, w, err := p.Shared.SnapshotAll(ctx, append(keys[:len(keys):len(keys)], floorKey))
	if err != nil {
		return nil, nil, 0, err
	}
	return snap, v[:len(keys)], p.number(w, decodeFloor(v[len(keys)])), nil
}

// sequenceSource is a store that hands out a sequence number without a
// batch (storage/postgres).
type sequenceSource interface {
	NextSequence(ctx context.Context) (uint64, error)
}

// NextSequence is the place's, when it has one; else a batch's.
func (p *Place) NextSequence(ctx context.Context) (uint64, error) {
	if src, ok := p.Shared.(sequenceSource); ok {
		v, err := p.Shared.Get(ctx, floorKey)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return 0, err
		}
		n, err := src.NextSequence(ctx)
		return p.number(n, decodeFloor(v)), err
	}
	b, err := p.NewSharedBatch(ctx)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	return b.Sequence(ctx)
}

// RaiseFloor makes place i's numbers, from now on, greater than above
// (a number of another place, whose keys move to this one). The caller
// makes sure that no batch of place i is open meanwhile (the engine holds
// every place's catalog lock).
func (s *Store) RaiseFloor(ctx context.Context, i int, above uint64) error {
	p := s.views[i]
	v, w, err := p.Shared.GetAll(ctx, [][]byte{floorKey})
	if err != nil {
		return err
	}
	floor := decodeFloor(v[0])
	if p.number(max(w, 1), floor) > above {
		return nil
	}
	// (w+floor)·n+index > above, with w the lowest number to come.
	floor = above/p.n + 1 - max(w, 1)
	b := p.Shared.NewBatch()
	defer b.Close()
	if err := b.Set(floorKey, binary.BigEndian.AppendUint64(nil, floor)); err != nil {
		return err
	}
	return b.Commit(ctx)
}

type placeBatch struct {
	storage.SharedBatch
	p *Place
	// floor is the place's floor, read as the batch began (or first
	// needed it): it cannot change while the batch is open.
	floor     uint64
	floorRead bool
}

// Insert is the place's batch's (storage.Insert).
func (b *placeBatch) Insert(key, value []byte) error {
	return storage.Insert(b.SharedBatch, key, value)
}

func (b *placeBatch) readFloor(ctx context.Context) error {
	if b.floorRead {
		return nil
	}
	v, err := b.SharedBatch.Get(ctx, floorKey)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	b.floor, b.floorRead = decodeFloor(v), true
	return nil
}

// Begin reads the floor along with keys.
func (b *placeBatch) Begin(ctx context.Context, locks []storage.LockRequest, keys [][]byte, sequence bool) ([][]byte, error) {
	v, err := b.SharedBatch.Begin(ctx, locks, append(keys[:len(keys):len(keys)], floorKey), sequence)
	if err != nil {
		return nil, err
	}
	b.floor, b.floorRead = decodeFloor(v[len(keys)]), true
	return v[:len(keys)], nil
}

func (b *placeBatch) Sequence(ctx context.Context) (uint64, error) {
	if err := b.readFloor(ctx); err != nil {
		return 0, err
	}
	n, err := b.SharedBatch.Sequence(ctx)
	return b.p.number(n, b.floor), err
}

func (b *placeBatch) CommitWatermark(ctx context.Context) (uint64, error) {
	if err := b.readFloor(ctx); err != nil {
		b.SharedBatch.Close()
		return 0, err
	}
	w, err := b.SharedBatch.CommitWatermark(ctx)
	return b.p.number(w, b.floor), err
}

// Get reads key where it lives.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	return getRouted(ctx, s.route(), key, func(i int) storage.Reader { return s.places[i] }, len(s.places))
}

// getRouted reads key from the reader of its place, or of each place until
// one has it.
func getRouted(ctx context.Context, r Router, key []byte, of func(int) storage.Reader, n int) ([]byte, error) {
	switch i := r.Key(key, nil); i {
	case Everywhere:
		return of(0).Get(ctx, key)
	case Anywhere:
		for i := range n {
			v, err := of(i).Get(ctx, key)
			if errors.Is(err, storage.ErrNotFound) || err == nil && !belongs(r, i, key, v) {
				continue
			}
			return v, err
		}
		return nil, storage.ErrNotFound
	default:
		return of(i).Get(ctx, key)
	}
}

// NewIterator iterates the places the span may be in, merged in key order.
func (s *Store) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	return iterateRouted(ctx, s.route(), lower, upper, reverse, func(i int) storage.Reader { return s.places[i] }, len(s.places))
}

func iterateRouted(ctx context.Context, r Router, lower, upper []byte, reverse bool, of func(int) storage.Reader, n int) (storage.Iterator, error) {
	if i := r.Span(lower, upper); i >= 0 {
		return of(i).NewIterator(ctx, lower, upper, reverse)
	}
	m := &merged{reverse: reverse, r: r}
	for i := range n {
		it, err := of(i).NewIterator(ctx, lower, upper, reverse)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.its = append(m.its, it)
	}
	return m, nil
}

// NewBatch starts a batch whose writes go where their keys live.
func (s *Store) NewBatch() storage.Batch {
	return &batch{s: s, subs: make([]storage.Batch, len(s.places))}
}

// NewSnapshot takes a snapshot of every place.
func (s *Store) NewSnapshot(ctx context.Context) (storage.Snapshot, error) {
	snap, _, _, err := s.snapshotAll(ctx, nil, false)
	return snap, err
}

// SnapshotAll takes a snapshot of every place at once (each place's is a
// point in time; the places' are not one), reading keys where they live.
// The watermark is the lowest of the places'; the snapshot's
// PlaceWatermark tells each.
func (s *Store) SnapshotAll(ctx context.Context, keys [][]byte) (storage.Snapshot, [][]byte, uint64, error) {
	return s.snapshotAll(ctx, keys, true)
}

func (s *Store) snapshotAll(ctx context.Context, keys [][]byte, all bool) (*Snapshot, [][]byte, uint64, error) {
	n := len(s.places)
	r := s.route()
	perPlace, where := s.split(r, keys, true)
	snap := &Snapshot{s: s, r: r, snaps: make([]storage.Snapshot, n), watermarks: make([]uint64, n)}
	got := make([][][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if all {
				snap.snaps[i], got[i], snap.watermarks[i], errs[i] = s.views[i].SnapshotAll(ctx, perPlace[i])
			} else {
				snap.snaps[i], errs[i] = s.places[i].NewSnapshot(ctx)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		snap.Close()
		return nil, nil, 0, err
	}
	return snap, gather(r, keys, where, got), lowest(snap.watermarks), nil
}

func lowest(ws []uint64) uint64 {
	low := ws[0]
	for _, w := range ws[1:] {
		if w < low {
			low = w
		}
	}
	return low
}

// split sorts keys by the place to read them from: perPlace[i] are place
// i's, and where[k] lists (place, position) pairs of key k.
//
// A key kept Everywhere is read from place 0, or with all from every
// place (a read that goes to every place anyway: gather then tells a
// change committed in some places and not yet in others).
func (s *Store) split(r Router, keys [][]byte, all ...bool) (perPlace [][][]byte, where [][][2]int) {
	n := len(s.places)
	perPlace = make([][][]byte, n)
	where = make([][][2]int, len(keys))
	for k, key := range keys {
		add := func(i int) {
			where[k] = append(where[k], [2]int{i, len(perPlace[i])})
			perPlace[i] = append(perPlace[i], key)
		}
		switch i := r.Key(key, nil); {
		case i == Everywhere && len(all) == 0:
			add(0)
		case i < 0:
			for i := range n {
				add(i)
			}
		default:
			add(i)
		}
	}
	return perPlace, where
}

// belongs reports whether key, found in place i with value v, is the
// place's by r: a copy a range move left behind in a place the key no
// longer lives in is passed over.
func belongs(r Router, i int, key, v []byte) bool {
	p := r.Key(key, v)
	return p < 0 || p == i
}

// Mixed is what a key kept Everywhere reads as when its copies differ: a
// change of it has committed in some places and not yet in others. No
// value written is equal to it.
var Mixed = []byte{0, 'm', 'i', 'x', 'e', 'd'}

// gather is the value of each key from the places' answers: the first
// present in a place it belongs to; for a key kept Everywhere read in
// every place, the value they agree on, or Mixed.
func gather(r Router, keys [][]byte, where [][][2]int, got [][][]byte) [][]byte {
	values := make([][]byte, len(keys))
	for k := range keys {
		if len(where[k]) > 1 && r.Key(keys[k], nil) == Everywhere {
			v0 := got[where[k][0][0]][where[k][0][1]]
			values[k] = v0
			for _, w := range where[k][1:] {
				if v := got[w[0]][w[1]]; !bytes.Equal(v, v0) || (v == nil) != (v0 == nil) {
					values[k] = Mixed
					break
				}
			}
			continue
		}
		for _, w := range where[k] {
			if v := got[w[0]][w[1]]; v != nil && (len(where[k]) == 1 || belongs(r, w[0], keys[k], v)) {
				values[k] = v
				break
			}
		}
	}
	return values
}

// GetAll reads keys where they live, with the lowest watermark of the
// places (one round trip each, side by side).
func (s *Store) GetAll(ctx context.Context, keys [][]byte) ([][]byte, uint64, error) {
	n := len(s.places)
	r := s.route()
	perPlace, where := s.split(r, keys, true)
	got := make([][][]byte, n)
	ws := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], ws[i], errs[i] = s.views[i].GetAll(ctx, perPlace[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	return gather(r, keys, where, got), lowest(ws), nil
}

// Watermark is the lowest of the places'.
func (s *Store) Watermark(ctx context.Context) (uint64, error) {
	ws := make([]uint64, len(s.places))
	for i, v := range s.views {
		w, err := v.Watermark(ctx)
		if err != nil {
			return 0, err
		}
		ws[i] = w
	}
	return lowest(ws), nil
}

// NextSequence is place 0's.
func (s *Store) NextSequence(ctx context.Context) (uint64, error) {
	return s.views[0].NextSequence(ctx)
}

// Lead is place 0's.
func (s *Store) Lead(ctx context.Context, duty string) (<-chan struct{}, func(), error) {
	return s.places[0].Lead(ctx, duty)
}

// NewSharedBatch starts a batch over the places its keys and locks live
// in; its Sequence is place 0's.
func (s *Store) NewSharedBatch(ctx context.Context) (storage.SharedBatch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &sharedBatch{batch: batch{s: s, subs: make([]storage.Batch, len(s.places))}}
	b.open = func(ctx context.Context, i int) (storage.Batch, error) { return s.views[i].NewSharedBatch(ctx) }
	return b, nil
}

// Close closes every place.
func (s *Store) Close() error {
	s.closed.Store(true)
	var errs []error
	for _, p := range s.places {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// batch is a Batch of the Store: a batch per place, made when first used.
type batch struct {
	s    *Store
	subs []storage.Batch
	// open makes place i's batch (plain batches: the place's NewBatch).
	open   func(ctx context.Context, i int) (storage.Batch, error)
	closed bool
}

func (b *batch) sub(ctx context.Context, i int) (storage.Batch, error) {
	if b.closed {
		return nil, storage.ErrClosed
	}
	if b.subs[i] == nil {
		if b.open != nil {
			sb, err := b.open(ctx, i)
			if err != nil {
				return nil, err
			}
			b.subs[i] = sb
		} else {
			b.subs[i] = b.s.places[i].NewBatch()
		}
	}
	return b.subs[i], nil
}

// reader is place i's batch as a Reader; an error making it is the
// reader's error.
func (b *batch) reader(ctx context.Context) func(i int) storage.Reader {
	return func(i int) storage.Reader {
		sb, err := b.sub(ctx, i)
		if err != nil {
			return failed{err}
		}
		return sb
	}
}

func (b *batch) Get(ctx context.Context, key []byte) ([]byte, error) {
	return getRouted(ctx, b.s.route(), key, b.reader(ctx), len(b.subs))
}

func (b *batch) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	return iterateRouted(ctx, b.s.route(), lower, upper, reverse, b.reader(ctx), len(b.subs))
}

// each runs fn on place i's batch, or every place's (Everywhere). A write
// has no context: a shared batch it starts waits for its connection
// under the place's own timeout.
func (b *batch) each(i int, fn func(storage.Batch) error) error {
	if i >= 0 {
		sb, err := b.sub(context.Background(), i)
		if err != nil {
			return err
		}
		return fn(sb)
	}
	for i := range b.subs {
		if err := b.each(i, fn); err != nil {
			return err
		}
	}
	return nil
}

func (b *batch) Set(key, value []byte) error {
	i := b.s.route().Key(key, value)
	if i == Anywhere {
		i = 0
	}
	return b.each(i, func(sb storage.Batch) error { return sb.Set(key, value) })
}

// Insert is Set of a key declared new (storage.Inserter), in the place
// that holds it, which checks it if it can.
func (b *batch) Insert(key, value []byte) error {
	i := b.s.route().Key(key, value)
	if i == Anywhere {
		i = 0
	}
	return b.each(i, func(sb storage.Batch) error { return storage.Insert(sb, key, value) })
}

func (b *batch) Delete(key []byte) error {
	i := b.s.route().Key(key, nil)
	if i == Anywhere {
		i = Everywhere
	}
	return b.each(i, func(sb storage.Batch) error { return sb.Delete(key) })
}

func (b *batch) Count() int {
	n := 0
	for _, sb := range b.subs {
		if sb != nil {
			n += sb.Count()
		}
	}
	return n
}

// Commit commits each place's part, in place order: each atomically, the
// whole not.
func (b *batch) Commit(ctx context.Context) error {
	_, err := b.commit(ctx, false)
	return err
}

func (b *batch) commit(ctx context.Context, watermark bool) (uint64, error) {
	if b.closed || b.s.closed.Load() {
		return 0, storage.ErrClosed
	}
	defer b.Close()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var ws []uint64
	for i, sb := range b.subs {
		// A shared batch that only locked commits too, for its watermark.
		if sb == nil || sb.Count() == 0 && !watermark {
			continue
		}
		if watermark {
			w, err := sb.(storage.SharedBatch).CommitWatermark(ctx)
			if err != nil {
				return 0, err
			}
			ws = append(ws, w)
		} else if err := sb.Commit(ctx); err != nil {
			return 0, err
		}
		b.subs[i] = nil
	}
	if len(ws) == 0 {
		if watermark {
			return b.s.Watermark(ctx)
		}
		return 0, nil
	}
	return lowest(ws), nil
}

func (b *batch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

func (b *batch) Close() error {
	b.closed = true
	var errs []error
	for i, sb := range b.subs {
		if sb != nil {
			errs = append(errs, sb.Close())
			b.subs[i] = nil
		}
	}
	return errors.Join(errs...)
}

// sharedBatch is a SharedBatch of the Store: a shared batch per place
// (batch.open makes them).
type sharedBatch struct {
	batch
}

func (b *sharedBatch) shared(ctx context.Context, i int) (storage.SharedBatch, error) {
	sb, err := b.sub(ctx, i)
	if err != nil {
		return nil, err
	}
	return sb.(storage.SharedBatch), nil
}

// Lock takes the lock where its key lives; a lock Everywhere in every
// place, in place order, so that two such lockers cannot deadlock.
func (b *sharedBatch) Lock(ctx context.Context, key []byte, exclusive bool) error {
	return b.placesOf(ctx, b.s.route().Key(key, nil), func(sb storage.SharedBatch) error {
		return sb.Lock(ctx, key, exclusive)
	})
}

func (b *sharedBatch) placesOf(ctx context.Context, i int, fn func(storage.SharedBatch) error) error {
	if i == Anywhere {
		i = 0
	}
	if i >= 0 {
		sb, err := b.shared(ctx, i)
		if err != nil {
			return err
		}
		return fn(sb)
	}
	for i := range b.subs {
		if err := b.placesOf(ctx, i, fn); err != nil {
			return err
		}
	}
	return nil
}

// Sequence is place 0's.
func (b *sharedBatch) Sequence(ctx context.Context) (uint64, error) {
	sb, err := b.shared(ctx, 0)
	if err != nil {
		return 0, err
	}
	return sb.Sequence(ctx)
}

// Begin begins on each place its locks and keys live in, in place order.
func (b *sharedBatch) Begin(ctx context.Context, locks []storage.LockRequest, keys [][]byte, sequence bool) ([][]byte, error) {
	n := len(b.subs)
	r := b.s.route()
	perLocks := make([][]storage.LockRequest, n)
	for _, l := range locks {
		switch i := r.Key(l.Key, nil); i {
		case Everywhere:
			for i := range n {
				perLocks[i] = append(perLocks[i], l)
			}
		case Anywhere:
			perLocks[0] = append(perLocks[0], l)
		default:
			perLocks[i] = append(perLocks[i], l)
		}
	}
	perKeys, where := b.s.split(r, keys)
	got := make([][][]byte, n)
	for i := range n {
		seq := sequence && i == 0
		if len(perLocks[i]) == 0 && len(perKeys[i]) == 0 && !seq {
			continue
		}
		sb, err := b.shared(ctx, i)
		if err != nil {
			return nil, err
		}
		if got[i], err = sb.Begin(ctx, perLocks[i], perKeys[i], seq); err != nil {
			return nil, err
		}
	}
	return gather(r, keys, where, got), nil
}

func (b *sharedBatch) Commit(ctx context.Context) error {
	_, err := b.commit(ctx, true)
	return err
}

// CommitWatermark commits each place's part and returns the lowest
// watermark of the places written.
func (b *sharedBatch) CommitWatermark(ctx context.Context) (uint64, error) {
	return b.commit(ctx, true)
}

func (b *sharedBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// Snapshot is a snapshot of every place.
type Snapshot struct {
	s          *Store
	r          Router
	snaps      []storage.Snapshot
	watermarks []uint64
}

// PlaceWatermark is place i's watermark as the snapshot opened (0 for one
// NewSnapshot took).
func (s *Snapshot) PlaceWatermark(i int) uint64 { return s.watermarks[i] }

func (s *Snapshot) reader(i int) storage.Reader { return s.snaps[i] }

func (s *Snapshot) Get(ctx context.Context, key []byte) ([]byte, error) {
	return getRouted(ctx, s.r, key, s.reader, len(s.snaps))
}

func (s *Snapshot) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	return iterateRouted(ctx, s.r, lower, upper, reverse, s.reader, len(s.snaps))
}

// GetMany reads keys where they live, a GetMany per place.
func (s *Snapshot) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	perPlace, where := s.s.split(s.r, keys)
	got := make([][][]byte, len(s.snaps))
	for i, ks := range perPlace {
		if len(ks) == 0 {
			continue
		}
		var err error
		if got[i], err = storage.GetMany(ctx, s.snaps[i], ks); err != nil {
			return nil, err
		}
	}
	return gather(s.r, keys, where, got), nil
}

func (s *Snapshot) Close() error {
	var errs []error
	for _, sn := range s.snaps {
		if sn != nil {
			errs = append(errs, sn.Close())
		}
	}
	return errors.Join(errs...)
}

// failed is a Reader that fails with err.
type failed struct{ err error }

func (f failed) Get(context.Context, []byte) ([]byte, error) { return nil, f.err }
func (f failed) NewIterator(context.Context, []byte, []byte, bool) (storage.Iterator, error) {
	return nil, f.err
}

// merged walks several iterators over disjoint places in key order; a key
// in more than one (a copy Everywhere) comes once, from the lowest place,
// and a key in a place it does not belong to (belongs) not at all.
type merged struct {
	r       Router
	its     []storage.Iterator
	valid   []bool
	reverse bool
	started bool
	cur     int
	key     []byte
	err     error
}

func (m *merged) Next() bool {
	if m.err != nil {
		return false
	}
	if !m.started {
		m.started = true
		m.valid = make([]bool, len(m.its))
		for i := range m.its {
			m.advance(i)
		}
	} else if m.cur >= 0 {
		m.key = append(m.key[:0], m.its[m.cur].Key()...)
		for i, it := range m.its {
			if m.valid[i] && bytes.Equal(it.Key(), m.key) {
				m.advance(i)
			}
		}
	}
	m.cur = -1
	for i, it := range m.its {
		if err := it.Err(); err != nil {
			m.err = err
			return false
		}
		if !m.valid[i] {
			continue
		}
		if m.cur < 0 {
			m.cur = i
			continue
		}
		c := bytes.Compare(it.Key(), m.its[m.cur].Key())
		if (c < 0 && !m.reverse) || (c > 0 && m.reverse) {
			m.cur = i
		}
	}
	return m.cur >= 0
}

// advance moves iterator i to its next key that belongs to place i.
func (m *merged) advance(i int) {
	it := m.its[i]
	for m.valid[i] = it.Next(); m.valid[i] && !belongs(m.r, i, it.Key(), it.Value()); m.valid[i] = it.Next() {
	}
}

func (m *merged) Key() []byte   { return m.its[m.cur].Key() }
func (m *merged) Value() []byte { return m.its[m.cur].Value() }
func (m *merged) Err() error {
	if m.err != nil {
		return m.err
	}
	for _, it := range m.its {
		if err := it.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (m *merged) Close() error {
	var errs []error
	for _, it := range m.its {
		errs = append(errs, it.Close())
	}
	return errors.Join(errs...)
}
