package feed

import (
	"context"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// TestPruneDeletesOnlyRecordsBeforeTheCutoffAndMovesTheHorizon: over
// several chunks, every record made before the cutoff goes, every one made
// at or after it stays, and the horizon names the last one deleted, so a
// reader behind it learns that records are gone.
func TestPruneDeletesOnlyRecordsBeforeTheCutoffAndMovesTheHorizon(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()
	const n, cutoff = 2500, 2200
	b := s.NewBatch()
	for i := range n {
		lsn := uint64(i + 1)
		r := &Record{Op: Replace, Crts: int64(i), ItemKey: itemKey(1, `["p"]`, "x"), Doc: []byte(`{}`)}
		if err := b.Set(keys.VersionKey(coll, lsn, 0), r.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()

	if got, err := Prune(ctx, s, coll, cutoff, func() bool { return true }); err != nil || got != 0 {
		t.Fatalf("a stopping engine pruned %d, %v", got, err)
	}
	got, err := Prune(ctx, s, coll, cutoff, func() bool { return false })
	if err != nil || got != cutoff {
		t.Fatalf("pruned %d, %v; want %d", got, err, cutoff)
	}
	h, err := s.Get(ctx, keys.VersionHorizon(coll))
	if err != nil {
		t.Fatal(err)
	}
	if horizon, err := DecodeHorizon(h); err != nil || horizon != cutoff {
		t.Fatalf("horizon %d, %v; want %d", horizon, err, cutoff)
	}
	it, err := s.NewIterator(ctx, keys.VersionKey(coll, 1, 0), storage.PrefixEnd(keys.VersionPrefix(coll)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	kept := 0
	for it.Next() {
		rec, err := DecodeRecord(0, it.Value())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Crts < cutoff {
			t.Fatalf("a record made at %d outlived the cutoff %d", rec.Crts, cutoff)
		}
		kept++
	}
	if kept != n-cutoff {
		t.Fatalf("kept %d records, want %d", kept, n-cutoff)
	}
	if again, err := Prune(ctx, s, coll, cutoff, func() bool { return false }); err != nil || again != 0 {
		t.Fatalf("a second prune deleted %d, %v", again, err)
	}
}
