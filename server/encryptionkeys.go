package server

import (
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// Client encryption keys, /dbs/{db}/clientencryptionkeys: the service keeps
// them for the SDKs' Always Encrypted and never unwraps them.

// listEncryptionKeys answers GET, or a query POSTed to,
// /dbs/{db}/clientencryptionkeys.
func (s *Server) listEncryptionKeys(r *request) error {
	list, err := s.eng.ListClientEncryptionKeys(r.Context(), r.t.db)
	if err != nil {
		return err
	}
	if r.op.verb == "list" {
		return s.readResourceFeed(r, "ClientEncryptionKeys", list)
	}
	return s.queryResources(r, "", "ClientEncryptionKeys", list)
}

// createEncryptionKey serves POST /dbs/{db}/clientencryptionkeys.
func (s *Server) createEncryptionKey(r *request) error {
	res, err := s.eng.CreateClientEncryptionKey(r.Context(), r.t.db, r.body)
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
	return nil
}

// readEncryptionKey serves GET /dbs/{db}/clientencryptionkeys/{id}. With
// If-None-Match at its current ETag it answers 304: the SDKs ask so to
// learn whether a key they failed to unwrap has been rewrapped since.
func (s *Server) readEncryptionKey(r *request) error {
	res, err := s.eng.ReadClientEncryptionKey(r.Context(), r.t.db, r.t.id)
	if err != nil {
		return err
	}
	return r.writeResource(res)
}

// replaceEncryptionKey serves PUT /dbs/{db}/clientencryptionkeys/{id}: a
// rewrap.
func (s *Server) replaceEncryptionKey(r *request) error {
	res, err := s.eng.ReplaceClientEncryptionKey(r.Context(), r.t.db, r.t.id, r.body, r.ifMatch())
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
	return nil
}

// subStatusIncorrectContainerRID is the substatus of the 400 that answers a
// request meant for a container that has since been replaced by another of
// the same name.
const subStatusIncorrectContainerRID = 1024

// checkIntendedContainer refuses an item request whose
// x-ms-cosmos-intended-collection-rid names another container than the one
// its path names now (400, substatus 1024): the SDKs' Always Encrypted
// sends the RID of the container whose encryption policy it encrypted
// with, and on this answer reloads the policy of the container that took
// its name.
func (s *Server) checkIntendedContainer(r *request) error {
	want := header(r.Header, "X-Ms-Cosmos-Intended-Collection-Rid")
	if want == "" || r.t.coll == "" {
		return nil
	}
	c, err := s.eng.CachedContainer(r.Context(), r.t.db, r.t.coll)
	if err != nil || c.RID == want {
		// A missing container is answered by the operation itself.
		return nil
	}
	return &engine.Error{Status: http.StatusBadRequest, SubStatus: subStatusIncorrectContainerRID, Code: "BadRequest",
		Message: "The container " + r.t.coll + " named in the request path is no longer the container " + want +
			" that x-ms-cosmos-intended-collection-rid names: it was deleted and created again. Read the container again and retry."}
}
