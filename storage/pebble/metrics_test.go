package pebble

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStoreReportsItsFigures: the store is a Prometheus collector whose
// disk figure grows with what is written and whose counters are present.
func TestStoreReportsItsFigures(t *testing.T) {
	ctx := t.Context()
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	for i := 0; i < 1000; i++ {
		if err := b.Set([]byte{byte(i >> 8), byte(i)}, []byte(strings.Repeat("v", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(s); n != 11 {
		t.Fatalf("%d metrics, want 11", n)
	}
	if err := testutil.CollectAndCompare(s, strings.NewReader(`
# HELP orrery_storage_write_stalls_total Times writes stalled waiting for flushes or compactions.
# TYPE orrery_storage_write_stalls_total counter
orrery_storage_write_stalls_total 0
`), "orrery_storage_write_stalls_total"); err != nil {
		t.Fatal(err)
	}
	if v := storeMetric(t, s, "orrery_storage_disk_bytes"); v < 1000 {
		t.Fatalf("disk bytes %v after writing 1 MB", v)
	}
}

// storeMetric is the value of the store's metric name now.
func storeMetric(t *testing.T, s *Store, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s missing", name)
	return 0
}
