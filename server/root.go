package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/server/explorer"
)

// CertificatePath is where the server's certificate is served as PEM,
// without authentication: the path of the official emulator's, which CI
// scripts fetch (curl -k https://localhost:8081/_explorer/emulator.pem).
const CertificatePath = "/_explorer/emulator.pem"

// serveCertificate answers GET and HEAD of CertificatePath with the
// certificate the server serves over HTTPS.
func (s *Server) serveCertificate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeCosmosError(w, activityID(w), methodNotAllowed(r).(*engine.Error))
		return
	}
	if len(s.cert) == 0 {
		writeCosmosError(w, activityID(w), &engine.Error{Status: http.StatusNotFound, Code: "NotFound",
			Message: "This server has no certificate to give: it serves plain HTTP only."})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-pem-file")
	h.Set("Content-Length", strconv.Itoa(len(s.cert)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(s.cert)
	}
}

// serveRootHint answers an unsigned GET or HEAD of the account (/), which
// only a person sends, SDKs signing every request: a browser is sent to
// the data explorer, anything else gets the 401 the service answers, with
// a message that says where the explorer is.
func serveRootHint(w http.ResponseWriter, r *http.Request, activity string) {
	if strings.Contains(header(r.Header, "Accept"), "text/html") {
		http.Redirect(w, r, explorer.Prefix, http.StatusFound)
		return
	}
	writeCosmosError(w, activity, unauthorized("The request has no authorization header. "+
		"This is the Cosmos DB REST API: clients sign each request with the account key (the SDKs do). "+
		"To look at the data in a browser, open the data explorer at "+explorer.Prefix+"; the server's certificate is at "+CertificatePath+"."))
}
