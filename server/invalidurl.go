package server

import (
	"io"
	"net/http"
	"strconv"
)

// holdsRestrictedChar reports whether the decoded request path holds a
// character the service's HTTP front end refuses in a URL: a control
// character, U+0000–U+001F or U+007F–U+009F (a carriage return, line feed
// or tab in an item id, percent-encoded by the client). The service answers
// such a request before its gateway sees it (see writeInvalidURL).
func holdsRestrictedChar(path string) bool {
	for i := 0; i < len(path); i++ {
		switch b := path[i]; {
		case b < 0x20 || b == 0x7f:
			return true
		case b == 0xc2 && i+1 < len(path) && path[i+1] >= 0x80 && path[i+1] <= 0x9f:
			return true // U+0080–U+009F in UTF-8
		}
	}
	return false
}

// invalidURLPage is the page the service's HTTP front end answers a URL
// it refuses with, followed by a paragraph of Orrery's saying why.
const invalidURLPage = "<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01//EN\"\"http://www.w3.org/TR/html4/strict.dtd\">\r\n" +
	"<HTML><HEAD><TITLE>Bad Request</TITLE>\r\n" +
	"<META HTTP-EQUIV=\"Content-Type\" Content=\"text/html; charset=us-ascii\"></HEAD>\r\n" +
	"<BODY><h2>Bad Request - Invalid URL</h2>\r\n" +
	"<hr><p>HTTP Error 400. The request URL is invalid.</p>\r\n" +
	"<p>The path holds a control character (a carriage return, line feed or tab in an id, say). " +
	"The service refuses such a URL in front of its gateway, with this page and no Cosmos DB error body, " +
	"though it creates items with such ids; a query still finds them.</p>\r\n" +
	"</BODY></HTML>\r\n"

// writeInvalidURL answers a request whose path holds a restricted
// character as the service does: 400 with an HTML page, not a JSON error.
// The SDKs' own suites record it: the Go SDK sees 400, the JavaScript SDK,
// which parses every error body as JSON, fails on the client without a
// status.
func writeInvalidURL(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=us-ascii")
	h.Set("Content-Length", strconv.Itoa(len(invalidURLPage)))
	w.WriteHeader(http.StatusBadRequest)
	io.WriteString(w, invalidURLPage)
}
