package searchindex

import (
	"bytes"
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
	prefix := keys.ItemContainerPrefix(spec.RID)
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
		b := store.NewBatch()
		defer b.Close()
		sx := &Txn{}
		defer sx.Abort()
		if err := sx.Begin(st, b); err != nil {
			return err
		}
		for _, en := range chunk {
			if err := sx.Add(st, en.key[len(prefix):], DocGetter(en.doc)); err != nil {
				return err
			}
		}
		if err := b.Commit(ctx); err != nil {
			return err
		}
		sx.Commit()
		chunk = chunk[:0]
		return nil
	}
	for it.Next() {
		doc, err := l.s.opts.Decode(it.Key(), it.Value())
		if err != nil {
			return err
		}
		chunk = append(chunk, entry{bytes.Clone(it.Key()), bytes.Clone(doc)})
		if len(chunk) == RebuildChunk {
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

// make makes st's indexes for spec, not loaded, each with the keyspace
// space gives it for its prefix.
func (st *State) make(spec Spec, space func(prefix []byte) keyspace) {
	for _, v := range spec.Vectors {
		st.Vectors = append(st.Vectors, &VectorIndex{Path: v.Path, segs: pathSegments(v.Path),
			space: space(keys.SearchIndexPrefix(spec.RID, keys.SearchVector, v.Path))})
	}
	for _, t := range spec.Texts {
		st.Texts = append(st.Texts, &TextIndex{Path: t.Path, segs: pathSegments(t.Path),
			space: space(keys.SearchIndexPrefix(spec.RID, keys.SearchFullText, t.Path))})
	}
}

// load loads every index of st from its keyspace as r has it.
func (st *State) load(ctx context.Context, r storage.Reader) error {
	for i, v := range st.Vectors {
		ix, err := vector.Open(ctx, v.space.reader(r), st.spec.Vectors[i].Config)
		if err != nil {
			return err
		}
		v.Index = ix
	}
	for i, t := range st.Texts {
		ix, err := fulltext.Open(ctx, t.space.reader(r), st.spec.Texts[i].Language)
		if err != nil {
			return err
		}
		t.Index = ix
	}
	return nil
}
