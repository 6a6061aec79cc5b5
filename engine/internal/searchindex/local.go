package searchindex

import (
	"context"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/fulltext"
	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// local keeps the indexes in the store, under their prefixes, changed in
// the items' own transactions.
type local struct{ s *Set }

func (l *local) kept() bool { return true }

// open opens st's indexes from their state, or rebuilds them from the
// items when the state is not the current policy's.
func (l *local) open(ctx context.Context, spec Spec, st *State) error {
	st.make(spec, func(prefix []byte) keyspace { return stored{prefix} })
	store := l.s.opts.Store
	built, err := store.Get(ctx, keys.SearchMetaKey(spec.RID))
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err == nil && string(built) == spec.Fingerprint {
		if err := st.load(ctx, store); err == nil {
			return nil
		} else if !errors.Is(err, vector.ErrCorrupt) && !errors.Is(err, fulltext.ErrCorrupt) {
			return err
		}
		l.s.opts.Log.Warn("a container's search index state is unreadable: rebuilding it from the items", "container", spec.Name)
	}
	return l.rebuild(ctx, spec, st)
}

// rebuild deletes the container's search index state and indexes every
// stored item again, a committed batch at a time, then writes the meta
// record that says the state is whole. The container's writers wait for it
// (Of); a crash before the meta record makes the next opening start over.
func (l *local) rebuild(ctx context.Context, spec Spec, st *State) error {
	store := l.s.opts.Store
	if err := l.s.opts.Purge(ctx, keys.SearchPrefix(spec.RID)); err != nil {
		return err
	}
	if err := st.load(ctx, emptyReader{}); err != nil {
		return err
	}
	snap, err := store.NewSnapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	err = scanItems(ctx, l.s.opts.Decode, st.spec.RID, snap, func(chunk []item) error {
		b := store.NewBatch()
		defer b.Close()
		return indexChunk(st, b, chunk, func() error { return b.Commit(ctx) })
	})
	if err != nil {
		return err
	}
	b := store.NewBatch()
	defer b.Close()
	if err := b.Set(keys.SearchMetaKey(spec.RID), []byte(spec.Fingerprint)); err != nil {
		return err
	}
	return b.Commit(ctx)
}

// retire waits for the transactions holding st's indexes to finish: it
// prepares them itself, which waits its turn.
func (l *local) retire(st *State) (release func()) {
	sx := &Txn{}
	if err := sx.Begin(st, &vector.Batch{}); err != nil {
		sx.Abort()
		st.retired.Store(true)
		return func() {}
	}
	st.retired.Store(true)
	return sx.Abort
}

// reindex prepares the indexes at the transaction's first item write and
// adds the item's change.
func (l *local) reindex(w *Write, b storage.Batch, _ uint64, c Container, suffix []byte, get Getter) error {
	if w.sx == nil {
		for {
			st, err := l.s.Of(c)
			if st == nil || err != nil {
				return err
			}
			// What preparing writes is held until the indexes are known
			// to be current: the records of retired ones must not reach
			// the batch.
			hw := &heldWriter{}
			w.sx, w.st = &Txn{}, st
			if err := w.sx.Begin(st, hw); err != nil {
				return err
			}
			if !st.retired.Load() {
				if err := hw.release(b); err != nil {
					return err
				}
				break
			}
			// A policy change replaced the indexes while this waited
			// for them: index by the new ones.
			w.sx.Abort()
		}
	}
	return w.sx.Add(w.st, suffix, get)
}

func (l *local) view(_ context.Context, c Container, _ storage.Reader) (*State, *View, error) {
	st, err := l.s.Of(c)
	if st == nil || err != nil {
		return nil, nil, err
	}
	return st, &View{}, nil
}

// whole reads the meta record in r: the state there is whole when it names
// st's policy.
func (l *local) whole(ctx context.Context, st *State, r storage.Reader) (bool, error) {
	built, err := r.Get(ctx, keys.SearchMetaKey(st.spec.RID))
	if errors.Is(err, storage.ErrNotFound) || err == nil && string(built) != st.spec.Fingerprint {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

func (l *local) withQuery(ctx context.Context, _ uint64) context.Context { return ctx }
