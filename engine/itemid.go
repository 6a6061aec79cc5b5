package engine

import (
	"strings"
	"unicode/utf8"
)

// pathChars are the characters the service refuses in the names of
// databases, containers and scripts, which live in request paths.
const pathChars = "/\\?#"

// validItemID checks an item's id. The service creates items whose ids hold
// '/', '\', '?' or '#' (its SDKs' own suites record 201 for each), though
// its gateway cannot address some of them in a request path afterwards; the
// other rules are those of every resource id (validID).
//
// Most ids are ASCII and short: one look at each byte settles those (an
// ASCII id of 1 to 1023 bytes is valid unless every byte is a space);
// any other id is checked by validItemIDSlow, the rules as written.
func validItemID(id string) *Error {
	if n := len(id); n > 0 && n <= 1023 {
		blank := true
		for i := 0; i < n; i++ {
			c := id[i]
			if c >= utf8.RuneSelf {
				return validItemIDSlow(id)
			}
			// unicode.IsSpace's ASCII spaces; the other two are not ASCII.
			if c != ' ' && (c < '\t' || c > '\r') {
				blank = false
			}
		}
		if !blank {
			return nil
		}
	}
	return validItemIDSlow(id)
}

// validItemIDSlow is validItemID by validID's rules, the characters it
// refuses turned into '_' first.
func validItemIDSlow(id string) *Error {
	if strings.ContainsAny(id, pathChars) {
		// Same length and validity, without the characters validID refuses.
		id = strings.Map(func(r rune) rune {
			if strings.ContainsRune(pathChars, r) {
				return '_'
			}
			return r
		}, id)
	}
	return validID(id)
}
