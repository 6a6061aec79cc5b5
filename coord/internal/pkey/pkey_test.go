package pkey

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestValuesSetAndSegments(t *testing.T) {
	for _, tc := range []struct {
		key   any
		paths []string
		want  string
	}{
		{"alice", []string{"/customer"}, `{"customer":"alice","id":"x"}`},
		{42, []string{"/customer/number"}, `{"customer":{"number":42},"id":"x"}`},
		{[]any{"acme", int64(7)}, []string{"/tenant", "/user/id"}, `{"id":"x","tenant":"acme","user":{"id":7}}`},
		{[]string{"a", "b"}, []string{"/x", "/y"}, `{"id":"x","x":"a","y":"b"}`},
		{nil, []string{"/a~1b"}, `{"a/b":null,"id":"x"}`},
		{true, []string{"/flag"}, `{"flag":true,"id":"x"}`},
	} {
		vals, err := Values(tc.key, len(tc.paths))
		if err != nil {
			t.Fatalf("%v: %v", tc.key, err)
		}
		doc := map[string]any{"id": "x"}
		if err := Set(doc, tc.paths, vals); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(doc)
		if string(got) != tc.want {
			t.Errorf("%v at %v: %s, want %s", tc.key, tc.paths, got, tc.want)
		}
		_ = PartitionKey(vals)
	}
	for _, bad := range []struct {
		key any
		n   int
	}{{[]any{"a"}, 2}, {struct{}{}, 1}, {[]any{"a", []int{1}}, 2}} {
		if _, err := Values(bad.key, bad.n); err == nil {
			t.Errorf("Values(%v, %d): no error", bad.key, bad.n)
		}
	}
	if err := Set(map[string]any{"customer": "alice"}, []string{"/customer/id"}, []any{"x"}); err == nil {
		t.Error("a path through a string: no error")
	}
	for _, p := range []string{"", "customer", "/", "/a//b"} {
		if _, err := Segments(p); err == nil {
			t.Errorf("Segments(%q): no error", p)
		}
	}
	if got, _ := Segments("/a~0b/c~1d"); !reflect.DeepEqual(got, []string{"a~b", "c/d"}) {
		t.Errorf("Segments unescapes to %v", got)
	}
}
