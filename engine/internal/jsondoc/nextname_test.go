package jsondoc

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// nextFieldBefore is NextField as it was, its own copy of NextName's body
// (kept here to hold the one that calls NextName to the same answers).
func nextFieldBefore(b []byte, i int) (name []byte, value json.RawMessage, next int, ok bool, err error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] == '}' {
		return nil, nil, i, false, nil
	}
	end := SkipString(b, i)
	if isPlainName(b, i, end) {
		name = b[i+1 : end-1]
	} else {
		s, err := unmarshalName(b[i:end])
		if err != nil {
			return nil, nil, i, false, err
		}
		name = []byte(s)
	}
	i = SkipSpace(b, end)
	i++ // ':'
	i = SkipSpace(b, i)
	vend := SkipValue(b, i)
	value = b[i:vend]
	i = SkipSpace(b, vend)
	if i < len(b) && b[i] == ',' {
		i++
	}
	return name, value, i, true, nil
}

// TestNextFieldIsNextNameThenSkipValue: on random objects (plain, escaped,
// non-ASCII and refused names, spaces around every token, nested values,
// a missing '}') NextField lists, from every property, what its own copy of
// NextName's body listed: the same name, value bytes, next index, ok and
// error.
func TestNextFieldIsNextNameThenSkipValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 1))
	names := []string{"id", "n", "_rid", `a\"b`, `\u0061`, "é", "\xff", `\ud800`, `x\/y`, ``, `\q`}
	values := []string{`1`, `"x"`, `{"a":[1,{"b":2}]}`, `[1, 2]`, `null`, `true`, `-1.5e3`, `"s\"q"`}
	space := []string{"", " ", "\n\t "}
	sp := func() string { return space[rng.IntN(len(space))] }
	errs, fields := 0, 0
	for n := 0; n < 50000; n++ {
		var s strings.Builder
		s.WriteString(sp() + "{" + sp())
		for k := range rng.IntN(8) {
			if k > 0 {
				s.WriteString(sp() + "," + sp())
			}
			s.WriteString(`"` + names[rng.IntN(len(names))] + `"` + sp() + ":" + sp() + values[rng.IntN(len(values))])
		}
		if rng.IntN(10) > 0 {
			s.WriteString(sp() + "}")
		}
		b := []byte(s.String())
		for i := SkipSpace(b, 0) + 1; ; {
			wn, wv, wnext, wok, werr := nextFieldBefore(b, i)
			gn, gv, gnext, gok, gerr := NextField(b, i)
			if string(gn) != string(wn) || (gn == nil) != (wn == nil) || string(gv) != string(wv) || (gv == nil) != (wv == nil) ||
				gnext != wnext || gok != wok || (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
				t.Fatalf("%q at %d: NextField %q %q %d %v %v, before %q %q %d %v %v", b, i, gn, gv, gnext, gok, gerr, wn, wv, wnext, wok, werr)
			}
			if werr != nil {
				errs++
			}
			if !wok {
				break
			}
			fields++
			i = wnext
		}
	}
	if errs < 1000 || fields < 100000 {
		t.Fatalf("only %d errors and %d properties read", errs, fields)
	}
}

// BenchmarkNextField reads a stored item's properties with NextField and
// with its copy from before (nextFieldBefore), for the instructions of each.
func BenchmarkNextField(b *testing.B) {
	doc := []byte(`{"id":"item-1","pk":"p1","n":42,"name":"a name of some length","tags":["a","b"],"nested":{"x":1},"_rid":"AbCdEf==","_ts":1700000000}`)
	for _, c := range []struct {
		name string
		f    func([]byte, int) ([]byte, json.RawMessage, int, bool, error)
	}{{"now", NextField}, {"before", nextFieldBefore}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				for i := 1; ; {
					_, _, next, ok, _ := c.f(doc, i)
					if !ok {
						break
					}
					i = next
				}
			}
		})
	}
}
