package engine

import (
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/pkey"
)

// TestPlainStringKeyIsTheDecodedKey: the partition key read from the raw
// properties without decoding them (plainStringKey) is the one decoding
// them gives, and it declines every item it cannot read so: escapes,
// non-strings, nested, escaped or missing paths, values over the size
// limit (left for the decoding's error).
func TestPlainStringKeyIsTheDecodedKey(t *testing.T) {
	long := strings.Repeat("x", MaxPartitionKeyValueBytes)
	for _, tc := range []struct {
		paths []string
		doc   string
		plain bool // plainStringKey reads it
	}{
		{[]string{"/pk"}, `{"id":"1","pk":"a"}`, true},
		{[]string{"/pk"}, `{"id":"1","pk":""}`, true},
		{[]string{"/pk"}, `{"id":"1","pk":"é 漢字 <&>"}`, true},
		{[]string{"/pk"}, `{"id":"1","pk":"` + long + `"}`, true},
		{[]string{"/pk"}, `{"id":"1","pk":"` + long + `x"}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":"a\"b"}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":"\u0061"}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":1.5}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":null}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":{}}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":["a"]}`, false},
		{[]string{"/pk"}, `{"id":"1"}`, false},
		{[]string{"/pk"}, `{"id":"1","pk":"a","pk":"b"}`, true},
		{[]string{"/a/b"}, `{"id":"1","a":{"b":"x"}}`, false},
		{[]string{"/a~1b"}, `{"id":"1","a~1b":"x","a/b":"y"}`, false},
		{[]string{"/t", "/u", "/v"}, `{"id":"1","t":"a","u":"b","v":"c"}`, true},
		{[]string{"/t", "/u", "/v"}, `{"id":"1","t":"a","u":2,"v":"c"}`, false},
		{[]string{"/_rid"}, `{"id":"1","_rid":"r"}`, true},
	} {
		obj, err := jsondoc.Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		def := &PartitionKeyDefinition{Paths: tc.paths}
		want, werr := decodedPartitionKey(def, obj)
		got, ok := plainStringKey(nil, tc.paths, obj, nil)
		switch {
		case ok != tc.plain:
			t.Errorf("%.60s at %v: read without decoding %v, want %v", tc.doc, tc.paths, ok, tc.plain)
		case ok && (werr != nil || !got.Equal(want)):
			t.Errorf("%.60s at %v: %v, decoded %v (%v)", tc.doc, tc.paths, got, want, werr)
		}
		// In the one-value array of an item.
		var one [1]pkey.Value
		if in, ok := plainStringKey(one[:0], tc.paths, obj, nil); ok != tc.plain || ok && (!in.Equal(want) || len(in) != cap(in)) {
			t.Errorf("%.60s at %v: in a given array %v (%v), decoded %v", tc.doc, tc.paths, in, ok, want)
		}
	}
}
