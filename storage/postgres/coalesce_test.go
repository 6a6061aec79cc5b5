package postgres

import "testing"

// TestTwoPointReadsAtOnceNeitherWaitsForTheOther holds the least bound of
// point-read round trips in flight: on any machine, two reads at once each
// send their own, so two callers' reads never wait for each other's round
// trip to land (a bound of one doubled two clients' median latency);
// reads beyond the bound still wait in a group.
func TestTwoPointReadsAtOnceNeitherWaitsForTheOther(t *testing.T) {
	r := newReadGroups()
	keys := [][]byte{[]byte("item/1")}
	for i := range 2 {
		if g, _ := r.join(keys); g != nil {
			t.Fatalf("read %d of two at once joined a group: it would wait for the other's round trip", i+1)
		}
	}
	for range r.max - 2 {
		if g, _ := r.join(keys); g != nil {
			t.Fatalf("a read within the bound of %d round trips in flight joined a group", r.max)
		}
	}
	if g, _ := r.join(keys); g == nil {
		t.Fatalf("a read beyond the bound of %d round trips in flight sent its own", r.max)
	}
}
