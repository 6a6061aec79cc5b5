package postgres

import (
	"strings"
	"testing"
)

// A batch's keys written as new (Insert) are sent in a plain INSERT, not
// in the upsert's INSERT … ON CONFLICT (a speculative insertion and its
// confirmation per key), and each kind of write in the array of its own
// statement part: tripWrites picks the statement of the kinds present
// and counts each kind's keys as the overlay holds them.
func TestKeysWrittenAsNewAreSentByAPlainInsert(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		write                     func(o *overlay)
		upserts, inserts, deletes int
	}{
		{"all new", func(o *overlay) {
			o.set([]byte("a"), []byte("1"), true)
			o.set([]byte("b"), nil, true)
		}, 0, 2, 0},
		{"new, set and deleted", func(o *overlay) {
			o.set([]byte("a"), []byte("1"), true)
			o.set([]byte("b"), []byte("2"), false)
			o.del([]byte("c"))
		}, 1, 1, 1},
		{"set after insert keeps it new", func(o *overlay) {
			o.set([]byte("a"), []byte("1"), true)
			o.set([]byte("a"), []byte("2"), false)
		}, 0, 1, 0},
		{"insert after the batch's own set or delete is a set", func(o *overlay) {
			o.set([]byte("a"), []byte("1"), false)
			o.set([]byte("a"), []byte("2"), true)
			o.del([]byte("b"))
			o.set([]byte("b"), []byte("3"), true)
		}, 2, 0, 0},
		{"delete after insert drops it", func(o *overlay) {
			o.set([]byte("a"), []byte("1"), true)
			o.del([]byte("a"))
		}, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := overlay{pending: newTree()}
			defer o.drop()
			tc.write(&o)
			var got [kinds]int
			o.pending.Ascend(func(e entry) bool { got[kindOf(e)]++; return true })
			if got != [kinds]int{tc.upserts, tc.inserts, tc.deletes} || o.inserts != tc.inserts || o.deletes != tc.deletes {
				t.Fatalf("upserts, inserts, deletes = %v (counted %d inserts, %d deletes), want %d, %d, %d",
					got, o.inserts, o.deletes, tc.upserts, tc.inserts, tc.deletes)
			}
			mask := 0
			for kind, n := range got {
				if n > 0 {
					mask |= 1 << kind
				}
			}
			sql := writeStatements[mask].sql
			if n := strings.Count(sql, "ON CONFLICT"); n != min(tc.upserts, 1) {
				t.Errorf("the statement has %d ON CONFLICT clauses, want %d: %s", n, min(tc.upserts, 1), sql)
			}
			if n := strings.Count(sql, "INSERT"); n != min(tc.upserts, 1)+min(tc.inserts, 1) {
				t.Errorf("the statement has %d INSERTs for %d upserts and %d inserts: %s", n, tc.upserts, tc.inserts, sql)
			}
		})
	}
}
