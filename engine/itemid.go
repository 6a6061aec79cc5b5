package engine

import "strings"

// pathChars are the characters the service refuses in the names of
// databases, containers and scripts, which live in request paths.
const pathChars = "/\\?#"

// validItemID checks an item's id. The service creates items whose ids hold
// '/', '\', '?' or '#' (its SDKs' own suites record 201 for each), though
// its gateway cannot address some of them in a request path afterwards; the
// other rules are those of every resource id (validID).
func validItemID(id string) *Error {
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
