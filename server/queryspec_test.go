package server

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestAQueryBodyReadsAsUnmarshalReadsIt holds decodeQuerySpec (the scan of
// plain bodies) equal to json.Unmarshal into a querySpec, over the bodies
// the SDKs send, hostile ones (case-variant and escaped names, which
// Unmarshal matches case-insensitively; repeated names; other types; null;
// values of every kind) and random ones, some damaged: the same querySpec
// (query, parameters, their raw values) and the same error.
func TestAQueryBodyReadsAsUnmarshalReadsIt(t *testing.T) {
	check := func(body string) {
		t.Helper()
		want := new(querySpec)
		werr := json.Unmarshal([]byte(body), want)
		got, gerr := decodeQuerySpec([]byte(body), json.Valid([]byte(body)))
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("%q: error %v, Unmarshal's %v", body, gerr, werr)
		}
		if werr == nil && (got.Query != want.Query || !reflect.DeepEqual(got.Parameters, want.Parameters)) {
			t.Fatalf("%q:\n got %#v\nwant %#v", body, got, want)
		}
	}
	for _, b := range []string{
		`{"query":"SELECT * FROM c WHERE c.n = @n","parameters":[{"name":"@n","value":42}]}`,
		`{"query":"SELECT * FROM c"}`,
		`{"query":"SELECT * FROM c","parameters":[]}`,
		`{"query":"SELECT * FROM c","parameters":null}`,
		`{"parameters":[{"name":"@a","value":{"x":[1,"]",{"y":"}"}]}},{"value":null,"name":"@b"},{"name":"@c"},{}],"query":"q"}`,
		` { "query" : "q" , "parameters" : [ { "name" : "@a" , "value" : [ 1 , 2 ] } , { "name" : "@b" , "value" : "s" } ] } `,
		`{"query":"q","parameters":[{"name":"@a","value":1e400}]}`,
		`{"query":"a\"b\\c\u00e9\ud83d\ude00\/","parameters":[{"name":"@\u0061","value":"\u0000"}]}`,
		"{\"query\":\"bad\xffutf8\",\"parameters\":[{\"name\":\"\xc3\",\"value\":\"\xff\"}]}",
		`{"Query":"case variant"}`, `{"QUERY":"q","query":"r"}`, `{"query":"q","QUERY":"r"}`,
		`{"query":"q","Parameters":[{"name":"@a","value":1}]}`,
		`{"query":"q","parameters":[{"NAME":"@a","Value":1}]}`,
		`{"query":"q","parameters":[{"name":"@a","value":1,"name":"@b"}]}`,
		`{"query":"q","parameters":[{"name":"@a","value":1,"value":2}]}`,
		`{"query":"q","query":"r"}`,
		`{"query":"q","parameters":[{"name":"@a","value":1}],"parameters":[{"name":"@b"}]}`,
		`{"qu\u0065ry":"escaped name"}`, `{"query":"q","par\u0061meters":[{"name":"@a","value":1}]}`,
		`{"query":"q","parameters":[{"n\u0061me":"@a","value":1}]}`,
		`{"query":5}`, `{"query":null}`, `{"query":["q"]}`, `{"query":"q","parameters":{}}`,
		`{"query":"q","parameters":"p"}`, `{"query":"q","parameters":[1]}`, `{"query":"q","parameters":[null]}`,
		`{"query":"q","parameters":[{"name":1,"value":1}]}`, `{"query":"q","parameters":[{"name":null}]}`,
		`{"query":"q","other":1}`, `{"query":"q","":1}`,
		`{}`, `null`, `[]`, `"q"`, `1`, ``, ` `, `{`, `{"query":"q"`, `{"query":"q"} x`, `{"query":"q",}`,
		`{"query":"q"}{"query":"r"}`, `{'query':'q'}`, "{\"query\":\"a\x01\"}",
	} {
		check(b)
	}
	rng := rand.New(rand.NewPCG(25, 41))
	names := []string{"query", "parameters", "Query", "PARAMETERS", "qu\\u0065ry", "other"}
	pnames := []string{"name", "value", "Name", "VALUE", "n\\u0061me", "x"}
	strs := []string{`""`, `"q"`, `"SELECT * FROM c"`, `"@n"`, `"a\"b"`, `"\u00e9"`, `"\/"`, "\"\xff\"", `"é"`}
	values := []string{"0", "-1.5", "1e400", "true", "null", `{"a":[1,{"b":"]"}]}`, "[]", "{}", `"v"`, `[1,"}",null]`}
	ws := func() string { return []string{"", "", " ", "\n\t"}[rng.IntN(4)] }
	for range 20000 {
		var b strings.Builder
		b.WriteString(ws() + "{")
		for j := range rng.IntN(4) {
			if j > 0 {
				b.WriteString(ws() + ",")
			}
			name := names[rng.IntN(len(names))]
			if rng.IntN(2) == 0 {
				name = names[rng.IntN(2)]
			}
			b.WriteString(ws() + `"` + name + `"` + ws() + ":" + ws())
			switch k := rng.IntN(10); {
			case k < 3:
				b.WriteString(strs[rng.IntN(len(strs))])
			case k < 8:
				b.WriteString("[")
				for m := range rng.IntN(4) {
					if m > 0 {
						b.WriteString(ws() + "," + ws())
					}
					if rng.IntN(10) == 0 {
						b.WriteString(values[rng.IntN(len(values))])
						continue
					}
					b.WriteString("{")
					for n := range rng.IntN(4) {
						if n > 0 {
							b.WriteString(",")
						}
						pn := pnames[rng.IntN(len(pnames))]
						if rng.IntN(2) == 0 {
							pn = pnames[rng.IntN(2)]
						}
						v := values[rng.IntN(len(values))]
						if rng.IntN(2) == 0 {
							v = strs[rng.IntN(len(strs))]
						}
						b.WriteString(ws() + `"` + pn + `"` + ws() + ":" + ws() + v + ws())
					}
					b.WriteString("}")
				}
				b.WriteString(ws() + "]")
			default:
				b.WriteString(values[rng.IntN(len(values))])
			}
		}
		b.WriteString(ws() + "}" + ws())
		body := []byte(b.String())
		if rng.IntN(20) == 0 {
			i := rng.IntN(len(body))
			switch rng.IntN(3) {
			case 0:
				body = body[:i]
			case 1:
				body[i] = "{}[]\",: x\\"[rng.IntN(10)]
			default:
				body = append(body, "} ,x"[rng.IntN(4)])
			}
		}
		check(string(body))
	}
}

// TestAQueryBodysFirstParametersAreHeldInItsSpec holds the scan's reading
// of the parameters the SDKs send (one or two, mostly) into the spec's own
// array: past the spec and the query text, each parameter costs only its
// name and value, and what is read is what json.Unmarshal reads.
func TestAQueryBodysFirstParametersAreHeldInItsSpec(t *testing.T) {
	bare := []byte(`{"query":"SELECT * FROM c WHERE c.n = @n"}`)
	two := []byte(`{"query":"SELECT * FROM c WHERE c.n = @n","parameters":[{"name":"@n","value":42},{"name":"@s","value":"x"}]}`)
	allocs := func(b []byte) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := decodeQuerySpec(b, true); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a0, a2 := allocs(bare), allocs(two); a2 != a0+4 {
		t.Errorf("two parameters took %v allocations past the %v of a body without them, want 4 (a name and a value each)", a2-a0, a0)
	}
	got, err := decodeQuerySpec(two, true)
	if err != nil {
		t.Fatal(err)
	}
	want := new(querySpec)
	if err := json.Unmarshal(two, want); err != nil {
		t.Fatal(err)
	}
	if got.Query != want.Query || !reflect.DeepEqual(got.Parameters, want.Parameters) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
