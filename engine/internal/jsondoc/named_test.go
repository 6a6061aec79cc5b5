package jsondoc

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestParseNamedListsWhatParseIntoLists: ParseNamed, which takes names
// from another version's properties and the system properties' where the
// bytes are the same, lists the same names and values as ParseInto, whatever
// the other version holds: the same names, others, fewer, more, in
// another order, names that are the same bytes escaped, past sixteen.
func TestParseNamedListsWhatParseIntoLists(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 3))
	pool := []string{`id`, `pk`, `n`, `_rid`, `_self`, `_etag`, `_attachments`, `_ts`, `_lsn`, `_x`, `a b`,
		`\u0069d`, `\u005frid`, `\\`, `\"q`, `é`, `x~y/z`, ``, `n2`, `payload`, `_rids`, `_t`}
	object := func() string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range r.IntN(24) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s%s":%d`, pool[r.IntN(len(pool))], strings.Repeat("k", r.IntN(2)), i)
		}
		return b.String() + "}"
	}
	for range 20000 {
		body, other := []byte(object()), []byte(object())
		names, err := ParseInto(nil, other, 4)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := ParseInto(nil, body, 4)
		got, gerr := ParseNamed(nil, body, 4, names)
		if (werr == nil) != (gerr == nil) || len(got) != len(want) {
			t.Fatalf("%s with the names of %s: %v %d properties, ParseInto %v %d", body, other, gerr, len(got), werr, len(want))
		}
		for i := range want {
			if got[i].Name != want[i].Name || string(got[i].Value) != string(want[i].Value) {
				t.Fatalf("%s with the names of %s: property %d is %q: %s, ParseInto's %q: %s", body, other, i, got[i].Name, got[i].Value, want[i].Name, want[i].Value)
			}
		}
	}
}

// TestParseNamedMakesNoStringForAKnownName: a stored record parsed with
// its new version's names (a replace's two versions) makes no string of
// names when every name is the new version's or a system property's;
// ParseInto makes one.
func TestParseNamedMakesNoStringForAKnownName(t *testing.T) {
	cur, err := ParseInto(nil, []byte(`{"id":"r1","pk":"p1","n":2,"tags":["a"],"nested":{"x":2},"payload":"xx"}`), 8)
	if err != nil {
		t.Fatal(err)
	}
	prev := []byte(`{"id":"r1","pk":"p1","n":1,"tags":["a"],"nested":{"x":1},"payload":"xx","_rid":"AA==","_self":"dbs/AA==/","_etag":"\"0\"","_attachments":"attachments/","_ts":1767322000}`)
	var room [16]Field
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ParseNamed(room[:0], prev, len(room), cur); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseNamed: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ParseInto(room[:0], prev, len(room)); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("ParseInto: %v allocations, want 1", n)
	}
}
