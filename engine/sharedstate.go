package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// sharedState is the engine's state for a shared store.
type sharedState struct {
	store storage.Shared
	// version is the catalog version the cache was loaded at.
	version atomic.Pointer[[]byte]
	// lock is the batch holding the store's catalog lock while catMu is
	// held for writing (guarded by catMu).
	lock storage.SharedBatch
	// finished is the highest LSN this engine has finished, which a
	// change-feed read waits for the watermark to cover.
	finished atomic.Uint64
	// open holds the batches of numbers allocated outside partitions, by
	// number, until finish.
	open sync.Map
	// newest is the highest LSN this engine has handed out and inflight
	// how many of its LSNs are handed out and not finished, for Stats: the
	// other gateways' are not known here.
	newest   atomic.Uint64
	inflight atomic.Int64
	// placer and placements: the store's places and where the ranges
	// live, when it has several (engine/placement.go); finishedAt is
	// finished per place (an LSN's place is the LSN mod the places).
	placer     placer
	placements *placements
	finishedAt []atomic.Uint64
	// onSettleWait, when set (by tests), is called each time a
	// change-feed read waits for the watermark to cover what it must show.
	onSettleWait func()
}

// handedOut notes LSN n given to a write of this engine, which finishes
// with done.
func (s *sharedState) handedOut(n uint64) {
	s.inflight.Add(1)
	for {
		old := s.newest.Load()
		if n <= old || s.newest.CompareAndSwap(old, n) {
			return
		}
	}
}

func (s *sharedState) done() { s.inflight.Add(-1) }

func newSharedState(store storage.Store) *sharedState {
	s, ok := store.(storage.Shared)
	if !ok {
		return nil
	}
	seam := &sharedState{store: s}
	if p, ok := store.(placer); ok && p.Places() > 1 {
		seam.placer, seam.placements = p, &placements{n: p.Places()}
		seam.finishedAt = make([]atomic.Uint64, p.Places())
		p.SetRouter(seam.placements)
	}
	empty := []byte{}
	seam.version.Store(&empty)
	return seam
}

// catalogVersion reads the store's catalog version through r.
func catalogVersion(ctx context.Context, r storage.Reader) ([]byte, error) {
	v, err := r.Get(ctx, keys.MetaCatalogVersion)
	if errors.Is(err, storage.ErrNotFound) {
		return []byte{}, nil
	}
	return v, err
}

// sessionLSN is the session token's LSN for a store watermark w: the
// highest LSN at or below which every write has finished (0: unknown).
func sessionLSN(w uint64) uint64 {
	if w == 0 {
		return 0
	}
	return w - 1
}

// versionBatch is a catalog batch: once committed, the cache (updated by
// the caller under catMu) is at its version.
type versionBatch struct {
	storage.Batch
	seam    *sharedState
	version []byte
}

func (b *versionBatch) Commit(ctx context.Context) error {
	if err := b.Batch.Commit(ctx); err != nil {
		return err
	}
	b.seam.version.Store(&b.version)
	return nil
}

func (b *versionBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// sharedWatermark is the highest LSN at or below which every write has
// finished, on every gateway.
func (s *sharedState) watermark(ctx context.Context) (uint64, error) {
	w, err := s.store.Watermark(ctx)
	if err != nil {
		return 0, err
	}
	if w == 0 {
		return 0, nil
	}
	return w - 1, nil
}

// settleShared waits, at most timeout, until the watermark covers every
// write this engine has finished, and returns it.
func (s *sharedState) settle(ctx context.Context, timeout time.Duration) (uint64, error) {
	target := s.finished.Load()
	deadline := time.Now().Add(timeout)
	for {
		w, err := s.watermark(ctx)
		if err != nil {
			return 0, err
		}
		if w >= target || time.Now().After(deadline) || ctx.Err() != nil {
			return w, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// sequenceSource is implemented by shared stores that hand out a sequence
// number without a batch (storage/postgres: a transaction id taken by a
// statement of its own, on no held connection).
type sequenceSource interface {
	NextSequence(ctx context.Context) (uint64, error)
}

// allocate hands out a number outside a partition transaction: catalog
// changes, which number their ETags and RIDs with it and write no
// change-feed entries, so the watermark may pass it before they commit.
// The number comes from the store without holding a connection: a
// catalog change holds the catalog lock while writers wait for it holding
// theirs, and must not wait for one of them.
func (s *sharedState) allocate(ctx context.Context) (uint64, error) {
	if src, ok := s.store.(sequenceSource); ok {
		n, err := src.NextSequence(ctx)
		if err == nil {
			s.handedOut(n)
		}
		return n, err
	}
	b, err := s.store.NewSharedBatch(ctx)
	if err != nil {
		return 0, err
	}
	n, err := b.Sequence(ctx)
	if err != nil {
		b.Close()
		return 0, err
	}
	s.open.Store(n, b)
	s.handedOut(n)
	return n, nil
}

func (s *sharedState) finish(n uint64) {
	if b, ok := s.open.LoadAndDelete(n); ok {
		b.(storage.SharedBatch).Close()
	}
	s.done()
	s.noteFinished(n)
}

func (s *sharedState) noteFinished(n uint64) {
	if s.finishedAt != nil {
		at := &s.finishedAt[n%uint64(len(s.finishedAt))]
		for {
			f := at.Load()
			if n <= f || at.CompareAndSwap(f, n) {
				break
			}
		}
	}
	for {
		f := s.finished.Load()
		if n <= f || s.finished.CompareAndSwap(f, n) {
			return
		}
	}
}

// pending is sequencer.pending on a shared store: this engine's LSNs only.
func (s *sharedState) pending() (newest uint64, inflight int) {
	return s.newest.Load(), int(s.inflight.Load())
}

// covers reports whether a snapshot with watermark w covers every write
// this engine has finished, and every write any gateway had finished when
// the read began (ended, of the store's first snapshot: storage.Ended): on
// several places, each place's own watermark covers what this engine
// finished there (their numbers are not one sequence, and the lowest of
// them would wait on an idle place).
func (s *sharedState) covers(snap storage.Snapshot, w, ended uint64) bool {
	pw, ok := snap.(placeWatermark)
	if s.finishedAt == nil || !ok {
		return sessionLSN(w) >= max(s.finished.Load(), ended)
	}
	for i := range s.finishedAt {
		if f := s.finishedAt[i].Load(); f != 0 && sessionLSN(pw.PlaceWatermark(i)) < f {
			return false
		}
	}
	return true
}
