package server

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The Authorization header is decoded exactly as url.PathUnescape decodes
// it: the same bytes, and a refusal where it fails.
func TestAuthorizationHeaderIsUnescapedAsPathUnescapeDoes(t *testing.T) {
	cases := []string{"", "type%3Dmaster%26ver%3D1.0%26sig%3Dab%2Bc%2Fd%3D", "a+b", "%", "%4", "%4g", "%G1", "%%41", "x%41%61%7e", "%e2%82%ac", "sig=a b"}
	alphabet := "%0123456789abcdefABCDEFgG+=&/ "
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 4000 {
		n := r.IntN(12)
		if i%2 == 1 {
			n = r.IntN(130) // as long as a signed header, and longer
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		want, err := url.PathUnescape(s)
		got, ok := appendPathUnescape(nil, s)
		if ok != (err == nil) || (ok && string(got) != want) {
			t.Errorf("%q: got %q (ok %v), PathUnescape gives %q (%v)", s, got, ok, want, err)
		}
	}
}

// A date seen before is checked against the clock again: a request signed
// with it is refused once it is more than the allowed skew away.
func TestARepeatedDateIsCheckedAgainstTheClockEachTime(t *testing.T) {
	ring, err := newKeyRing(Keys{Master: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	signed := time.Now().UTC().Truncate(time.Second)
	date := signed.Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, "GET", "dbs", "dbs/db", date)
	req := httptest.NewRequest("GET", "/dbs/db", nil)
	req.Header.Set("X-Ms-Date", date)
	req.Header.Set("Authorization", auth)
	segs := splitPath(req.URL.Path)
	for _, at := range []struct {
		now  time.Time
		want access
	}{
		{signed, accessAll},
		{signed.Add(maxClockSkew + time.Second), accessNone},
		{signed.Add(time.Minute), accessAll},
		{signed.Add(-maxClockSkew - time.Second), accessNone},
	} {
		cred, aerr := ring.authenticate(req, segs, at.now)
		if cred.key != at.want || (aerr == nil) != (at.want != accessNone) {
			t.Errorf("at %v: access %v (%v), want %v", at.now, cred.key, aerr, at.want)
		}
		if at.want == accessNone && (aerr == nil || !strings.Contains(aerr.Message, "not valid at the current time")) {
			t.Errorf("at %v: %v, want the clock skew refusal", at.now, aerr)
		}
	}
	// Another date, then the first again: each is read as itself.
	other := signed.Add(-maxClockSkew - time.Minute).Format(http.TimeFormat)
	req2 := httptest.NewRequest("GET", "/dbs/db", nil)
	auth2, _ := Sign(EmulatorKey, "GET", "dbs", "dbs/db", other)
	req2.Header.Set("X-Ms-Date", other)
	req2.Header.Set("Authorization", auth2)
	if _, aerr := ring.authenticate(req2, segs, signed); aerr == nil {
		t.Errorf("a date %v before the clock was accepted", maxClockSkew+time.Minute)
	}
	if cred, aerr := ring.authenticate(req, segs, signed); aerr != nil || cred.key != accessAll {
		t.Errorf("the first date again: %v %v", cred.key, aerr)
	}
}

// A signature is base64 as encoding/base64 reads it, line breaks skipped,
// however long they make it: the same header is accepted with them.
func TestASignatureWithLineBreaksIsReadAsBase64Reads(t *testing.T) {
	ring, err := newKeyRing(Keys{Master: EmulatorKey})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	date := now.Format(http.TimeFormat)
	auth, _ := Sign(EmulatorKey, "GET", "dbs", "dbs/db", date)
	plain, _ := url.QueryUnescape(auth)
	at := strings.Index(plain, "sig=") + len("sig=")
	sig := plain[at:]
	for _, brk := range []string{"\n", "\r\n\r\n\r\n"} {
		var b strings.Builder
		for i := 0; i < len(sig); i++ {
			b.WriteByte(sig[i])
			b.WriteString(brk)
		}
		req := httptest.NewRequest("GET", "/dbs/db", nil)
		req.Header.Set("X-Ms-Date", date)
		req.Header.Set("Authorization", url.QueryEscape(plain[:at]+b.String()))
		if cred, aerr := ring.authenticate(req, splitPath(req.URL.Path), now); aerr != nil || cred.key != accessAll {
			t.Errorf("signature with %q between its characters: %v %v", brk, cred.key, aerr)
		}
	}
}
