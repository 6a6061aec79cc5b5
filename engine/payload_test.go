package engine

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestCheckPayloadRefusesWhatParsersReadDifferently(t *testing.T) {
	many := `{`
	for i := 0; i < 40; i++ {
		many += `"k` + strconv.Itoa(i) + `":1,`
	}
	for _, tc := range []struct {
		body string
		want string // "" when accepted
	}{
		{`{"id":"a","v":1}`, ""},
		{`{"id":"a","v":1e308,"w":-1.7976931348623157e308,"u":1e-400}`, ""},
		{`{"id":"a","v":12345678901234567890123}`, ""},
		{` { "id" : "a" , "v" : [ 1 , 2 , { } , [ ] ] } `, ""},
		{`{"id":"a","v":1e400}`, "outside the range"},
		{`{"id":"a","v":-1e400}`, "outside the range"},
		{`{"id":"a","v":` + strings.Repeat("9", 400) + `}`, "(400 characters)"},
		{`{"id":"a","v":{"w":[1,[2,1E+309]]}}`, "outside the range"},
		{`{"id":"d1","id":"d2"}`, `"id" appears more than once`},
		{`{"id":"d1","i\u0064":"d2"}`, `"id" appears more than once`},
		{`{"id":"a","o":{"x":1,"y":{"x":2},"x":3}}`, `"x" appears more than once`},
		{`{"id":"a","o":[{"x":1},{"x":2}]}`, ""},
		{many + `"k7":2}`, `"k7" appears more than once`},
		{many + `"z":2}`, ""},
	} {
		if !json.Valid([]byte(tc.body)) {
			t.Fatalf("not valid JSON: %s", tc.body)
		}
		err := checkPayload([]byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%.60s: refused: %v", tc.body, err)
		case tc.want != "" && err == nil:
			t.Errorf("%.60s: accepted, want %q", tc.body, tc.want)
		case tc.want != "" && (err.Status != 400 || !strings.Contains(err.Message, tc.want)):
			t.Errorf("%.60s: %d %q, want 400 with %q", tc.body, err.Status, err.Message, tc.want)
		}
	}
}
