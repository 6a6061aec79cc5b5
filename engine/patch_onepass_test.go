package engine

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
)

// randomPatchArray writes an array of 0 to 14 operations: most of the
// SDKs' shape, some hostile (not objects, keys in another case, unknown
// or repeated keys, values of another type, escaped keys), with spaces
// anywhere JSON allows them.
func randomPatchArray(r *rand.Rand) []byte {
	sp := func() string { return []string{"", "", " ", "\n\t", "  "}[r.IntN(5)] }
	good := []string{
		`{"op":"incr","path":"/n","value":1}`, `{"op":"set","path":"/a/b~1c","value":{"x":[1,"y"]}}`,
		`{"op":"remove","path":"/d"}`, `{"op":"move","from":"/a","path":"/b"}`, `{"op":"add","path":"/t\u00e9","value":null}`,
		`{"path":"/n","op":"replace","value":"\"q\""}`, `{}`, `{"op":"incr","path":"/n","value":null}`,
		`{"op":"incr","path":"/n","value":"1"}`, `{"op":"bogus","path":"n","value":1}`,
	}
	hostile := []string{
		`null`, `"x"`, `5`, `[]`, `{"OP":"incr","path":"/n","value":1}`, `{"op":"set","path":"/a","value":1,"op":"add"}`,
		`{"op":5,"path":"/n"}`, `{"op":null,"path":"/n"}`, `{"op":"set","path":"/a","extra":1}`, `{"o\u0070":"set","path":"/a","value":1}`,
		"{\"op\":\"set\",\"path\":\"/\xff\",\"value\":1}",
	}
	var b strings.Builder
	b.WriteString("[" + sp())
	for i := range r.IntN(15) {
		if i > 0 {
			b.WriteString(sp() + "," + sp())
		}
		if r.IntN(8) == 0 {
			b.WriteString(hostile[r.IntN(len(hostile))])
		} else {
			b.WriteString(strings.ReplaceAll(good[r.IntN(len(good))], ",", sp()+","+sp()))
		}
	}
	b.WriteString(sp() + "]")
	return []byte(b.String())
}

// checkOnePass fails when readPatchOperations answers other than
// readManyPatchOperations (operations counted first, the reading before
// the one pass), or, as a body, other than encoding/json.
func checkOnePass(t *testing.T, arr []byte) {
	t.Helper()
	ops, end, ok := readPatchOperations(arr)
	want, wantOK := readManyPatchOperations(arr)
	if ok != wantOK || !reflect.DeepEqual(ops, want) {
		t.Fatalf("%s: one pass %v %+v, counted first %v %+v", arr, ok, ops, wantOK, want)
	}
	if ok && end != jsondoc.SkipValue(arr, 0) {
		t.Fatalf("%s: one pass ends at %d, the array at %d", arr, end, jsondoc.SkipValue(arr, 0))
	}
	for _, body := range [][]byte{
		arr,
		append(append([]byte(`{"operations":`), arr...), '}'),
		append(append([]byte(`{ "operations" : `), arr...), []byte(` , "condition" : "FROM c WHERE c.n > 1" }`)...),
		append(append([]byte(`{"condition":null,"operations":`), arr...), []byte(`,"operations":null}`)...),
		append(append([]byte(`{"condition":"x","operation\u0073":`), arr...), '}'),
	} {
		cond, ops, ok := readPatchBody(body)
		// Read without reflection whenever its array is, but with
		// "operations" twice.
		if fast := wantOK && !bytes.Contains(body, []byte(`"operations":null}`)); ok != fast {
			t.Fatalf("%s: read without reflection %v, want %v", body, ok, fast)
		}
		if !ok {
			continue
		}
		wantCond, wantOps, err := unmarshalPatchBody(body)
		if err != nil || !reflect.DeepEqual(cond, wantCond) || !reflect.DeepEqual(ops, wantOps) {
			t.Fatalf("%s: read %v %+v, encoding/json reads %v %+v (%v)", body, cond, ops, wantCond, wantOps, err)
		}
	}
}

// Operations read in one pass (up to MaxPatchOperations, on the stack)
// are those read counted first, and the same arrays are refused: random
// and hostile arrays of 0 to 14 operations.
func TestPatchOperationsReadInOnePassAreThoseCountedFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 28))
	for range 30000 {
		checkOnePass(t, randomPatchArray(r))
	}
}

// ParsePatch's answers, through the one pass, on the requests it refuses
// or takes at the edges of the count: 0, 10 and 11 operations, a bad
// one before and after the tenth.
func TestPatchRequestsAtTheOperationsLimitAnswerAsBefore(t *testing.T) {
	op := `{"op":"incr","path":"/n","value":1}`
	ops := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(op+",", n), ",") + "]" }
	for _, tc := range []struct{ body, want string }{
		{ops(0), "The patch request has no operations: send between 1 and 10."},
		{ops(10), ""},
		{ops(11), "The number of patch operations can't exceed 10: this request has 11."},
		{`{"operations":` + ops(14) + `}`, "The number of patch operations can't exceed 10: this request has 14."},
		{strings.Replace(ops(11), `"value":1}]`, `"value":null}]`, 1), "The number of patch operations can't exceed 10: this request has 11."},
		{strings.Replace(ops(10), `"value":1}]`, `"value":null}]`, 1), "For Operation(10): incr needs a number, not null."},
		{strings.Replace(ops(10), `"op":"incr"`, `"op":"inc"`, 1), `For Operation(1): "inc" is not a patch operation: use add, set, replace, remove, incr or move.`},
	} {
		p, err := ParsePatch([]byte(tc.body))
		got := ""
		if err != nil {
			got = err.(*Error).Message
		}
		if got != tc.want {
			t.Errorf("%.60s…: %q, want %q", tc.body, got, tc.want)
		}
		if err == nil && len(p.Operations) != 10 {
			t.Errorf("%.60s…: %d operations", tc.body, len(p.Operations))
		}
	}
}

func FuzzPatchOperationsReadInOnePassAreThoseCountedFirst(f *testing.F) {
	r := rand.New(rand.NewPCG(41, 29))
	for range 20 {
		f.Add(randomPatchArray(r))
	}
	f.Fuzz(func(t *testing.T, arr []byte) {
		arr = bytes.TrimSpace(arr)
		if len(arr) == 0 || arr[0] != '[' || !json.Valid(arr) {
			return
		}
		checkOnePass(t, arr)
	})
}
