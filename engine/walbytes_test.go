package engine

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/storage/pebble"
)

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
	s := &keyCountingStore{Store: ps}
	e := openTestEngine(t, s)
	const n = 200
	for _, pass := range []string{"create", "replace"} {
		s.start()
		before := walBytes(t, ps)
		for i := range n {
			upsert(t, e, "c", benchDoc(fmt.Sprint("item", i), len(pass)*1000+i))
		}
		log := (walBytes(t, ps) - before) / n
		got, ops := s.stop()
		s.mu.Lock()
		kv := float64(s.bytes+s.delBytes) / n
		s.mu.Unlock()
		perOp := float64(ops) / n
		t.Logf("%s: %.1f operations, %.0f bytes of keys and values, %.0f bytes logged per write (%s)", pass, perOp, kv, log, got)
		// Per operation: a kind byte and two length varints (at most 3
		// and 2 bytes here); per batch, its 12-byte header and a log
		// record's header (at most 19 bytes, and one more per 32 KiB block).
		if limit := kv + 6*perOp + 12 + 19*2; log > limit {
			t.Errorf("%s: %.0f bytes logged per write, want at most %.0f", pass, log, limit)
		}
	}
}
