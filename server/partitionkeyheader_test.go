package server

import (
	"bytes"
	"math/rand"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/orrery-db/orrery/engine"
)

// TestARequestsPartitionKeyIsItsHeaderHeldInTheRequest holds the request's
// reading of x-ms-documentdb-partitionkey: the key the engine parses from
// the header, whatever the header (plain strings, escapes, non-ASCII,
// numbers, booleans, null, undefined, several components, refused ones),
// and for the common plain string with no allocation of its own (it is
// held in the request); a key taken before the request parses its (one)
// header again keeps its value, so does the key of the request before,
// and an append to it does not write into the request.
func TestARequestsPartitionKeyIsItsHeaderHeldInTheRequest(t *testing.T) {
	rng := rand.New(rand.NewSource(25))
	plain := func() string {
		b := make([]byte, rng.Intn(40))
		for i := range b {
			b[i] = byte(' ' + rng.Intn(95))
			if b[i] == '"' || b[i] == '\\' {
				b[i] = 'q'
			}
		}
		return string(b)
	}
	headers := []string{`["a"]`, `[""]`, `["a\"b"]`, `["é"]`, `["\u00e9"]`, `[5]`, `[-1.5e3]`, `[true]`, `[false]`,
		`[null]`, `[{}]`, `[]`, `["a","b"]`, `["a",1,null]`, `not json`, `[[1]]`, `[{"a":1}]`, `["a"`, `"a"`}
	for i := 0; i < 2000; i++ {
		switch rng.Intn(4) {
		case 0:
			headers = append(headers, `[`+strconv.Quote(plain())+`]`)
		case 1:
			headers = append(headers, `["`+plain()+`"]`)
		case 2:
			headers = append(headers, `[`+strconv.Quote(plain())+`,`+strconv.Itoa(rng.Intn(100))+`]`)
		default:
			headers = append(headers, `[`+strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64)+`]`)
		}
	}
	var prev engine.PartitionKey
	var prevEnc []byte
	for _, h := range headers {
		hr := httptest.NewRequest("GET", "/dbs/d/colls/c/docs/x", nil)
		hr.Header["X-Ms-Documentdb-Partitionkey"] = []string{h}
		r := &request{Request: hr}
		want, werr := engine.ParsePartitionKeyHeader(h)
		got, has, gerr := r.partitionKey()
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("header %s: error %v, want %v", h, gerr, werr)
		}
		if werr != nil {
			continue
		}
		if !has || !got.Equal(want) || !bytes.Equal(got.Encode(), want.Encode()) || !bytes.Equal(got.EPK(), want.EPK()) {
			t.Fatalf("header %s: key %s (has %v), want %s", h, got, has, want)
		}
		if prev != nil && !bytes.Equal(prev.Encode(), prevEnc) {
			t.Fatalf("header %s: the key of the request before changed from %s to %s", h, prevEnc, prev.Encode())
		}
		again, _, _ := r.partitionKey()
		if !got.Equal(want) || !again.Equal(want) {
			t.Fatalf("header %s: parsed again, the keys are %s and %s, want %s", h, got, again, want)
		}
		grown := append(got, engine.StringKey("z")[0])
		if !got.Equal(want) || len(grown) != len(want)+1 {
			t.Fatalf("header %s: an append to the key changed it to %s", h, got)
		}
		prev, prevEnc = got, got.Encode()
	}
	hr := httptest.NewRequest("GET", "/dbs/d/colls/c/docs/x", nil)
	hr.Header["X-Ms-Documentdb-Partitionkey"] = []string{`["tenant-42"]`}
	r := &request{Request: hr}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = r.partitionKey() }); n != 0 {
		t.Fatalf("a plain string key took %v allocations, want 0 (held in the request)", n)
	}
}
