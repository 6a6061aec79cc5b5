package engine

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
)

// payloadCases are bodies at the edges of JSON's grammar and of what
// checkPayload refuses.
var payloadCases = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `1E-2`, `+1`, `-1.5e+10`,
	`tru`, `true`, `truex`, `nul`, `null`, `false`, `fals`, `{"a":1}x`, `{"a":1} `, ` {"a":1}`,
	`{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":}`, `[1,]`, `[1 2]`, `[,1]`, `{"a":1,"a":2}`, `{"a":1,"a":2`,
	`{"a":1,"a":2,}`, `{"a":1,"\u0061":2}`, `{"\ud800":1}`, `"\u00zz"`, `"\x"`, `"a` + "\x01" + `"`, "\"\xff\"",
	`"\/\b\f\n\r\t\"\\"`, `{"a":1e400}`, `{"a":1e400,"a":1}`, `{"a":[1e400]`, `[1e400,1e-400]`, `"\u12"`, `"\u123`,
	`{"id":"a","v":` + strings.Repeat("9", 400) + `}`, "{\"a\":\t1\r\n}", `[` + strings.Repeat(`{"k":1},`, 40) + `{"k":1,"k":2}]`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 9999) + `[]` + strings.Repeat("}", 9999),
	strings.Repeat(`{"a":`, 10000) + `[]` + strings.Repeat("}", 10000),
	// Strings long enough to be scanned eight bytes at a time, with what
	// stops that scan at each offset: text outside ASCII (valid, cut short,
	// a surrogate half), escapes, control characters, quotes.
	`{"id":"x","t":"abcdefghijklmnopqrstuvwxyz0123456789"}`, `{"id":"h\u00e9llo w\"orld, and more text","n":1}`,
	"{\"id\":\"caf\u00e9 au lait \u20ac 12345678\",\"\u00e9t\u00e9\":\"\U0001F600 abcdefgh\"}",
	"{\"id\":\"abcdefgh\xc3\",\"x\":1}", "{\"id\":\"abcdefgh\xed\xa0\x80ijklmnop\"}", "{\"id\":\"abcdefg\xf4\x90\x80\x80\"}",
	"{\"id\":\"abcdefghij\x7fklmnopq\x1f\"}", `{"abcdefghijklmnop":"qrstuvwx","abcdefghijklmnop":"y"}`,
	`{"id":"a","\u0069d2":"b","_rid":"c","\ud83d\ude00":[1,{"k":"v"}]}`,
	// Names the validator's scan tells plain or not: 0x7f (plain either
	// way: it decodes to itself), outside ASCII, bad UTF-8, escaped.
	"{\"a\x7fb\":1,\"\u00e9t\u00e9\":2,\"x\xffy\":3,\"x\xfey\":4,\"\\u0061\":5,\"a\\\\b\":6}",
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"kf":15,"kg":16,"kh":17}`,
}

// checkValidPayload fails when validPayload answers other than json.Valid
// and, on valid JSON, checkPayload; and when jsondoc.ParseValid's one scan
// answers other than json.Valid, utf8.Valid, checkPayload and
// jsondoc.ParseInto.
func checkValidPayload(t *testing.T, body []byte) {
	t.Helper()
	checkParseValid(t, body)
	valid, perr := validPayload(body)
	if want := json.Valid(body); valid != want {
		t.Fatalf("%.80q: valid %v, json.Valid %v", body, valid, want)
	}
	if !valid {
		return
	}
	want := checkPayload(body)
	if (perr == nil) != (want == nil) || perr != nil && perr.Message != want.Message {
		t.Fatalf("%.80q: %v, checkPayload %v", body, perr, want)
	}
}

// checkParseValid fails when jsondoc.ParseValid answers other than the
// scans it stands for: json.Valid, then utf8.Valid, checkPayload and
// jsondoc.ParseInto (the same properties, names and value bytes).
func checkParseValid(t *testing.T, body []byte) {
	t.Helper()
	var room [4]jsondoc.Field
	obj, scan := jsondoc.ParseValid(room[:0], body, len(room))
	if want := json.Valid(body); scan.Valid != want {
		t.Fatalf("%.80q: ParseValid valid %v, json.Valid %v", body, scan.Valid, want)
	}
	if !scan.Valid {
		if obj != nil {
			t.Fatalf("%.80q: not valid, yet %d properties", body, len(obj))
		}
		return
	}
	if want := utf8.Valid(body); scan.UTF8 != want {
		t.Fatalf("%.80q: ParseValid UTF-8 %v, utf8.Valid %v", body, scan.UTF8, want)
	}
	want := checkPayload(body)
	if (scan.Err == nil) != (want == nil) || scan.Err != nil && scan.Err.Error() != want.Message {
		t.Fatalf("%.80q: ParseValid %v, checkPayload %v", body, scan.Err, want)
	}
	wantObj, err := jsondoc.ParseInto(nil, body, 4)
	if scan.Object != (err == nil) {
		t.Fatalf("%.80q: ParseValid object %v, ParseInto %v", body, scan.Object, err)
	}
	if len(obj) != len(wantObj) {
		t.Fatalf("%.80q: ParseValid %d properties, ParseInto %d", body, len(obj), len(wantObj))
	}
	for i := range obj {
		if obj[i].Name != wantObj[i].Name || string(obj[i].Value) != string(wantObj[i].Value) {
			t.Fatalf("%.80q: property %d is %q: %s, ParseInto's %q: %s", body, i, obj[i].Name, obj[i].Value, wantObj[i].Name, wantObj[i].Value)
		}
	}
}

// One scan answers as json.Valid and then checkPayload answered, on the
// edges of the grammar.
func TestOneScanOfAPayloadAnswersAsJSONValidAndCheckPayload(t *testing.T) {
	for _, c := range payloadCases {
		checkValidPayload(t, []byte(c))
	}
	// And on mutations of them: a byte replaced, inserted or dropped, or
	// the body cut short, a few times over.
	r := rand.New(rand.NewPCG(25, 1))
	alphabet := []byte("{}[]:,\"\\/ 0123456789-+.eEtrufalsnu\t\n\x01\xff\x7f\xc3\xa9\xe2\x82\xac\xed")
	for range 50000 {
		c := payloadCases[r.IntN(len(payloadCases))]
		if len(c) > 200 {
			continue
		}
		b := []byte(c)
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
		checkValidPayload(t, b)
	}
}

func FuzzOneScanOfAPayloadAnswersAsJSONValidAndCheckPayload(f *testing.F) {
	for _, c := range payloadCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkValidPayload(t, body) })
}

// BenchmarkPayloadScan is the validity and payload checks of a write's
// body of about 300 bytes, as BenchmarkServer's upserts send: json.Valid
// then checkPayload (two scans), or validPayload (one); and with the
// UTF-8 check and the split into top-level properties an item write
// needs, validPayload, utf8.Valid and ParseInto (three scans) or
// jsondoc.ParseValid (one).
func BenchmarkPayloadScan(b *testing.B) {
	body := []byte(`{"id":"u1","pk":"p1","n":5,"tags":["a","b","c"],"nested":{"x":5,"y":"yy"},"payload":"` + strings.Repeat("x", 200) + `"}`)
	b.Run("json.Valid+checkPayload", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(body) || checkPayload(body) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("validPayload", func(b *testing.B) {
		for b.Loop() {
			if ok, perr := validPayload(body); !ok || perr != nil {
				b.Fatal("refused")
			}
		}
	})
	var room [8]jsondoc.Field
	b.Run("validPayload+utf8.Valid+ParseInto", func(b *testing.B) {
		for b.Loop() {
			if ok, perr := validPayload(body); !ok || perr != nil || !utf8.Valid(body) {
				b.Fatal("refused")
			}
			if _, err := jsondoc.ParseInto(room[:0], body, len(room)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParseValid", func(b *testing.B) {
		for b.Loop() {
			if obj, scan := jsondoc.ParseValid(room[:0], body, len(room)); !scan.Valid || !scan.UTF8 || scan.Err != nil || len(obj) != 6 {
				b.Fatal("refused")
			}
		}
	})
}
