package jsondoc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestParseValidWithoutSystemIsParseValidThenDropSystem: on random bodies
// (system names plain and escaped, "_colls" and the like, names that only
// begin as one, repeated names, up to 20 properties, invalid JSON, a
// name json.Unmarshal refuses, arrays), ParseValidWithoutSystem answers
// as ParseValid followed by DropSystem, the write path's two steps: the
// same scan and the same properties, names and value bytes.
func TestParseValidWithoutSystemIsParseValidThenDropSystem(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	names := []string{"id", "pk", "n", "_rid", "_self", "_etag", "_attachments", "_ts", "_lsn", "_colls", "_docs",
		`\u005frid`, `_r\u0069d`, "_", "_x", "_rid2", "rid", "payload", `a\"b`, "é", "\xff", `\ud800`}
	values := []string{`1`, `"x"`, `{"_rid":1}`, `[1,2]`, `null`, `"` + strings.Repeat("v", 30) + `"`, `1e400`, `01`}
	dropped := 0
	for n := 0; n < 50000; n++ {
		var s strings.Builder
		if rng.IntN(20) == 0 {
			s.WriteByte('[')
		} else {
			s.WriteByte('{')
		}
		for k := range rng.IntN(20) {
			if k > 0 {
				s.WriteByte(',')
			}
			s.WriteString(`"` + names[rng.IntN(len(names))] + `":` + values[rng.IntN(len(values))])
		}
		switch rng.IntN(20) {
		case 0:
			s.WriteString(`,`)
		case 1:
			s.WriteString(`}}`)
		default:
			s.WriteByte('}')
		}
		b := []byte(s.String())
		room := rng.IntN(12)
		want, wantScan := ParseValid(make(Object, 0, room), b, 8)
		want = want.DropSystem()
		got, gotScan := ParseValidWithoutSystem(make(Object, 0, room), b, 8, nil)
		if gotScan.Valid != wantScan.Valid || gotScan.UTF8 != wantScan.UTF8 || gotScan.Object != wantScan.Object ||
			(gotScan.Err == nil) != (wantScan.Err == nil) || gotScan.Err != nil && gotScan.Err.Error() != wantScan.Err.Error() {
			t.Fatalf("%s: scan %+v, ParseValid's %+v", b, gotScan, wantScan)
		}
		if len(got) != len(want) || cap(got) != len(got) {
			t.Fatalf("%s: %d properties (cap %d), ParseValid and DropSystem %d", b, len(got), cap(got), len(want))
		}
		for k := range got {
			if got[k].Name != want[k].Name || string(got[k].Value) != string(want[k].Value) {
				t.Fatalf("%s: property %d is %q: %s, ParseValid and DropSystem's %q: %s", b, k, got[k].Name, got[k].Value, want[k].Name, want[k].Value)
			}
		}
		if wantScan.Object {
			all, _ := ParseValid(nil, b, 8)
			dropped += len(all) - len(want)
		}
	}
	if dropped < 10000 {
		t.Fatalf("only %d system properties dropped", dropped)
	}
}

// TestAWrittenBackItemsPropertiesFitItsRoom: a body with eight properties
// of its own and the five system ones a client writes back (the read
// before a replace, a patched stored record) is listed in an array of
// eight: one allocation, the string of its names; ParseValid and
// DropSystem made a second, a larger array.
func TestAWrittenBackItemsPropertiesFitItsRoom(t *testing.T) {
	var s strings.Builder
	s.WriteByte('{')
	for k := range 8 {
		s.WriteString(`"p` + strconv.Itoa(k) + `":` + strconv.Itoa(k) + `,`)
	}
	s.WriteString(`"_rid":"AAAAAAAAAAABAAAAAAAAAA==","_self":"dbs/AAAAAA==/colls/AAAAAAAAAAA=/docs/AAAAAAAAAAABAAAAAAAAAA==/","_etag":"\"00000000-0000-0000-0000-000000000001\"","_attachments":"attachments/","_ts":1767322000}`)
	b := []byte(s.String())
	dst := make(Object, 0, 8)
	if a := testing.AllocsPerRun(100, func() {
		if obj, scan := ParseValidWithoutSystem(dst, b, 8, nil); !scan.Object || len(obj) != 8 {
			t.Fatal(scan, len(obj))
		}
	}); a != 1 {
		t.Errorf("ParseValidWithoutSystem allocated %v times, want 1 (the names' string)", a)
	}
	if a := testing.AllocsPerRun(100, func() {
		obj, _ := ParseValid(dst, b, 8)
		_ = obj.DropSystem()
	}); a != 2 {
		t.Errorf("ParseValid and DropSystem allocated %v times, the test expects 2 (the names' string, the grown array)", a)
	}
}

// FuzzParseValidWithoutSystemIsParseValidThenDropSystem is
// TestParseValidWithoutSystemIsParseValidThenDropSystem on the fuzzer's
// bodies.
func FuzzParseValidWithoutSystemIsParseValidThenDropSystem(f *testing.F) {
	f.Add([]byte(`{"id":"a","_rid":"x","_ts":1,"n":2}`))
	f.Add([]byte(`{"\u005frid":1,"_colls":2,"_rid2":3,"_":4}`))
	f.Add([]byte(`{"_etag":1,"_etag":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantScan := ParseValid(nil, b, 8)
		want = want.DropSystem()
		got, gotScan := ParseValidWithoutSystem(nil, b, 8, nil)
		if gotScan.Valid != wantScan.Valid || gotScan.UTF8 != wantScan.UTF8 || gotScan.Object != wantScan.Object ||
			(gotScan.Err == nil) != (wantScan.Err == nil) || gotScan.Err != nil && gotScan.Err.Error() != wantScan.Err.Error() {
			t.Fatalf("%s: scan %+v, ParseValid's %+v", b, gotScan, wantScan)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d properties, ParseValid and DropSystem %d", b, len(got), len(want))
		}
		for k := range got {
			if got[k].Name != want[k].Name || string(got[k].Value) != string(want[k].Value) {
				t.Fatalf("%s: property %d is %q: %s, ParseValid and DropSystem's %q: %s", b, k, got[k].Name, got[k].Value, want[k].Name, want[k].Value)
			}
		}
	})
}

// TestParseValidWithoutSystemTakesTheNamesItIsGiven: given names, the parse
// lists the same properties as without them, each plain name that is one
// of names' that very string (no copy), and NewNames reports exactly
// whether some listed name is not taken from them.
func TestParseValidWithoutSystemTakesTheNamesItIsGiven(t *testing.T) {
	pool := []string{"id", "pk", "n", "tags", "_ts", "_etag", "a\\u0062", "é", "long name with spaces", "x"}
	rng := rand.New(rand.NewPCG(43, 9))
	body := func() []byte {
		var s strings.Builder
		s.WriteByte('{')
		used := map[string]bool{}
		for k := range rng.IntN(7) {
			name := pool[rng.IntN(len(pool))]
			if used[name] {
				continue
			}
			used[name] = true
			if k > 0 && s.Len() > 1 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, "%q:%d", name, k)
		}
		s.WriteByte('}')
		return []byte(strings.ReplaceAll(s.String(), `\\u`, `\u`))
	}
	for range 2000 {
		names, _ := ParseValidWithoutSystem(nil, body(), 8, nil)
		b := body()
		want, wantScan := ParseValidWithoutSystem(nil, b, 8, nil)
		got, gotScan := ParseValidWithoutSystem(nil, b, 8, names)
		if gotScan.Valid != wantScan.Valid || gotScan.Object != wantScan.Object || len(got) != len(want) {
			t.Fatalf("%s: %d properties (%+v), without names %d (%+v)", b, len(got), gotScan, len(want), wantScan)
		}
		anyNew := false
		for k := range got {
			if got[k].Name != want[k].Name || string(got[k].Value) != string(want[k].Value) {
				t.Fatalf("%s: property %d %q: %s, without names %q: %s", b, k, got[k].Name, got[k].Value, want[k].Name, want[k].Value)
			}
			j := slices.IndexFunc(names, func(f Field) bool { return f.Name == got[k].Name })
			// "ab" is always escaped and "é" not ASCII: not plain, decoded.
			if j < 0 || got[k].Name == "ab" || !IsPlainText(got[k].Name) {
				anyNew = true
			} else if unsafe.StringData(names[j].Name) != unsafe.StringData(got[k].Name) {
				t.Fatalf("%s: name %q is a copy, not names' string", b, got[k].Name)
			}
		}
		if gotScan.NewNames != anyNew {
			t.Fatalf("%s with names %v: NewNames %v, a name not among them %v", b, names, gotScan.NewNames, anyNew)
		}
	}
}
