package jsondoc

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// decodeLazyInTwoScans is DecodeLazy before its object's one scan:
// Valid, then expandAt.
func decodeLazyInTwoScans(b []byte) (any, error) {
	if !Valid(b) {
		return nil, errNotOneValue
	}
	return expandAt(b, SkipSpace(b, 0))
}

var errNotOneValue = errTextOf("not a single valid JSON value")

type errTextOf string

func (e errTextOf) Error() string { return string(e) }

// checkLazyOneScan fails when DecodeLazy answers other than Valid and
// then expandAt: the same error text, or the same members (names, and
// value bytes for each Raw) in the same order, written back the same.
func checkLazyOneScan(t *testing.T, b []byte) {
	t.Helper()
	got, err := DecodeLazy(b)
	want, wantErr := decodeLazyInTwoScans(b)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%.120q: one scan %v, two scans %v", b, err, wantErr)
	}
	if err != nil {
		return
	}
	if g, w := AppendValue(nil, got), AppendValue(nil, want); !bytes.Equal(g, w) {
		t.Fatalf("%.120q: one scan writes %.120q, two scans %.120q", b, g, w)
	}
	go1, ok1 := got.(*Members)
	wo, ok2 := want.(*Members)
	if ok1 != ok2 {
		t.Fatalf("%.120q: one scan %T, two scans %T", b, got, want)
	}
	if !ok1 {
		return
	}
	if len(go1.Names) != len(wo.Names) || len(go1.Values) != len(wo.Values) {
		t.Fatalf("%.120q: %d members, two scans %d", b, len(go1.Names), len(wo.Names))
	}
	for i := range go1.Names {
		gr, _ := go1.Values[i].(*Raw)
		wr, _ := wo.Values[i].(*Raw)
		if go1.Names[i] != wo.Names[i] || gr == nil || wr == nil || !bytes.Equal(*gr, *wr) || cap(*gr) != len(*gr) {
			t.Fatalf("%.120q: member %d %q, two scans %q", b, i, go1.Names[i], wo.Names[i])
		}
	}
}

// lazySeeds are stored items and hostile objects: escaped, repeated and
// non-ASCII names (bad UTF-8 too), every kind of value, spaces.
var lazySeeds = []string{
	`{"id":"a","pk":"p1","n":5,"tags":["a","b"],"nested":{"x":5,"y":"yy"},"_rid":"AA==","_ts":1}`,
	` { "a" : 1 , "b" : [ 1 , { "c" : null } ] , "d" : "x\"y" } `, `{}`, ` {} `, `{"a":1,"a":2}`, `{"a":1,"\u0061":[2]}`,
	"{\"\xff\":1,\"caf\u00e9\":2,\"a\x7fb\":3,\"\\ud83d\\ude00\":4,\"\\ud800\":5}", `{"a":1}x`, `{"a":1,}`, `{"a" 1}`, `{"a":tru}`,
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"kf":15,"kg":16,"kh":17}`,
	`[1,2]`, `"s"`, `5`, `null`, ``, ` `, `{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	`{"a":-0.5e+3,"b":1e400,"c":true,"d":false,"e":"` + strings.Repeat("long text ", 20) + `"}`,
}

// A stored item's members listed in the validator's one scan are those
// Valid and then expandAt listed: seeds and random mutations of them.
func TestLazyObjectsListedInOneScanAreThoseOfTwo(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 30))
	alphabet := []byte("{}[]:,\"\\/ 0123456789-+.eEtrufalsnu\t\n\x01\xff\x7f\xc3\xa9\xe2\x82\xac\xed")
	for _, s := range lazySeeds {
		checkLazyOneScan(t, []byte(s))
	}
	for range 100000 {
		b := []byte(lazySeeds[r.IntN(len(lazySeeds))])
		if len(b) > 400 {
			continue
		}
		for range 1 + r.IntN(3) {
			at := 0
			if len(b) > 0 {
				at = r.IntN(len(b))
			}
			switch ch := alphabet[r.IntN(len(alphabet))]; r.IntN(4) {
			case 0:
				if len(b) > 0 {
					b[at] = ch
				}
			case 1:
				b = append(b[:at], append([]byte{ch}, b[at:]...)...)
			case 2:
				if len(b) > 0 {
					b = append(b[:at], b[at+1:]...)
				}
			case 3:
				b = b[:at]
			}
		}
		checkLazyOneScan(t, b)
	}
}

func FuzzLazyObjectsListedInOneScanAreThoseOfTwo(f *testing.F) {
	for _, s := range lazySeeds {
		if len(s) < 1000 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkLazyOneScan(t, b) })
}
