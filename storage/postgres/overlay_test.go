package postgres

import (
	"bytes"
	"fmt"
	"testing"
)

// The writes an iterator was given (writesIn) point into the overlay's
// slabs: once its batch is dropped they stay as they were, whatever the
// next batches write, since a slab lent to an iterator is never given back
// to slabPools for reuse (one that was not is, and the next batch's copies
// would overwrite it).
func TestWritesGivenToAnIteratorStayAsTheyWereAfterTheBatch(t *testing.T) {
	for round := range 20 {
		lent := overlay{pending: newTree()}
		want := map[string]string{}
		for i := range 8 {
			k, v := fmt.Sprintf("key-%d-%d", round, i), fmt.Sprintf("value %d of round %d", i, round)
			lent.set([]byte(k), []byte(v), i%2 == 0)
			want[k] = v
		}
		writes := lent.writesIn(nil, nil)
		lent.drop()
		// The next batches, of the same sizes, take slabs from the pools.
		for range 4 {
			next := overlay{pending: newTree()}
			for i := range 8 {
				next.set(bytes.Repeat([]byte{'k'}, len(fmt.Sprintf("key-%d-%d", round, i))),
					bytes.Repeat([]byte{'x'}, 40), false)
			}
			next.drop()
		}
		if len(writes) != len(want) {
			t.Fatalf("round %d: %d writes given, want %d", round, len(writes), len(want))
		}
		for _, w := range writes {
			if v, ok := want[string(w.Key)]; !ok || string(w.Value) != v {
				t.Fatalf("round %d: a write given to an iterator reads %q = %q after its batch, want one of %v", round, w.Key, w.Value, want)
			}
		}
	}
}
