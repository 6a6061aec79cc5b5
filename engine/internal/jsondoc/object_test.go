package jsondoc

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestParseObject(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{`{}`, `{}`},
		{` { "a" : 1 , "b":"x,}" ,"c":{"d":[1,{"e":"]"}]},"f":null,"g":true,"h":-1.5e3 } `, `{"a":1,"b":"x,}","c":{"d":[1,{"e":"]"}]},"f":null,"g":true,"h":-1.5e3}`},
		{`{"esc\"aped":"\\\"","u":"\u00e9"}`, `{"esc\"aped":"\\\"","u":"\u00e9"}`},
	}
	for _, tt := range tests {
		obj, err := Parse([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if got := string(obj.Encode()); got != tt.want {
			t.Errorf("%s: got %s want %s", tt.in, got, tt.want)
		}
	}
	if _, err := Parse([]byte(`[1]`)); err == nil {
		t.Error("an array parsed as an object")
	}
}

// TestParseObjectNamesDecodeAsJSONDoes: a property name read without
// json.Unmarshal (plain ASCII) is the name encoding/json decodes, names
// with escapes or other characters are still decoded in full, and each name
// stays with its value, past the first sixteen too.
func TestParseObjectNamesDecodeAsJSONDoes(t *testing.T) {
	for _, body := range []string{
		`{"id":"a","pk":1}`,
		`{ "a b" : 1 , "x~y/z": {"in":2} }`,
		`{"a\"b":1,"c\\d":2,"\u00e9t\u00e9":3,"ète":4,"\t":5,"\u0000":6,"":7,"~":8}`,
		`{"\ud83d\ude00":1,"del` + "\x7f" + `":2}`,
		`{}`,
		manyProperties(40),
	} {
		obj, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatal(err)
		}
		if len(obj) != len(want) {
			t.Fatalf("%s: %d properties, want %d", body, len(obj), len(want))
		}
		for _, f := range obj {
			if v, ok := want[f.Name]; !ok || string(v) != string(f.Value) {
				t.Errorf("%s: property %q is %s, encoding/json decodes %s", body, f.Name, f.Value, v)
			}
		}
	}
}

// manyProperties is an object of n properties, plain names and escaped
// ones in turn.
func manyProperties(n int) string {
	b := []byte("{")
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		if i%3 == 2 {
			b = fmt.Appendf(b, `"e\u0073%d":%d`, i, i)
		} else {
			b = fmt.Appendf(b, `"p%d":%d`, i, i)
		}
	}
	return string(append(b, '}'))
}

// TestWithoutSystemKeepsTheOtherPropertiesInOrder checks that the system
// properties go wherever they stand, the others stay in their order, and
// that an append to the result never writes into the parsed object.
func TestWithoutSystemKeepsTheOtherPropertiesInOrder(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"id":"a","pk":"p","n":1}`, `{"id":"a","pk":"p","n":1}`},
		{`{"_rid":"x","id":"a","_ts":5,"pk":"p","_etag":"e","n":1,"_self":"s","_attachments":"t"}`, `{"id":"a","pk":"p","n":1}`},
		{`{"id":"a","_lsn":3}`, `{"id":"a"}`},
		{`{"_ts":1,"_rid":"x"}`, `{}`},
		{`{"id":"a","_other":1,"ts":2}`, `{"id":"a","_other":1,"ts":2}`},
	}
	for _, tt := range tests {
		o, err := Parse([]byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		before := string(o.Encode())
		got := o.WithoutSystem()
		if s := string(got.Encode()); s != tt.want {
			t.Errorf("WithoutSystem(%s) = %s, want %s", tt.in, s, tt.want)
		}
		_ = append(got, Field{Name: "added", Value: json.RawMessage(`1`)})
		if after := string(o.Encode()); after != before {
			t.Errorf("an append to WithoutSystem(%s) changed the parsed object to %s", tt.in, after)
		}
		if cap(o) > len(o) && o[:len(o)+1][len(o)].Name == "added" {
			t.Errorf("an append to WithoutSystem(%s) wrote into the parsed object's spare room", tt.in)
		}
	}
}

// TestDropSystemKeepsTheOtherPropertiesInOrder: DropSystem leaves what
// WithoutSystem leaves, and an append to its result does not write into
// the array it was filtered in.
func TestDropSystemKeepsTheOtherPropertiesInOrder(t *testing.T) {
	for _, in := range []string{`{}`, `{"id":"a","pk":"p","n":1}`,
		`{"_rid":"x","id":"a","_ts":5,"pk":"p","_etag":"e","n":1,"_self":"s","_attachments":"t"}`,
		`{"id":"a","_lsn":3}`, `{"_ts":1,"_rid":"x"}`, `{"id":"a","_other":1,"ts":2}`} {
		o, err := Parse([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		want := string(o.WithoutSystem().Encode())
		got := o.DropSystem()
		if s := string(got.Encode()); s != want {
			t.Errorf("DropSystem(%s) = %s, want %s", in, s, want)
		}
		if cap(got) != len(got) {
			t.Errorf("DropSystem(%s) has room past its %d properties: an append would write into the parsed object", in, len(got))
		}
	}
}
