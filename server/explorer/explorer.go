// Package explorer serves Orrery's data explorer: a browser application,
// embedded in the binary, that does what the service's portal Data Explorer
// does through the server's own Cosmos DB REST API: it creates and deletes
// databases and containers (hierarchical partition keys, throughput, unique
// keys, time to live, change feed retention, indexing policy), browses and
// edits items, runs queries (results as a table or JSON, downloaded as JSON
// or CSV), watches the change feed in both its modes, edits settings and
// throughput, manages stored procedures, triggers and user-defined
// functions, and shows the endpoint and connection string to connect an SDK.
//
// The handler serves static files only. It never reads data and holds no
// credential: the page asks its user for the master key, the read-only key
// or a resource token, signs every request in the browser the way the SDKs
// do, and the server authorizes those requests like any other client's.
package explorer

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is the URL path the explorer is served under.
const Prefix = "/_explorer/"

//go:embed assets
var assets embed.FS

// files is the embedded asset tree rooted at its top directory.
var files = func() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}()

// contentSecurityPolicy confines the page to its own origin: scripts,
// styles and API calls come from the server that served it, nothing runs
// inline, and no other site may frame it.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Owns reports whether the explorer answers a request for path: the prefix
// and everything under it, and the prefix without its trailing slash.
func Owns(path string) bool {
	return path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(path, Prefix)
}

// Handler returns the http.Handler serving the explorer's files under
// Prefix. It answers GET and HEAD only; anything else is 405. A path that is
// not one of its files is 404: it never falls through to the REST API.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "The explorer answers GET and HEAD only.")
			return
		}
		rel, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if rel == "" {
			rel = "index.html"
		}
		// Only clean, existing file names: no "..", no directory listings.
		if !fs.ValidPath(rel) || strings.HasSuffix(rel, "/") {
			writeError(w, http.StatusNotFound, "NotFound", msgNoFile)
			return
		}
		st, err := fs.Stat(files, rel)
		if err != nil || st.IsDir() {
			writeError(w, http.StatusNotFound, "NotFound", msgNoFile)
			return
		}
		// ServeFileFS redirects a path ending in /index.html to its
		// directory: give it the path it serves the page at.
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + strings.TrimSuffix(rel, "index.html")
		http.ServeFileFS(&servedErrors{ResponseWriter: w}, r2, files, rel)
	})
}

// servedErrors answers the errors ServeFileFS decides on its own, from the
// request's conditional and range headers, in Cosmos's error body as well:
// a 412 for an If-Match (the explorer's files carry no entity tag, so only
// "*" matches) and a 416 for a range outside the file. ServeFileFS writes
// a 412 without a body and a 416 as plain text.
type servedErrors struct {
	http.ResponseWriter
	failed bool
}

func (s *servedErrors) WriteHeader(status int) {
	if status < 400 {
		s.ResponseWriter.WriteHeader(status)
		return
	}
	s.failed = true
	code, message := "BadRequest", http.StatusText(status)
	switch status {
	case http.StatusPreconditionFailed:
		code, message = "PreconditionFailed", "The explorer's files carry no entity tag: only If-Match: * matches them."
	case http.StatusRequestedRangeNotSatisfiable:
		code, message = "RequestedRangeNotSatisfiable", "The range asked for is outside the explorer's file."
	}
	s.Header().Del("Content-Range")
	writeError(s.ResponseWriter, status, code, message)
}

// Write drops what ServeFileFS writes after an error: the body was written.
func (s *servedErrors) Write(b []byte) (int, error) {
	if s.failed {
		return len(b), nil
	}
	return s.ResponseWriter.Write(b)
}

// msgNoFile is the explorer's 404. It does not repeat the path asked for:
// an answer under the explorer's prefix never echoes what a request names.
const msgNoFile = "The explorer has no such file: it serves its page and assets only."

// writeError answers an error as every other path of the server does, in
// Cosmos's error body: a client that strays here reads a code and a message.
func writeError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, message})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
