package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestApplyPatch(t *testing.T) {
	const doc = `{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":1}`
	pk := &PartitionKeyDefinition{Paths: []string{"/category"}}
	tests := []struct {
		name string
		ops  string
		want string // the whole document, or "" when err is set
		err  string // a substring of the 400's message
	}{
		{"seed patch.py", `[{"op":"set","path":"/price","value":22.5},{"op":"incr","path":"/stock","value":-3},{"op":"add","path":"/tags/-","value":"classic"},{"op":"remove","path":"/promo"}]`,
			`{"id":"p1","category":"games","price":22.5,"stock":7,"tags":["board","classic"],"a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":1}`, ""},
		{"add creates a missing field last", `[{"op":"add","path":"/new","value":{"k":[1]}}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":1,"new":{"k":[1]}}`, ""},
		{"set creates a nested field", `[{"op":"set","path":"/a/b/d","value":null}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1,"d":null},"list":[1,2,3]},"s":"x","w~/x":1}`, ""},
		{"add on an array index inserts", `[{"op":"add","path":"/a/list/1","value":9}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,9,2,3]},"s":"x","w~/x":1}`, ""},
		{"add at the array length appends", `[{"op":"add","path":"/a/list/3","value":4}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3,4]},"s":"x","w~/x":1}`, ""},
		{"set on an array index overwrites", `[{"op":"set","path":"/a/list/0","value":7}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[7,2,3]},"s":"x","w~/x":1}`, ""},
		{"replace an existing field", `[{"op":"replace","path":"/s","value":"y"}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"y","w~/x":1}`, ""},
		{"remove an array element shifts left", `[{"op":"remove","path":"/a/list/0"}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[2,3]},"s":"x","w~/x":1}`, ""},
		{"incr a float", `[{"op":"incr","path":"/price","value":1}]`,
			`{"id":"p1","category":"games","price":26.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":1}`, ""},
		{"incr an integer by a float", `[{"op":"incr","path":"/stock","value":0.5}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10.5,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":1}`, ""},
		{"incr creates the field", `[{"op":"incr","path":"/a/b/n","value":5}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1,"n":5},"list":[1,2,3]},"s":"x","w~/x":1}`, ""},
		{"incr an array element", `[{"op":"incr","path":"/a/list/2","value":10}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,13]},"s":"x","w~/x":1}`, ""},
		{"move a field", `[{"op":"move","from":"/promo","path":"/a/promo"}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"a":{"b":{"c":1},"list":[1,2,3],"promo":"summer"},"s":"x","w~/x":1}`, ""},
		{"move an array element into an array", `[{"op":"move","from":"/a/list/0","path":"/tags/0"}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":[1,"board"],"promo":"summer","a":{"b":{"c":1},"list":[2,3]},"s":"x","w~/x":1}`, ""},
		{"escaped pointer", `[{"op":"incr","path":"/w~0~1x","value":1}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":2}`, ""},
		{"operations see earlier ones", `[{"op":"add","path":"/n","value":{}},{"op":"add","path":"/n/m","value":[]},{"op":"add","path":"/n/m/-","value":1},{"op":"incr","path":"/n/m/0","value":1}]`,
			`{"id":"p1","category":"games","price":25.5,"stock":10,"tags":["board"],"promo":"summer","a":{"b":{"c":1},"list":[1,2,3]},"s":"x","w~/x":1,"n":{"m":[2]}}`, ""},

		{"replace a missing field", `[{"op":"replace","path":"/nope","value":1}]`, "", "For Operation(1): Node(/nope) to be replaced is absent."},
		{"remove a missing field", `[{"op":"set","path":"/x","value":1},{"op":"remove","path":"/nope"}]`, "", "For Operation(2): Node(/nope) to be removed is absent."},
		{"remove past the array end", `[{"op":"remove","path":"/a/list/3"}]`, "", "Node(/a/list/3) to be removed is absent."},
		{"move from a missing field", `[{"op":"move","from":"/nope","path":"/x"}]`, "", "Node(/nope) to be moved is absent."},
		{"incr a string", `[{"op":"incr","path":"/s","value":1}]`, "", "Node(/s) is a string: incr can only add to a number."},
		{"incr past the 64-bit integer range", `[{"op":"set","path":"/n","value":9223372036854775807},{"op":"incr","path":"/n","value":1}]`, "", "outside the range of a 64-bit integer"},
		{"incr below the 64-bit integer range", `[{"op":"set","path":"/n","value":-9223372036854775807},{"op":"incr","path":"/n","value":-2}]`, "", "outside the range of a 64-bit integer"},
		{"a path into a string", `[{"op":"set","path":"/s/x","value":1}]`, "", "Node(/s) is a string, not an object or array"},
		{"no recursive creation", `[{"op":"add","path":"/no/such","value":1}]`, "", "Node(/no) is absent"},
		{"add past the array end", `[{"op":"add","path":"/a/list/5","value":1}]`, "", "out of bounds"},
		{"not an index", `[{"op":"add","path":"/a/list/x","value":1}]`, "", `"x" in path /a/list/x is not an array index`},
		{"patch the id", `[{"op":"set","path":"/id","value":"p2"}]`, "", "the id cannot be patched"},
		{"patch the partition key", `[{"op":"remove","path":"/category"}]`, "", "would change the partition key /category"},
		{"move the partition key away", `[{"op":"move","from":"/category","path":"/c"}]`, "", "would change the partition key /category"},
		{"patch a system property", `[{"op":"set","path":"/_ts","value":1}]`, "", "system property _ts cannot be patched"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePatch([]byte(tc.ops))
			if err != nil {
				t.Fatalf("ParsePatch: %v", err)
			}
			before := []byte(doc)
			got, perr := applyPatch(before, p.Operations, pk)
			if string(before) != doc {
				t.Fatalf("applyPatch changed its input")
			}
			if tc.err != "" {
				if perr == nil || perr.Status != 400 || !strings.Contains(perr.Message, tc.err) {
					t.Fatalf("error = %v, want a 400 containing %q (document %s)", perr, tc.err, got)
				}
				return
			}
			if perr != nil {
				t.Fatalf("applyPatch: %v", perr)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestApplyPatchNestedPartitionKey(t *testing.T) {
	pk := &PartitionKeyDefinition{Paths: []string{"/addr/zip"}}
	for _, path := range []string{"/addr", "/addr/zip"} {
		p, err := ParsePatch([]byte(`[{"op":"set","path":"` + path + `","value":1}]`))
		if err != nil {
			t.Fatal(err)
		}
		if _, perr := applyPatch([]byte(`{"id":"1","addr":{"zip":"9","city":"x"}}`), p.Operations, pk); perr == nil {
			t.Errorf("patching %s of a container keyed on /addr/zip succeeded", path)
		}
	}
	p, _ := ParsePatch([]byte(`[{"op":"set","path":"/addr/city","value":"y"}]`))
	got, perr := applyPatch([]byte(`{"id":"1","addr":{"zip":"9","city":"x"}}`), p.Operations, pk)
	if perr != nil || string(got) != `{"id":"1","addr":{"zip":"9","city":"y"}}` {
		t.Errorf("patching a sibling of the key: %s, %v", got, perr)
	}
}

// TestPatchKeepsUntouchedValuesAsStored: a patch rewrites the values on its
// operations' paths; every other value of the item stays byte for byte as
// it was stored, as a replace would have stored it.
func TestPatchKeepsUntouchedValuesAsStored(t *testing.T) {
	const doc = `{"id":"1","a":{"b": [1, 2], "c": "\u00e9"},"s":"\u00e9 x","n":1}`
	for _, tc := range []struct{ ops, want string }{
		{`[{"op":"incr","path":"/n","value":1}]`, `{"id":"1","a":{"b": [1, 2], "c": "\u00e9"},"s":"\u00e9 x","n":2}`},
		{`[{"op":"set","path":"/a/d","value":true}]`, `{"id":"1","a":{"b":[1, 2],"c":"\u00e9","d":true},"s":"\u00e9 x","n":1}`},
		{`[{"op":"add","path":"/a/b/-","value":3}]`, `{"id":"1","a":{"b":[1,2,3],"c":"\u00e9"},"s":"\u00e9 x","n":1}`},
		{`[{"op":"move","from":"/a","path":"/m"}]`, `{"id":"1","s":"\u00e9 x","n":1,"m":{"b": [1, 2], "c": "\u00e9"}}`},
	} {
		p, err := ParsePatch([]byte(tc.ops))
		if err != nil {
			t.Fatal(err)
		}
		got, perr := applyPatch([]byte(doc), p.Operations, &PartitionKeyDefinition{Paths: []string{"/id"}})
		if perr != nil || string(got) != tc.want {
			t.Errorf("%s: got %s, %v\nwant %s", tc.ops, got, perr, tc.want)
		}
	}
}

func TestParsePatch(t *testing.T) {
	ops := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"op":"incr","path":"/n","value":1}`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	tests := []struct {
		name, body string
		err        string // "" when valid
	}{
		{"object with condition", `{"condition":"FROM c WHERE c.stock >= 5","operations":[{"op":"incr","path":"/stock","value":-5}]}`, ""},
		{"bare array", `[{"op":"remove","path":"/a"}]`, ""},
		{"ten operations", ops(10), ""},
		{"move", `[{"op":"move","from":"/a","path":"/b"}]`, ""},
		{"eleven operations", ops(11), "The number of patch operations can't exceed 10"},
		{"no operations", `{"operations":[]}`, "no operations"},
		{"not JSON", `{"operations":`, "not valid JSON"},
		{"unknown op", `[{"op":"copy","path":"/a","from":"/b"}]`, `"copy" is not a patch operation`},
		{"path without slash", `[{"op":"set","path":"a","value":1}]`, "starting with /"},
		{"bad escape", `[{"op":"set","path":"/a~2","value":1}]`, "~ must be followed by 0 or 1"},
		{"set without value", `[{"op":"set","path":"/a"}]`, "set needs a value"},
		{"incr by a string", `[{"op":"incr","path":"/a","value":"1"}]`, "incr needs a number"},
		{"incr by null", `[{"op":"incr","path":"/a","value":null}]`, "incr needs a number, not null"},
		{"incr by an object", `[{"op":"incr","path":"/a","value":{"n":1}}]`, "incr needs a number"},
		{"incr by a fraction", `[{"op":"incr","path":"/a","value":-2.5e-3}]`, ""},
		{"move without from", `[{"op":"move","path":"/a"}]`, "move needs a from path"},
		{"move into its own child", `[{"op":"move","from":"/a","path":"/a/b"}]`, "into its own child"},
		{"bad condition", `{"condition":"FROM c WHERE","operations":[{"op":"remove","path":"/a"}]}`, "The patch condition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePatch([]byte(tc.body))
			if tc.err == "" {
				if err != nil {
					t.Fatalf("ParsePatch: %v", err)
				}
				return
			}
			e, ok := AsError(err)
			if !ok || e.Status != 400 || !strings.Contains(e.Message, tc.err) {
				t.Fatalf("error = %v, want a 400 containing %q", err, tc.err)
			}
		})
	}
}

func TestPatchConditionOnStoredItem(t *testing.T) {
	p, err := ParsePatch([]byte(`{"condition":"FROM c WHERE c.stock >= 10 AND ARRAY_CONTAINS(c.tags, 'board')","operations":[{"op":"incr","path":"/stock","value":-10}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{`{"id":"1","stock":10,"tags":["board"]}`, true},
		{`{"id":"1","stock":7,"tags":["board"]}`, false},
		{`{"id":"1","stock":12}`, false},
	} {
		got, err := p.Condition.Matches(json.RawMessage(tc.doc), nil)
		if err != nil || got != tc.want {
			t.Errorf("condition on %s = %v, %v; want %v", tc.doc, got, err, tc.want)
		}
	}
}

// TestPatchPathsUnderThePartitionKeyAreProtected: a patch path is refused
// when it names the partition key or an object holding it, whether it
// was split by ParsePatch or by applyPatch itself, and allowed beside it
// or below it.
func TestPatchPathsUnderThePartitionKeyAreProtected(t *testing.T) {
	pk := &PartitionKeyDefinition{Paths: []string{"/a/b/c", "/k"}}
	doc := []byte(`{"id":"1","a":{"b":{"c":"p","d":1},"e":2},"k":"q","kk":3,"ab":4}`)
	for _, tc := range []struct {
		path      string
		protected bool
	}{
		{"/a", true}, {"/a/b", true}, {"/a/b/c", true}, {"/k", true},
		{"/a/b/d", false}, {"/a/e", false}, {"/kk", false}, {"/ab", false}, {"/a/b/c/x", false},
	} {
		body := `[{"op":"set","path":"` + tc.path + `","value":0}]`
		parsed, err := ParsePatch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var bare []PatchOperation
		if err := json.Unmarshal([]byte(body), &bare); err != nil {
			t.Fatal(err)
		}
		for _, ops := range [][]PatchOperation{parsed.Operations, bare} {
			_, perr := applyPatch(doc, ops, pk)
			refused := perr != nil && strings.Contains(perr.Message, "partition key")
			if refused != tc.protected {
				t.Errorf("set %s: refused for the partition key %v (%v), want %v", tc.path, refused, perr, tc.protected)
			}
		}
	}
}

// TestPatchBodiesReadWithoutReflectionAsEncodingJSONReadsThem: a patch
// body of the SDKs' shape is read without reflection into what
// encoding/json reads from it; any other (keys in another case, unknown
// or repeated keys, values of another type) is left to encoding/json,
// whose errors are the request's.
func TestPatchBodiesReadWithoutReflectionAsEncodingJSONReadsThem(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`[{"op":"incr","path":"/n","value":1}]`, true},
		{`{"operations":[{"op":"set","path":"/a/b~1c","value":{"x":[1,"y"]}},{"op":"remove","path":"/d"}]}`, true},
		{`{"condition":"FROM c WHERE c.n > 1","operations":[{"op":"move","from":"/a","path":"/b"}]}`, true},
		{` { "condition" : null , "operations" : [ { "op" : "add" , "path" : "/t\u00e9" , "value" : null } ] } `, true},
		{`{"operations":[{"op":"replace","path":"/é","value":"\"q\""}],"condition":"FROM c WHERE c.s = 'é'"}`, true},
		{`{"operations":[]}`, true},
		{`{"operations":null}`, true},
		{`{}`, true},
		{`[]`, true},
		{`{"Operations":[{"op":"incr","path":"/n","value":1}]}`, false},
		{`[{"OP":"incr","Path":"/n","value":1}]`, false},
		{`{"operations":[{"op":"incr","path":"/n","value":1}],"extra":1}`, false},
		{`[{"op":"incr","path":"/n","value":1,"op":"set"}]`, false},
		{`[{"op":5,"path":"/n"}]`, false},
		{`[{"op":null,"path":"/n"}]`, false},
		{`[null]`, false},
		{`{"condition":5,"operations":[]}`, false},
		{`{"operations":{"op":"set"}}`, false},
		{`[{"op":"set","path":"/a","value":1},"x"]`, false},
	} {
		body := []byte(strings.TrimSpace(tc.body))
		cond, ops, ok := readPatchBody(body)
		if ok != tc.fast {
			t.Errorf("%s: read without reflection %v, want %v", tc.body, ok, tc.fast)
		}
		wantCond, wantOps, err := unmarshalPatchBody(body)
		if !ok {
			continue
		}
		if err != nil {
			t.Errorf("%s: read without reflection, but encoding/json fails: %v", tc.body, err)
			continue
		}
		if !reflect.DeepEqual(cond, wantCond) || !reflect.DeepEqual(ops, wantOps) {
			t.Errorf("%s: read %v %+v, encoding/json reads %v %+v", tc.body, cond, ops, wantCond, wantOps)
		}
	}
}

// FuzzPatchBodyReadWithoutReflectionAgreesWithEncodingJSON: whatever valid
// JSON body the reader without reflection accepts, encoding/json reads the
// same condition and operations from it, without an error.
func FuzzPatchBodyReadWithoutReflectionAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`[{"op":"incr","path":"/n","value":1}]`,
		`{"condition":"FROM c WHERE c.n > 1","operations":[{"op":"move","from":"/a","path":"/b"}]}`,
		` { "condition" : null , "operations" : [ { "op" : "add" , "path" : "/t\u00e9" , "value" : null } ] } `,
		`{"operations":[{"op":"set","path":"/a/b~1c","value":{"x":[1,"y",{"z":null}]}},{"op":"remove","path":"/d"}]}`,
		`{"operations":[{"op":"replace","path":"/\ud83d\ude00","value":"\"q\"\\"}]}`,
		`[{"op":"set","path":"/a","value":1},"x"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.TrimSpace(body)
		if len(body) == 0 || !json.Valid(body) {
			return
		}
		cond, ops, ok := readPatchBody(body)
		if !ok {
			return
		}
		wantCond, wantOps, err := unmarshalPatchBody(body)
		if err != nil {
			t.Fatalf("%s: read without reflection, but encoding/json fails: %v", body, err)
		}
		if !reflect.DeepEqual(cond, wantCond) || !reflect.DeepEqual(ops, wantOps) {
			t.Fatalf("%s: read %v %+v, encoding/json reads %v %+v", body, cond, ops, wantCond, wantOps)
		}
	})
}
