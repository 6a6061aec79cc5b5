package jsondoc

import (
	"bytes"
	"slices"
	"testing"
)

// TestNextFieldAndParseIntoListWhatParseLists: reading an object's
// properties in place with NextField, or parsing it into the array of an
// earlier parse, gives Parse's properties (names decoded alike, values the
// same bytes, in order), for escaped, non-ASCII, repeated and spaced names.
func TestNextFieldAndParseIntoListWhatParseLists(t *testing.T) {
	var dst Object
	for _, doc := range []string{
		`{}`, ` { } `,
		`{"a":1,"b":{"c":[1,2]},"a":"x"}`,
		` { "a" : 1 , "b\u00e9" :"s\"q" ,"x~/y":null,"été":true, "t\/u" : {} } `,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"17":17,"18":18}`,
	} {
		want, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var got Object
		b := []byte(doc)
		for i := SkipSpace(b, 0) + 1; ; {
			name, v, next, ok, err := NextField(b, i)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, Field{Name: string(name), Value: v})
			i = next
		}
		same := func(a, b Field) bool { return a.Name == b.Name && bytes.Equal(a.Value, b.Value) }
		if !slices.EqualFunc(got, want, same) {
			t.Errorf("%s: NextField lists %q, Parse %q", doc, got, want)
		}
		into, err := ParseInto(dst, b, 4)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(into, want, same) || (into == nil) != (want == nil) {
			t.Errorf("%s: ParseInto lists %q, Parse %q", doc, into, want)
		}
		if len(into) > 0 && cap(dst) >= len(into) && &into[0] != &dst[:1][0] {
			t.Errorf("%s: ParseInto did not use the array it was given", doc)
		}
		if cap(into) > 0 {
			dst = into[:0]
		}
	}
}
