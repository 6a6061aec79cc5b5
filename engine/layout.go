package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// upgradeLayout runs first at Open: it rewrites a store whose keys are in
// a layout older than format 2 into format 2, records that, and returns
// the format the store is in; the steps that need the catalog (format 3,
// upgradeExpiry) come once it is loaded and record keys.Format. Format 1
// kept unique-key entries under the users' byte, where a scan of a
// database's users met its containers' entries; they move to their own
// prefix. A user's record is a JSON object, a unique-key entry's value an
// item key, so the two tell apart by their values. The rewrite is
// idempotent: engines opening one shared store at once may both run it.
func upgradeLayout(ctx context.Context, s storage.Store) (uint64, error) {
	v, err := s.Get(ctx, keys.MetaFormat)
	var stored uint64 = 1
	switch {
	case err == nil && len(v) == 8:
		stored = binary.BigEndian.Uint64(v)
	case err == nil:
		return 0, fmt.Errorf("engine: the store's key layout record is %d bytes long, want 8", len(v))
	case !errors.Is(err, storage.ErrNotFound):
		return 0, err
	}
	if stored > keys.Format {
		return 0, fmt.Errorf("engine: the store's keys are in layout %d, newer than this engine's %d", stored, keys.Format)
	}
	if stored >= 2 {
		return stored, nil
	}
	lower, upper := []byte{keys.LegacyUnique}, []byte{keys.LegacyUnique + 1}
	for lower != nil {
		if lower, err = moveLegacyUniqueChunk(ctx, s, lower, upper); err != nil {
			return 0, err
		}
	}
	b := s.NewBatch()
	defer b.Close()
	if err := b.Set(keys.MetaFormat, binary.BigEndian.AppendUint64(nil, 2)); err != nil {
		return 0, err
	}
	return 2, b.Commit(ctx)
}

// legacyChunk is how many keys one batch of the layout upgrade reads.
const legacyChunk = 1000

// moveLegacyUniqueChunk moves the format-1 unique-key entries among the
// first legacyChunk keys from lower on to keys.Unique, and returns the key
// to go on from, nil after the last chunk.
func moveLegacyUniqueChunk(ctx context.Context, s storage.Store, lower, upper []byte) (next []byte, err error) {
	it, err := s.NewIterator(ctx, lower, upper, false)
	if err != nil {
		return nil, err
	}
	var moves [][2][]byte
	n := 0
	for ; it.Next(); n++ {
		if n == legacyChunk {
			next = bytes.Clone(it.Key())
			break
		}
		if v := it.Value(); len(v) > 0 && v[0] == keys.Item {
			moves = append(moves, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(v)})
		}
	}
	err = it.Err()
	it.Close()
	if err != nil || len(moves) == 0 {
		return next, err
	}
	b := s.NewBatch()
	defer b.Close()
	for _, m := range moves {
		moved := append([]byte{keys.Unique}, m[0][1:]...)
		if err := b.Set(moved, m[1]); err != nil {
			return nil, err
		}
		if err := b.Delete(m[0]); err != nil {
			return nil, err
		}
	}
	return next, b.Commit(ctx)
}
