package server

import (
	"crypto/subtle"
	"net/http"
	"net/http/pprof"
	"strings"
)

// PprofPrefix is where Observe serves Go's runtime profiles (net/http/pprof)
// when ObserveOptions.PprofKey is set.
const PprofPrefix = "/debug/pprof/"

// newPprofHandler serves the runtime profiles of net/http/pprof under
// PprofPrefix: the index, cmdline, profile (CPU), symbol, trace and the
// named profiles (heap, allocs, goroutine, block, mutex, threadcreate).
func newPprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(PprofPrefix, pprof.Index)
	mux.HandleFunc(PprofPrefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(PprofPrefix+"profile", pprof.Profile)
	mux.HandleFunc(PprofPrefix+"symbol", pprof.Symbol)
	mux.HandleFunc(PprofPrefix+"trace", pprof.Trace)
	return mux
}

// servePprof answers a request under PprofPrefix: the profiles to a bearer
// of the master key, a Cosmos 401 to anyone else. It reports false for
// other paths.
func (o *observer) servePprof(w http.ResponseWriter, r *http.Request) bool {
	if o.pprof == nil || !strings.HasPrefix(r.URL.Path, PprofPrefix) {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(header(r.Header, "Authorization")), []byte(o.pprofAuth)) != 1 {
		w.Header().Set("Www-Authenticate", `Bearer realm="orrery pprof"`)
		writeCosmosError(w, "", unauthorized("The profiling endpoints need the master key as a bearer token (Authorization: Bearer <key>)."))
		return true
	}
	o.pprof.ServeHTTP(w, r)
	return true
}
