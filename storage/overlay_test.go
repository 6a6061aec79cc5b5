package storage

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sliceIterator is a base iterator over sorted keys within bounds, which
// reuses one buffer for Key and Value (as Pebble's iterators do) so that a
// caller keeping them past Next is caught, and fails after failAfter keys
// when failAfter > 0.
type sliceIterator struct {
	keys, values []string // the range, in iteration order
	i            int
	buf          []byte
	key, value   []byte
	failAfter    int
	err          error
	closed       bool
}

func newSliceIterator(kv map[string]string, lower, upper string, reverse bool) *sliceIterator {
	it := &sliceIterator{}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		if (lower != "" && k < lower) || (upper != "" && k >= upper) {
			continue
		}
		it.keys = append(it.keys, k)
		it.values = append(it.values, kv[k])
	}
	if reverse {
		slices.Reverse(it.keys)
		slices.Reverse(it.values)
	}
	return it
}

func (it *sliceIterator) Next() bool {
	if it.closed {
		panic("Next on a closed iterator")
	}
	if it.failAfter > 0 && it.i == it.failAfter {
		it.err = errors.New("base failed")
		return false
	}
	if it.i >= len(it.keys) {
		return false
	}
	for j := range it.buf {
		it.buf[j] = 'X' // what a kept key of the last position now reads
	}
	it.buf = append(append(it.buf[:0], it.keys[it.i]...), it.values[it.i]...)
	it.key, it.value = it.buf[:len(it.keys[it.i])], it.buf[len(it.keys[it.i]):]
	it.i++
	return true
}

func (it *sliceIterator) Key() []byte   { return it.key }
func (it *sliceIterator) Value() []byte { return it.value }
func (it *sliceIterator) Err() error    { return it.err }
func (it *sliceIterator) Close() error  { it.closed = true; return nil }

// parseWrites turns "k=v" (a set) and "k-" (a deletion) into sorted writes.
func parseWrites(specs ...string) []Write {
	var ws []Write
	for _, s := range specs {
		if k, ok := strings.CutSuffix(s, "-"); ok {
			ws = append(ws, Write{Key: []byte(k), Delete: true})
			continue
		}
		k, v, _ := strings.Cut(s, "=")
		ws = append(ws, Write{Key: []byte(k), Value: []byte(v)})
	}
	slices.SortFunc(ws, func(a, b Write) int { return bytes.Compare(a.Key, b.Key) })
	return ws
}

// drain returns "k=v" for every entry of it, copying each at once, and
// closes it.
func drain(t *testing.T, it Iterator) []string {
	t.Helper()
	var got []string
	for it.Next() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// model is the batch's view, computed the plain way: the base's keys with
// the writes applied, within bounds, in order.
func model(base map[string]string, writes []Write, lower, upper string, reverse bool) []string {
	view := map[string]string{}
	for k, v := range base {
		view[k] = v
	}
	for _, w := range writes {
		if w.Delete {
			delete(view, string(w.Key))
		} else {
			view[string(w.Key)] = string(w.Value)
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(view)) {
		if (lower == "" || k >= lower) && (upper == "" || k < upper) {
			out = append(out, k+"="+view[k])
		}
	}
	if reverse {
		slices.Reverse(out)
	}
	return out
}

func bound(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// The overlay of a batch's writes over the store's keys is the store's keys
// with the writes applied, within bounds, in the order asked for: a write
// replaces an equal key, a deletion hides it, writes before, between and
// after the store's keys appear in place, and writes outside the bounds do
// not appear.
func TestOverlayIsTheStoreWithTheWritesApplied(t *testing.T) {
	base := map[string]string{"b": "1", "d": "2", "f": "3", "h": "4"}
	cases := []struct {
		name         string
		writes       []string
		lower, upper string
		want         []string // ascending
	}{
		{"no writes", nil, "", "", []string{"b=1", "d=2", "f=3", "h=4"}},
		{"writes only", []string{"a=x", "z=y"}, "", "", []string{"a=x", "b=1", "d=2", "f=3", "h=4", "z=y"}},
		{"a write replaces an equal key", []string{"d=new"}, "", "", []string{"b=1", "d=new", "f=3", "h=4"}},
		{"deletes hide keys", []string{"b-", "h-"}, "", "", []string{"d=2", "f=3"}},
		{"deleting a missing key shows nothing", []string{"c-", "z-"}, "", "", []string{"b=1", "d=2", "f=3", "h=4"}},
		{"writes between keys", []string{"c=x", "e=y", "g=z"}, "", "", []string{"b=1", "c=x", "d=2", "e=y", "f=3", "g=z", "h=4"}},
		{"writes after every key", []string{"i=x", "j-", "k=y"}, "", "", []string{"b=1", "d=2", "f=3", "h=4", "i=x", "k=y"}},
		{"everything deleted", []string{"b-", "d-", "f-", "h-"}, "", "", nil},
		{"bounds drop writes outside", []string{"a=x", "c=y", "g-", "h=z", "i=w"}, "b", "h", []string{"b=1", "c=y", "d=2", "f=3"}},
		{"a write on the upper bound is outside", []string{"f=x"}, "c", "f", []string{"d=2"}},
		{"a write on the lower bound is inside", []string{"c=x"}, "c", "", []string{"c=x", "d=2", "f=3", "h=4"}},
		{"an empty range", []string{"c=x"}, "c", "c", nil},
	}
	for _, c := range cases {
		for _, reverse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reverse=%v", c.name, reverse), func(t *testing.T) {
				writes := parseWrites(c.writes...)
				got := drain(t, NewOverlayIterator(newSliceIterator(base, c.lower, c.upper, reverse),
					writes, bound(c.lower), bound(c.upper), reverse))
				want := slices.Clone(c.want)
				if reverse {
					slices.Reverse(want)
				}
				if !slices.Equal(got, want) {
					t.Errorf("got %q, want %q", got, want)
				}
				if m := model(base, writes, c.lower, c.upper, reverse); !slices.Equal(m, want) {
					t.Fatalf("the case's want %q disagrees with the model %q", want, m)
				}
			})
		}
	}
}

// On random stores, writes and bounds, the overlay agrees with the model.
func TestOverlayAgreesWithTheModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() string { return string(rune('a' + rng.IntN(20))) }
	for i := range 2000 {
		base := map[string]string{}
		for range rng.IntN(10) {
			base[key()] = fmt.Sprint(rng.IntN(100))
		}
		byKey := map[string]Write{}
		for range rng.IntN(10) {
			k := key()
			byKey[k] = Write{Key: []byte(k), Value: []byte(fmt.Sprint(rng.IntN(100))), Delete: rng.IntN(3) == 0}
		}
		var writes []Write
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			writes = append(writes, byKey[k])
		}
		var lower, upper string
		if rng.IntN(2) == 0 {
			lower = key()
		}
		if rng.IntN(2) == 0 {
			upper = key()
		}
		reverse := rng.IntN(2) == 0
		got := drain(t, NewOverlayIterator(newSliceIterator(base, lower, upper, reverse), writes, bound(lower), bound(upper), reverse))
		if want := model(base, writes, lower, upper, reverse); !slices.Equal(got, want) {
			t.Fatalf("case %d: base %v, writes %q, [%q, %q), reverse=%v: got %q, want %q",
				i, base, fmt.Sprint(writes), lower, upper, reverse, got, want)
		}
	}
}

// A failing base stops the overlay at once with its error, rather than
// letting the writes after the failure pass for a complete view; Close
// closes the base.
func TestOverlayStopsOnTheBaseError(t *testing.T) {
	base := newSliceIterator(map[string]string{"a": "1", "c": "2", "e": "3"}, "", "", false)
	base.failAfter = 1
	it := NewOverlayIterator(base, parseWrites("b=x", "d=y"), nil, nil, false)
	var got []string
	for it.Next() {
		got = append(got, string(it.Key()))
	}
	if want := []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("keys before the failure: %q, want %q", got, want)
	}
	if it.Err() == nil {
		t.Error("Err is nil after the base failed")
	}
	if it.Close(); !base.closed {
		t.Error("Close left the base open")
	}
}
