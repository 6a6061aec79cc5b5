package jsondoc

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestCheckRefusesWhatParsersReadDifferently: a number beyond a double's
// range and a property named twice in one object (its name decoded, past
// the first sixteen names too) are refused in the service's words; numbers
// that fit or underflow, big integers and the same name in sibling objects
// are accepted.
func TestCheckRefusesWhatParsersReadDifferently(t *testing.T) {
	many := `{`
	for i := range 40 {
		many += `"k` + strconv.Itoa(i) + `":1,`
	}
	for _, tc := range []struct {
		body string
		want string // "" when accepted
	}{
		{`{"id":"a","v":1}`, ""},
		{`[1,"x",true,false,null,{}]`, ""},
		{`{"id":"a","v":1e308,"w":-1.7976931348623157e308,"u":1e-400}`, ""},
		{`{"id":"a","v":12345678901234567890123}`, ""},
		{` { "id" : "a" , "v" : [ 1 , 2 , { } , [ ] ] } `, ""},
		{`{"id":"a","v":1e400}`, "the number 1e400 is outside the range"},
		{`[-1e400]`, "outside the range"},
		{`{"id":"a","v":` + strings.Repeat("9", 400) + `}`, "(400 characters)"},
		{`{"id":"a","v":{"w":[1,[2,1E+309]]}}`, "outside the range"},
		{`{"id":"d1","id":"d2"}`, `the property name "id" appears more than once in one object.`},
		{`{"id":"d1","i\u0064":"d2"}`, `"id" appears more than once`},
		{`{"id":"a","o":{"x":1,"y":{"x":2},"x":3}}`, `"x" appears more than once`},
		{`{"id":"a","o":[{"x":1},{"x":2}]}`, ""},
		{many + `"k7":2}`, `"k7" appears more than once`},
		{many + `"z":2}`, ""},
	} {
		if !json.Valid([]byte(tc.body)) {
			t.Fatalf("not valid JSON: %s", tc.body)
		}
		err := Check([]byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%.60s: refused: %v", tc.body, err)
		case tc.want != "" && err == nil:
			t.Errorf("%.60s: accepted, want %q", tc.body, tc.want)
		case tc.want != "" && (!strings.Contains(err.Error(), tc.want) ||
			!strings.HasPrefix(err.Error(), "The request payload is invalid: ") ||
			!strings.HasSuffix(err.Error(), " Ensure to provide a valid request payload.")):
			t.Errorf("%.60s: %q, want the service's message with %q", tc.body, err, tc.want)
		}
	}
}
