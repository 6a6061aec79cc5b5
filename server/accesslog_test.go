package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// The access log line Observe formats itself is, byte for byte, the line
// slog's text handler writes for the same record: whatever the path, ids
// and fault name hold (spaces, quotes, '=', control characters, other
// scripts, invalid UTF-8), whatever the charge, duration and time zone.
func TestAccessLogLineIsWhatTheTextHandlerWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"", "a", "dbs/db/colls/c/docs/r1", " ", "=", `"`, `\`, "\t", "\n", "\x00", "\x7f", "é", "日本", "\u00a0", "\u2028",
		"\u200b", "\xff", "\xe2\x82", "🙂", "%2F", "?", "&", "docs.read", "0", "1001", "ü"}
	for c := range 128 { // every ASCII byte, alone and within a run
		pieces = append(pieces, string(rune(c)), "79fd0bda-b0c0-484e"+string(rune(c))+"-765d-0c0e095080a2")
	}
	str := func() string {
		var b strings.Builder
		for range r.IntN(4) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	charges := []float64{0, 1, 2.38, 5.71, 1e21, 1e-7, 123456789, math.NaN(), math.Inf(1), -0.5}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", -7*3600-1800), time.FixedZone("X", 5*3600+45*60)}
	var prev time.Time
	for i := range 6000 {
		a := accessLine{method: str(), path: str(), op: str(), status: r.IntN(600), substatus: str(),
			duration: time.Duration(r.Int64N(int64(3 * time.Second))).Round(time.Microsecond),
			charge:   charges[r.IntN(len(charges))], activity: str()}
		if i%3 == 0 {
			a.fault = str()
		}
		at := time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		switch {
		case i%2 == 1 && !prev.IsZero():
			// Lines of one second, and of the next: the second's
			// formatting is shared by its lines.
			at = prev.Add(time.Duration(r.Int64N(int64(1200 * time.Millisecond))))
		case i%97 == 0:
			// Years slog writes in its own way.
			at = time.Date(10000+r.IntN(5000), 3, 4, 5, 6, 7, r.IntN(1e9), zones[r.IntN(len(zones))])
		}
		prev = at
		if i%50 == 0 {
			at = time.Time{}
		} else if i%7 == 0 {
			at = time.Now() // with a monotonic reading
		}
		var want bytes.Buffer
		rec := slog.NewRecord(at, slog.LevelInfo, "request", 0)
		rec.AddAttrs(a.appendAttrs(nil)...)
		if err := slog.NewTextHandler(&want, nil).Handle(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		if got := appendAccessLine(nil, at, &a); string(got) != want.String() {
			t.Fatalf("%+v at %v:\n got %q\nwant %q", a, at, got, want.String())
		}
	}
}

// Observe formats the lines of a NewTextLogHandler logger itself, and
// leaves every other logger's lines to its handler: one with attributes of
// its own, or one that replaces attributes, still gets them.
func TestAccessLogOfADerivedLoggerKeepsItsAttributes(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	for _, tc := range []struct {
		name   string
		logger func(w io.Writer) *slog.Logger
		direct bool
		want   string
	}{
		{"text log handler", func(w io.Writer) *slog.Logger { return slog.New(NewTextLogHandler(w, nil)) }, true, " status=204 "},
		{"with attributes", func(w io.Writer) *slog.Logger { return slog.New(NewTextLogHandler(w, nil)).With("node", "n1") }, false, " node=n1 method=GET"},
		{"replacing attributes", func(w io.Writer) *slog.Logger {
			return slog.New(NewTextLogHandler(w, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == "path" {
					a.Value = slog.StringValue("hidden")
				}
				return a
			}}))
		}, false, " path=hidden "},
		{"level above info", func(w io.Writer) *slog.Logger {
			return slog.New(NewTextLogHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}, true, ""},
	} {
		var out syncBuffer
		h, err := Observe(next, ObserveOptions{AccessLog: tc.logger(&out)})
		if err != nil {
			t.Fatal(err)
		}
		if direct := h.(*observer).text != nil; direct != tc.direct {
			t.Errorf("%s: the observer formats the lines itself: %v, want %v", tc.name, direct, tc.direct)
		}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/dbs/db", nil))
		line := out.String()
		if tc.want == "" {
			if line != "" {
				t.Errorf("%s: a line below the handler's level: %q", tc.name, line)
			}
			continue
		}
		if !strings.Contains(line, tc.want) || !strings.HasPrefix(line, "time=") || strings.Count(line, "\n") != 1 {
			t.Errorf("%s: line %q, want one holding %q", tc.name, line, tc.want)
		}
	}
}

// textNeedsQuotingByteByByte is textNeedsQuoting as it was before it read
// eight bytes at a time.
func textNeedsQuotingByteByByte(s string) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !textPlain[c] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// TestTextNeedsQuotingIsTheByteByByteCheck holds the word-at-a-time check
// to the byte-at-a-time one: every byte value at every position of plain
// strings of 1 to 24 bytes, and random strings of plain bytes, bytes next
// to the word test's limits (0x20, 0x21, '"', '=', 0x7f, 0x80) and runes.
func TestTextNeedsQuotingIsTheByteByByteCheck(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := textNeedsQuoting(s), textNeedsQuotingByteByByte(s); got != want {
			t.Fatalf("textNeedsQuoting(%q) = %v, byte by byte %v", s, got, want)
		}
	}
	check("")
	for n := 1; n <= 24; n++ {
		plain := []byte(strings.Repeat("a", n))
		for i := range n {
			for c := range 256 {
				b := append([]byte(nil), plain...)
				b[i] = byte(c)
				check(string(b))
			}
		}
	}
	rng := rand.New(rand.NewPCG(25, 41))
	pieces := []string{"a", "Z", "0", "-", "/", "~", "!", "#", " ", "\x20", "\x21", "\"", "=", "\x7f", "\x80", "\xff",
		"\t", "\x00", "\x1f", "<", ">", "\\", "é", "\u00a0", "\u2028", "😀", "\ufffd", "\xc3", "\xe2\x80"}
	for range 200000 {
		var b strings.Builder
		for range rng.IntN(40) {
			if rng.IntN(4) == 0 {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			} else {
				b.WriteByte(byte(0x21 + rng.IntN(0x5f)))
			}
		}
		check(b.String())
	}
}
