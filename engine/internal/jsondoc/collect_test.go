package jsondoc

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseIntoAndParseValidAllocateAsMeasured pins what listing an
// object's properties allocates, in the caller's array and without one:
// one string for the first sixteen plain names together, one per later
// plain name, json.Unmarshal's own for an escaped name, and the object's
// array when the caller's has no room (and its growth). ParseInto and
// ParseValid list through one collector; these are the counts each had
// before it.
func TestParseIntoAndParseValidAllocateAsMeasured(t *testing.T) {
	plain := func(n int) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"name%d":{"v":[%d,"x"]}`, i, i)
		}
		return b.String() + "}"
	}
	for _, tc := range []struct {
		body string
		// ParseInto's and ParseValid's allocations with room for 32
		// properties in the caller's array, and with none (n = 4).
		// ParseValid's own beyond ParseInto's: the duplicate check's map
		// past 16 names, json.Unmarshal of an escaped name twice.
		into, valid [2]float64
	}{
		{`{}`, [2]float64{0, 0}, [2]float64{0, 0}},
		{` { } `, [2]float64{0, 0}, [2]float64{0, 0}},
		{`{"id":"a"}`, [2]float64{1, 2}, [2]float64{1, 2}},
		{plain(4), [2]float64{1, 2}, [2]float64{1, 2}},
		{plain(16), [2]float64{1, 4}, [2]float64{1, 4}},
		{plain(17), [2]float64{2, 5}, [2]float64{24, 27}},
		{plain(20), [2]float64{5, 9}, [2]float64{30, 34}},
		{`{"id":"a","\u0069d2":"b"}`, [2]float64{5, 6}, [2]float64{10, 11}},
	} {
		var room [32]Field
		b := []byte(tc.body)
		for k, dst := range []struct {
			obj Object
			n   int
		}{{room[:0], len(room)}, {nil, 4}} {
			into := testing.AllocsPerRun(100, func() {
				if _, err := ParseInto(dst.obj, b, dst.n); err != nil {
					t.Fatal(err)
				}
			})
			valid := testing.AllocsPerRun(100, func() {
				if _, s := ParseValid(dst.obj, b, dst.n); !s.Valid || !s.Object {
					t.Fatalf("%s: %+v", b, s)
				}
			})
			if into != tc.into[k] || valid != tc.valid[k] {
				t.Errorf("%.60s (room %d, n %d): ParseInto %v allocations, ParseValid %v, want %v and %v",
					b, cap(dst.obj), dst.n, into, valid, tc.into[k], tc.valid[k])
			}
		}
	}
}
