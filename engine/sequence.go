package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// sequenceBlock is how many sequence numbers are reserved with one durable
// write; after a restart numbering resumes past the reserved block, so numbers
// only ever grow.
const sequenceBlock = 1 << 16

// sequencer hands out the logical sequence numbers (LSNs) that order writes,
// and publishes a watermark: the highest LSN below which every allocated number
// has finished (committed or abandoned). Change-feed readers read only up to
// the watermark, so an entry that commits late with a lower number is never
// passed over.
type sequencer struct {
	store    storage.Store
	mu       sync.Mutex
	next     uint64   // next number to hand out
	reserved uint64   // numbers below this are durably reserved
	inflight []uint64 // allocated, not finished, ascending
	done     map[uint64]bool

	published atomic.Uint64
	finished  uint64    // highest LSN finished so far (guarded by mu)
	advanced  sync.Cond // signalled when the watermark moves (L: &mu)
}

func newSequencer(ctx context.Context, store storage.Store) (*sequencer, error) {
	s := &sequencer{store: store, done: map[uint64]bool{}}
	s.advanced.L = &s.mu
	v, err := store.Get(ctx, keys.MetaSequence)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		s.next = 1
	case err != nil:
		return nil, err
	case len(v) != 8:
		return nil, fmt.Errorf("engine: corrupt sequence record (%d bytes)", len(v))
	default:
		s.next = binary.BigEndian.Uint64(v)
	}
	s.reserved = s.next
	s.published.Store(s.next - 1)
	return s, nil
}

// allocate returns the next LSN. The caller must call finish with it.
func (s *sequencer) allocate(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= s.reserved {
		b := s.store.NewBatch()
		if err := b.Set(keys.MetaSequence, binary.BigEndian.AppendUint64(nil, s.reserved+sequenceBlock)); err != nil {
			b.Close()
			return 0, err
		}
		err := b.Commit(ctx)
		b.Close()
		if err != nil {
			return 0, err
		}
		s.reserved += sequenceBlock
	}
	n := s.next
	s.next++
	s.inflight = append(s.inflight, n)
	return n, nil
}

// finish marks an LSN as committed or abandoned and advances the watermark.
func (s *sequencer) finish(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.advanced.Broadcast()
	s.finished = max(s.finished, n)
	s.done[n] = true
	i := 0
	for i < len(s.inflight) && s.done[s.inflight[i]] {
		delete(s.done, s.inflight[i])
		i++
	}
	if i > 0 {
		// The rest moved to the front: the array is kept, and appends
		// reuse it instead of growing a slice whose start moves on.
		s.inflight = s.inflight[:copy(s.inflight, s.inflight[i:])]
	}
	if len(s.inflight) > 0 {
		s.published.Store(s.inflight[0] - 1)
	} else {
		s.published.Store(s.next - 1)
	}
}

// pending returns the highest LSN handed out and how many handed out are
// not finished yet, for Stats.
func (s *sequencer) pending() (newest uint64, inflight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// inflight keeps the finished numbers behind an open one until it
	// finishes too; done holds exactly those.
	return s.next - 1, len(s.inflight) - len(s.done)
}

// watermark is the highest LSN at or below which everything has finished.
func (s *sequencer) watermark(ctx context.Context) (uint64, error) {
	return s.published.Load(), nil
}

// settle waits, at most timeout, until the watermark covers every LSN that
// had finished when it was called, and returns the watermark. A write that was
// acknowledged before a change-feed read is then visible to it even while an
// older, longer transaction (a large batch, a stored procedure) is still open;
// only such a transaction outlasting timeout leaves it behind the watermark.
func (s *sequencer) settle(ctx context.Context, timeout time.Duration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.finished
	if s.published.Load() >= target {
		return s.published.Load(), nil
	}
	expired := false
	t := time.AfterFunc(timeout, func() {
		s.mu.Lock()
		expired = true
		s.mu.Unlock()
		s.advanced.Broadcast()
	})
	defer t.Stop()
	for s.published.Load() < target && !expired {
		s.advanced.Wait()
	}
	return s.published.Load(), nil
}

// lsnSource hands out LSNs and publishes the watermark: the sequencer of
// a local store, the shared store's transaction ids on a shared one.
type lsnSource interface {
	allocate(ctx context.Context) (uint64, error)
	finish(n uint64)
	// handedOut notes n, which a transaction took from its shared batch
	// (SharedBatch.Sequence) rather than from allocate, as this engine's.
	handedOut(n uint64)
	pending() (newest uint64, inflight int)
	// watermark and settle fail when the store cannot tell its watermark
	// (a shared store unreachable): never 0 for an error.
	watermark(ctx context.Context) (uint64, error)
	settle(ctx context.Context, timeout time.Duration) (uint64, error)
}

// handedOut is never called on a local store: its transactions take their
// numbers from allocate.
func (s *sequencer) handedOut(uint64) {}
