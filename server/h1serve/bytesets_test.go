package h1serve

import (
	"net/url"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// parseWhole takes a method or header key only of bytes net/http takes as
// a token, and a path only of bytes url.URL keeps as they are: for every
// byte, the tables agree with net/http and net/url themselves.
func TestTheWholeHeadsByteSetsAreNetHTTPsOwn(t *testing.T) {
	for b := range 256 {
		if got, want := tokenBytes[b], httpguts.IsTokenRune(rune(b)); got != want {
			t.Errorf("tokenBytes[%q] = %v, net/http's token: %v", rune(b), got, want)
		}
		u, err := url.ParseRequestURI("/a" + string(rune(b)))
		kept := err == nil && u.Path == "/a"+string(rune(b)) && u.RawPath == "" && u.EscapedPath() == "/a"+string(rune(b)) && u.RawQuery == "" && u.Fragment == ""
		if b >= 0x80 {
			kept = false // a byte above ASCII is not one rune of one byte
		}
		if got := pathBytes[b]; got != kept {
			t.Errorf("pathBytes[%q] = %v, url.URL keeps it: %v", rune(b), got, kept)
		}
	}
}
