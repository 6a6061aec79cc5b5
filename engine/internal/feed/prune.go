package feed

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
)

// pruneChunk is how many records one batch of Prune deletes.
const pruneChunk = 1000

// Prune deletes the all-versions-and-deletes records of the container with
// RID collRID made before cutoff (Unix seconds), a chunk at a time, and
// moves the container's horizon past them in the same batch, so that a
// reader whose continuation falls behind it is told so instead of silently
// missing records. Records are never rewritten, so this needs no partition
// lock. It stops between chunks once stopping says so, and returns how many
// records it deleted.
func Prune(ctx context.Context, s storage.Store, collRID []byte, cutoff int64, stopping func() bool) (int, error) {
	prefix := keys.VersionPrefix(collRID)
	lower := keys.VersionKey(collRID, 1, 0)
	upper := storage.PrefixEnd(prefix)
	pruned := 0
	for !stopping() {
		it, err := s.NewIterator(ctx, lower, upper, false)
		if err != nil {
			return pruned, err
		}
		b := s.NewBatch()
		var horizon uint64
		reachedCutoff := true
		for it.Next() {
			if b.Count() == pruneChunk {
				reachedCutoff = false
				break
			}
			lsn := binary.BigEndian.Uint64(it.Key()[len(prefix):])
			rec, err := DecodeRecord(lsn, it.Value())
			if err != nil {
				it.Close()
				b.Close()
				return pruned, err
			}
			if rec.Crts >= cutoff {
				break
			}
			if err := b.Delete(append([]byte(nil), it.Key()...)); err != nil {
				it.Close()
				b.Close()
				return pruned, err
			}
			horizon = lsn
		}
		if err := it.Close(); err != nil {
			b.Close()
			return pruned, err
		}
		n := b.Count()
		if n > 0 {
			err = b.Set(keys.VersionHorizon(collRID), binary.BigEndian.AppendUint64(nil, horizon))
			if err == nil {
				err = b.Commit(ctx)
			}
		}
		b.Close()
		if err != nil {
			return pruned, err
		}
		pruned += n
		if n == 0 || reachedCutoff {
			return pruned, nil
		}
	}
	return pruned, nil
}

// DecodeHorizon reads a stored change log horizon (keys.VersionHorizon),
// the highest sequence number whose records may have been pruned; nil
// reads as none (0).
func DecodeHorizon(v []byte) (uint64, error) {
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, errors.New("engine: corrupt change log horizon")
	}
	return binary.BigEndian.Uint64(v), nil
}
