package engine

import (
	"context"

	"github.com/orrery-db/orrery/storage"
)

// Deleting key ranges of the store: in the caller's batch (deleteRange),
// or in committed chunks in the background (purgePrefix, purgeRange) for
// the data of a dropped container or a rebuilt index.

// deleteRange records the deletion of every key under prefix+suffix into b.
func deleteRange(ctx context.Context, r storage.Reader, b storage.Batch, prefix []byte, suffix []byte) error {
	p := append(append([]byte(nil), prefix...), suffix...)
	it, err := r.NewIterator(ctx, p, storage.PrefixEnd(p), false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		if err := b.Delete(append([]byte(nil), it.Key()...)); err != nil {
			return err
		}
	}
	return it.Err()
}

func purgePrefix(ctx context.Context, s storage.Store, p []byte) error {
	return purgeRange(ctx, s, p, storage.PrefixEnd(p))
}

// purgeRange deletes the keys from lower (inclusive) to upper (exclusive),
// a committed chunk at a time.
func purgeRange(ctx context.Context, s storage.Store, lower, upper []byte) error {
	return deleteChunks(ctx, s, lower, upper, purgeChunk, nil)
}

// purgeChunk is how many keys one batch of a purge deletes.
const purgeChunk = 1000

// deleteChunks deletes the keys from lower (inclusive) to upper
// (exclusive), at most chunk in each committed batch, until a batch finds
// fewer. withChunk, when set, is called with each batch that deletes some
// before it commits, to write with it (a prune's new horizon).
func deleteChunks(ctx context.Context, s storage.Store, lower, upper []byte, chunk int, withChunk func(b storage.Batch) error) error {
	for {
		it, err := s.NewIterator(ctx, lower, upper, false)
		if err != nil {
			return err
		}
		b := s.NewBatch()
		for it.Next() && b.Count() < chunk {
			if err := b.Delete(append([]byte(nil), it.Key()...)); err != nil {
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
		if withChunk != nil {
			if err := withChunk(b); err != nil {
				b.Close()
				return err
			}
		}
		err = b.Commit(ctx)
		b.Close()
		if err != nil || n < chunk {
			return err
		}
	}
}
