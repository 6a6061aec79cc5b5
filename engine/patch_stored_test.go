package engine

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
)

// randomStoredItem writes an item as a store may hold it: an object of
// the system properties and random values, nested, with strings that
// stop the validator's eight-byte scan (escapes, text outside ASCII,
// quotes) at every offset, and numbers of every form.
func randomStoredItem(r *rand.Rand) []byte {
	var b strings.Builder
	var value func(depth int)
	str := func() {
		pieces := []string{"a", "bcdefghij", `\"`, `\\`, `\u00e9`, `\ud83d\ude00`, "\u00e9", "\u20ac", "\U0001F600", `\n`, `\/`, " ", "0123456789abcdef"}
		b.WriteByte('"')
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		b.WriteByte('"')
	}
	value = func(depth int) {
		k := r.IntN(9)
		if depth > 3 && k >= 7 {
			k = r.IntN(7)
		}
		switch k {
		case 0:
			b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
		case 1, 2:
			b.WriteString([]string{"0", "-0", "1", "-17", "1.5", "2e10", "-3.25E-3", "123456789012345678901234", "1e400"}[r.IntN(9)])
		case 3, 4, 5, 6:
			str()
		case 7:
			b.WriteByte('[')
			for i := range r.IntN(4) {
				if i > 0 {
					b.WriteByte(',')
				}
				value(depth + 1)
			}
			b.WriteByte(']')
		case 8:
			randomStoredObject(&b, r, depth+1, str, value)
		}
	}
	b.WriteString(`{"id":"i` + strconv.Itoa(r.IntN(100)) + `","pk":"p1","n":` + strconv.Itoa(r.IntN(1000)))
	for range r.IntN(8) {
		b.WriteString(",")
		str()
		b.WriteString(":")
		value(1)
	}
	b.WriteString(`,"_rid":"AAAAAAAAAAABAAAAAAAAAA==","_self":"dbs/x/colls/y/docs/z/","_etag":"\"00000000-0000-0000-0000-000000000000\"","_attachments":"attachments/","_ts":1700000000}`)
	return []byte(b.String())
}

func randomStoredObject(b *strings.Builder, r *rand.Rand, depth int, str func(), value func(int)) {
	b.WriteByte('{')
	for i := range r.IntN(4) {
		if i > 0 {
			b.WriteByte(',')
		}
		str()
		b.WriteByte(':')
		value(depth)
	}
	b.WriteByte('}')
}

// mutate changes b a few times: a byte replaced, inserted or dropped, or
// the body cut short.
func mutateStored(r *rand.Rand, b []byte) []byte {
	alphabet := []byte("{}[]:,\"\\/ 0123456789-+.eEtrufalsnu\t\n\x01\xff\x7f\xc3\xa9\xe2\x82\xac\xed")
	b = append([]byte(nil), b...)
	for range 1 + r.IntN(3) {
		at := 0
		if len(b) > 0 {
			at = r.IntN(len(b))
		}
		switch ch := alphabet[r.IntN(len(alphabet))]; r.IntN(4) {
		case 0:
			if len(b) > 0 {
				b[at] = ch
			}
		case 1:
			b = append(b[:at], append([]byte{ch}, b[at:]...)...)
		case 2:
			if len(b) > 0 {
				b = append(b[:at], b[at+1:]...)
			}
		case 3:
			b = b[:at]
		}
	}
	return b
}

// storedItemCases are the bodies the stored-item tests start from: the
// payload cases and random items, valid and mutated.
func storedItemCases(r *rand.Rand, n int) [][]byte {
	var cases [][]byte
	for _, c := range payloadCases {
		cases = append(cases, []byte(c))
	}
	for range n {
		doc := randomStoredItem(r)
		cases = append(cases, doc)
		if r.IntN(2) == 0 {
			cases = append(cases, mutateStored(r, doc))
		} else {
			c := payloadCases[r.IntN(len(payloadCases))]
			if len(c) <= 200 {
				cases = append(cases, mutateStored(r, []byte(c)))
			}
		}
	}
	return cases
}

// checkDecodeGate fails when jsondoc.Valid answers other than json.Valid,
// or when Decode or DecodeLazy refuse other than the bodies json.Valid
// refuses (the gate they had before jsondoc.Valid stood for it).
func checkDecodeGate(t *testing.T, b []byte) {
	t.Helper()
	want := json.Valid(b)
	if got := jsondoc.Valid(b); got != want {
		t.Fatalf("%.120q: jsondoc.Valid %v, json.Valid %v", b, got, want)
	}
	if _, err := jsondoc.Decode(b); (err == nil) != want {
		t.Fatalf("%.120q: Decode %v, json.Valid %v", b, err, want)
	}
	if _, err := jsondoc.DecodeLazy(b); (err == nil) != want {
		t.Fatalf("%.120q: DecodeLazy %v, json.Valid %v", b, err, want)
	}
}

// A stored item and an operation's value are decoded exactly when
// json.Valid holds them valid, on the grammar's edges, random items and
// mutations of both.
func TestStoredItemsAreDecodedExactlyWhenJSONValidHoldsThem(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 25))
	for _, b := range storedItemCases(r, 60000) {
		checkDecodeGate(t, b)
	}
}

// A patch refuses a stored item as not valid JSON exactly when json.Valid
// does, with the same text, and patches every other as before: incr of
// /n on random items and their mutations.
func TestAPatchRefusesAStoredItemExactlyWhenJSONValidDoes(t *testing.T) {
	p, err := ParsePatch([]byte(`{"operations":[{"op":"incr","path":"/n","value":1},{"op":"set","path":"/s","value":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pk := &PartitionKeyDefinition{Paths: []string{"/pk"}}
	r := rand.New(rand.NewPCG(41, 26))
	for _, doc := range storedItemCases(r, 20000) {
		out, e := applyPatch(doc, p.Operations, pk)
		if !json.Valid(doc) {
			if e == nil || e.Message != "The stored item is not valid JSON: not a single valid JSON value" {
				t.Fatalf("%.120q: json.Valid refuses it, the patch answers %v", doc, e)
			}
			continue
		}
		if e != nil && strings.HasPrefix(e.Message, "The stored item is not valid JSON") {
			t.Fatalf("%.120q: json.Valid takes it, the patch answers %v", doc, e)
		}
		if e == nil && !json.Valid(out) {
			t.Fatalf("%.120q: patched into %.120q, not valid JSON", doc, out)
		}
	}
}

func FuzzStoredItemsAreDecodedExactlyWhenJSONValidHoldsThem(f *testing.F) {
	r := rand.New(rand.NewPCG(41, 27))
	for _, b := range storedItemCases(r, 50) {
		if len(b) < 1000 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeGate(t, b) })
}
