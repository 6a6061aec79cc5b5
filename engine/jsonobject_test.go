package engine

import (
	"encoding/json"
	"testing"
)

// TestParseObjectNamesDecodeAsJSONDoes: a property name read without
// json.Unmarshal (plain ASCII) is the name encoding/json decodes, and names
// with escapes or other characters are still decoded in full.
func TestParseObjectNamesDecodeAsJSONDoes(t *testing.T) {
	for _, body := range []string{
		`{"id":"a","pk":1}`,
		`{ "a b" : 1 , "x~y/z": {"in":2} }`,
		`{"a\"b":1,"c\\d":2,"\u00e9t\u00e9":3,"ète":4,"\t":5,"\u0000":6,"":7,"~":8}`,
		`{"\ud83d\ude00":1,"del` + "\x7f" + `":2}`,
		`{}`,
	} {
		obj, err := parseObject([]byte(body))
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
			if _, ok := want[f.name]; !ok {
				t.Errorf("%s: property %q is not one encoding/json decodes", body, f.name)
			}
		}
	}
}
