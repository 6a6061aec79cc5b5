package jsondoc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDecodedTreeWritesBackTheSameValue: a tree decoded and written back
// means what the input meant, as encoding/json reads both, property order
// kept, for escapes, non-ASCII text, numbers as written, nesting and
// whitespace; invalid JSON is an error.
func TestDecodedTreeWritesBackTheSameValue(t *testing.T) {
	for _, in := range []string{
		`{"id":"a","n":1,"f":-0.5e3,"big":123456789012345678901234567890,"t":true,"u":false,"z":null}`,
		` { "s" : "tab\there \"q\" \\ \u00e9 é 漢字 \ud83d\ude00" , "a" : [ 1 , [ ] , { } , [ "x" , { "y" : [ null ] } ] ] } `,
		`{"e\u0041":"escaped name","plain":"v","":"empty name"}`,
		`[]`, `"just a string"`, `42`, `{}`,
	} {
		tree, err := Decode([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		out := AppendValue(nil, tree)
		var want, got any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s wrote back invalid JSON %s: %v", in, out, err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s wrote back %s", in, out)
		}
	}
	// Order kept, a repeated name keeps its last value where it first was.
	tree, err := Decode([]byte(`{"b":1,"a":2,"b":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendValue(nil, tree)); got != `{"b":3,"a":2}` {
		t.Errorf("got %s", got)
	}
	// Numbers stay as written.
	tree, _ = Decode([]byte(`{"n":1.50,"m":1E2}`))
	if got := string(AppendValue(nil, tree)); got != `{"n":1.50,"m":1E2}` {
		t.Errorf("got %s", got)
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `{"a":1}x`, `tru`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%q decoded without an error", bad)
		}
	}
}

// TestLazyTreeWritesBackUntouchedValuesAsTheyAre: DecodeLazy decodes one
// level, its members written back byte for byte; expanding every value
// gives what Decode gives.
func TestLazyTreeWritesBackUntouchedValuesAsTheyAre(t *testing.T) {
	in := ` { "s" : "tab\there \u00e9" , "a" : [ 1 , [ ] , { "y" : [ null ] } ], "o": {"k": 1.50}, "b":1, "b":2 } `
	tree, err := DecodeLazy([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"s":"tab\there \u00e9","a":[ 1 , [ ] , { "y" : [ null ] } ],"o":{"k": 1.50},"b":2}`
	if got := string(AppendValue(nil, tree)); got != want {
		t.Errorf("written back %s, want %s", got, want)
	}
	var expandAll func(v any) any
	expandAll = func(v any) any {
		v, err := Expand(v)
		if err != nil {
			t.Fatal(err)
		}
		switch x := v.(type) {
		case *Members:
			for i := range x.Values {
				x.Values[i] = expandAll(x.Values[i])
			}
		case []any:
			for i := range x {
				x[i] = expandAll(x[i])
			}
		}
		return v
	}
	full, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := expandAll(tree); !reflect.DeepEqual(got, full) {
		t.Errorf("expanded %#v, want %#v", got, full)
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `{"a":1}x`} {
		if _, err := DecodeLazy([]byte(bad)); err == nil {
			t.Errorf("%q decoded without an error", bad)
		}
	}
}

// TestLazyTreePastItsRoomKeepsEveryValue: an object and an array of more
// members than their allocation has room for (lazyMembers) keep every
// undecoded value, those made before their arrays grew included, and
// write back what they read.
func TestLazyTreePastItsRoomKeepsEveryValue(t *testing.T) {
	var in, want strings.Builder
	in.WriteString(`{`)
	want.WriteString(`{`)
	for i := range 3 * lazyMembers {
		if i > 0 {
			in.WriteString(`, `)
			want.WriteString(`,`)
		}
		fmt.Fprintf(&in, `"m%d" : [ %d , "v%d" ]`, i, i, i)
		fmt.Fprintf(&want, `"m%d":[ %d , "v%d" ]`, i, i, i)
	}
	in.WriteString(`, "m0" : [ 0 , 1 , 2 , 3 , 4 , 5 , 6 , 7 , 8 , 9 , 10 , 11 , 12 ] }`)
	want.WriteString(`}`)
	tree, err := DecodeLazy([]byte(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	o := tree.(*Members)
	first, err := Expand(o.Values[0])
	if err != nil {
		t.Fatal(err)
	}
	a := first.([]any)
	for i, v := range a {
		if got := string(AppendValue(nil, v)); got != fmt.Sprint(i) {
			t.Errorf("m0[%d] is %s, want %d", i, got, i)
		}
	}
	o.Values[0] = a
	w := strings.Replace(want.String(), `"m0":[ 0 , "v0" ]`, `"m0":[0,1,2,3,4,5,6,7,8,9,10,11,12]`, 1)
	if got := string(AppendValue(nil, tree)); got != w {
		t.Errorf("written back %s, want %s", got, w)
	}
}

// TestLazyObjectNamesSurviveTheirBuffersGrowth: the names of an expanded
// object, written into one buffer that grows past its first room, each
// read back as decoded, escaped ones and repeated ones too.
func TestLazyObjectNamesSurviveTheirBuffersGrowth(t *testing.T) {
	long := strings.Repeat("n", objectNames+10)
	in := `{"a":1,"` + long + `":2,"\u00e9":3,"é":4,"b\"c":5,"` + long + `x":6,"a":7}`
	tree, err := DecodeLazy([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", long, "é", `b"c`, long + "x"}
	if got := tree.(*Members).Names; !reflect.DeepEqual(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
	if got, w := string(AppendValue(nil, tree)), `{"a":7,"`+long+`":2,"é":4,"b\"c":5,"`+long+`x":6}`; got != w {
		t.Errorf("written back %s, want %s", got, w)
	}
}
