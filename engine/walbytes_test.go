package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/pebble"
)

// opBytesStore counts the operations of the batches committed through it
// and the bytes of their keys and values.
type opBytesStore struct {
	storage.Store
	mu         sync.Mutex
	ops, bytes int
}

func (s *opBytesStore) NewBatch() storage.Batch {
	return &opBytesBatch{Batch: s.Store.NewBatch(), s: s}
}

// take returns the counts since the last take.
func (s *opBytesStore) take() (ops, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops, bytes, s.ops, s.bytes = s.ops, s.bytes, 0, 0
	return ops, bytes
}

type opBytesBatch struct {
	storage.Batch
	s          *opBytesStore
	ops, bytes int
}

func (b *opBytesBatch) Set(k, v []byte) error {
	b.ops, b.bytes = b.ops+1, b.bytes+len(k)+len(v)
	return b.Batch.Set(k, v)
}

func (b *opBytesBatch) Delete(k []byte) error {
	b.ops, b.bytes = b.ops+1, b.bytes+len(k)
	return b.Batch.Delete(k)
}

func (b *opBytesBatch) note() {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.ops += b.ops
	b.s.bytes += b.bytes
}

func (b *opBytesBatch) Commit(ctx context.Context) error { b.note(); return b.Batch.Commit(ctx) }

func (b *opBytesBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	b.note()
	return b.Batch.CommitPipelined(ctx)
}

// walBytes is the store's orrery_storage_wal_bytes_total.
func walBytes(t *testing.T, s *pebble.Store) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "orrery_storage_wal_bytes_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no orrery_storage_wal_bytes_total")
	return 0
}

// TestAnItemWriteReachesTheLogOnce: the bytes an item create or replace
// adds to Pebble's write-ahead log are its batch's keys and values once,
// plus a few bytes of framing per operation and per batch, nothing
// written twice (an indexed batch, say). It logs the figures per write:
// operations, bytes of the keys and values set and of the keys
// deleted, and log bytes.
func TestAnItemWriteReachesTheLogOnce(t *testing.T) {
	ps, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &opBytesStore{Store: ps}
	e := openTestEngine(t, s)
	const n = 200
	for _, pass := range []string{"create", "replace"} {
		s.take()
		before := walBytes(t, ps)
		for i := range n {
			upsert(t, e, "c", benchDoc(fmt.Sprint("item", i), len(pass)*1000+i))
		}
		log := (walBytes(t, ps) - before) / n
		ops, bytes := s.take()
		kv, perOp := float64(bytes)/n, float64(ops)/n
		t.Logf("%s: %.1f operations, %.0f bytes of keys and values, %.0f bytes logged per write", pass, perOp, kv, log)
		// Per operation: a kind byte and two length varints (at most 3
		// and 2 bytes here); per batch, its 12-byte header and a log
		// record's header (at most 19 bytes, and one more per 32 KiB block).
		if limit := kv + 6*perOp + 12 + 19*2; log > limit {
			t.Errorf("%s: %.0f bytes logged per write, want at most %.0f", pass, log, limit)
		}
	}
}
