package server

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine"
)

// unknownPathError is classify's answer to a path of no shape the REST API
// has. It is answered before authentication: the SDKs sign such paths over
// a resource type and link of their own making, and a 401 would hide what
// is wrong behind a signature mismatch.
type unknownPathError struct{ e *engine.Error }

func (u *unknownPathError) Error() string { return u.e.Message }
func (u *unknownPathError) Unwrap() error { return u.e }

func unknownPath(r *http.Request) error {
	return &unknownPathError{&engine.Error{Status: http.StatusBadRequest, Code: "BadRequest",
		Message: fmt.Sprintf("The path %q names nothing in the Azure Cosmos DB for NoSQL REST API that Orrery serves: "+
			"it serves /dbs, /dbs/{db}/colls, /dbs/{db}/users (and their permissions), /dbs/{db}/clientencryptionkeys, /offers, and under a container docs, pkranges, sprocs, triggers and udfs.", r.URL.Path)}}
}

// unsupported answers a request for something the service has and Orrery
// does not: 400, naming it, so that a test sees what to change rather than
// a 401 or a 404 it cannot tell from a missing resource.
func unsupported(what, why string) error {
	return &engine.Error{Status: http.StatusBadRequest, Code: "BadRequest",
		Message: "Orrery does not support " + what + ": " + why}
}

// unsupportedChild answers the children of a container, item or database
// that the service has and Orrery does not serve; nil for any other name.
func unsupportedChild(parent, name string) error {
	switch parent + "/" + name {
	case "docs/attachments":
		return unsupported("attachments (/dbs/{db}/colls/{coll}/docs/{id}/attachments)",
			"they are a legacy feature of the service; keep the data in the item or in blob storage.")
	}
	return nil
}

// checkItemID refuses what the service's gateway refuses of an item id
// addressed in the path (reads, replaces, patches, deletes), though it
// creates such items: the service's own SDK test suites record, for its
// routing gateway, 401 for an id ending with whitespace (the gateway trims
// the path, and the signature no longer matches), for an id holding '/', '\',
// '#' or a percent-encoded character such as "%20" (the gateway decodes the
// path once more than the client encoded it). An id holding a carriage
// return, line feed or tab does not reach it (see holdsRestrictedChar).
func checkItemID(id string) error {
	if id != "" && strings.TrimRight(id, " ") != id {
		return unauthorized(fmt.Sprintf("The item id %q ends with whitespace: the service's gateway trims it from the path and answers 401 "+
			"to reads, replaces, patches and deletes of such an item (though it creates it), and so does Orrery. Use ids that do not end with whitespace; a query still finds this item.", id))
	}
	if strings.ContainsAny(id, "/\\#") || holdsPercentEscape(id) {
		return unauthorized(fmt.Sprintf("The item id %q holds '/', '\\', '#' or a percent-encoded character: the service's gateway does not read such an id "+
			"back from the path as the client signed it and answers 401 to reads, replaces, patches and deletes of such an item (though it creates it), and so does Orrery. "+
			"Avoid these characters in ids; a query still finds this item.", id))
	}
	return nil
}

// holdsPercentEscape reports whether s holds a '%' followed by two hex
// digits, which a second percent-decoding would change.
func holdsPercentEscape(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '%' && isHex(s[i+1]) && isHex(s[i+2]) {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// checkUTF8 refuses a body that is not valid UTF-8: the service answers 400,
// and a stored item with such bytes would break every SDK's read and query
// of its partition.
func checkUTF8(body []byte) *engine.Error {
	if utf8.Valid(body) {
		return nil
	}
	at := 0
	for at < len(body) {
		r, n := utf8.DecodeRune(body[at:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		at += n
	}
	return &engine.Error{Status: http.StatusBadRequest, Code: "BadRequest",
		Message: fmt.Sprintf("The request payload is invalid: it is not valid UTF-8 (byte %d of %d). Ensure to provide a valid request payload.", at, len(body))}
}
