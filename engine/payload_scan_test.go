package engine

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
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
}

// checkValidPayload fails when validPayload answers other than json.Valid
// and, on valid JSON, checkPayload.
func checkValidPayload(t *testing.T, body []byte) {
	t.Helper()
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

// One scan answers as json.Valid and then checkPayload answered, on the
// edges of the grammar.
func TestOneScanOfAPayloadAnswersAsJSONValidAndCheckPayload(t *testing.T) {
	for _, c := range payloadCases {
		checkValidPayload(t, []byte(c))
	}
	// And on mutations of them: a byte replaced, inserted or dropped, or
	// the body cut short, a few times over.
	r := rand.New(rand.NewPCG(25, 1))
	alphabet := []byte("{}[]:,\"\\/ 0123456789-+.eEtrufalsnu\t\n\x01\xff")
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
// then checkPayload (two scans), or validPayload (one).
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
}
