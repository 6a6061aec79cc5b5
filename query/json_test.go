package query

import (
	"encoding/json"
	"math"
	"testing"
)

func TestJSONRoundTrip(t *testing.T) {
	tests := []struct{ in, out string }{
		{`{"b":1,"a":[true,false,null],"c":{"d":"x"}}`, `{"b":1,"a":[true,false,null],"c":{"d":"x"}}`},
		{` [ 1 , 2.50 , -3e2 , 1E-7 , 0 , -0 ] `, `[1,2.5,-300,1e-7,0,0]`},
		{`"\u00e9\ud83d\ude00\n\t\"\\\/"`, `"é😀\n\t\"\\/"`},
		{`"\u0001"`, `"\u0001"`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`123456789012345678`, `123456789012345680`},
		{`1e21`, `1e+21`},
		{`1.5e300`, `1.5e+300`},
		{`0.000001`, `0.000001`},
		{`{}`, `{}`},
		{`[]`, `[]`},
	}
	for _, tt := range tests {
		v, err := decodeJSON([]byte(tt.in))
		if err != nil {
			t.Errorf("decode %s: %v", tt.in, err)
			continue
		}
		if got := string(encodeJSON(v)); got != tt.out {
			t.Errorf("round trip %s = %s, want %s", tt.in, got, tt.out)
		}
		if !json.Valid(encodeJSON(v)) {
			t.Errorf("encoding of %s is not valid JSON", tt.in)
		}
	}
}

func TestJSONInvalid(t *testing.T) {
	for _, in := range []string{``, `{`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `01`, `1.`, `.5`, `-`, `1e`, `"abc`, "\"a\x01\"",
		`tru`, `nul`, `[1] x`, `{"a":}`, `"\x"`, `"\u12"`, `{1:2}`} {
		if _, err := decodeJSON([]byte(in)); err == nil {
			t.Errorf("decode %q succeeded, want error", in)
		}
	}
}

func TestNumberFormat(t *testing.T) {
	tenth := 0.1 // a variable, so the sum is rounded like at run time
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1.5, "-1.5"}, {tenth + 2*tenth, "0.30000000000000004"},
		{1e20, "100000000000000000000"}, {1e21, "1e+21"}, {1.5e-7, "1.5e-7"}, {1e-6, "0.000001"},
		{123.456, "123.456"}, {math.MaxFloat64, "1.7976931348623157e+308"}, {5e-324, "5e-324"},
	}
	for _, tt := range tests {
		if got := string(appendNumber(nil, tt.f)); got != tt.want {
			t.Errorf("appendNumber(%v) = %s, want %s", tt.f, got, tt.want)
		}
	}
}

func TestCompareOrder(t *testing.T) {
	// Ascending order across types: undefined < null < false < true <
	// numbers < strings < arrays < objects.
	docs := []string{`null`, `false`, `true`, `-1`, `2`, `"10"`, `"9"`, `[]`, `[1]`, `{}`, `{"a":1}`}
	vals := []value{undef}
	for _, d := range docs {
		v, err := decodeJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		vals = append(vals, v)
	}
	for i := range vals {
		for j := range vals {
			got := compareOrder(vals[i], vals[j])
			want := cmpInt(i, j)
			if got != want {
				t.Errorf("compareOrder(%s, %s) = %d, want %d", encodeJSON(vals[i]), encodeJSON(vals[j]), got, want)
			}
		}
	}
}
