package server

import (
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// listConflicts serves the conflicts feed of a container, listed or
// queried, as an account with one write region serves it: conflicts arise
// only between regions that accept writes, so the feed is always empty.
func (s *Server) listConflicts(r *request) error {
	c, err := s.eng.Container(r.Context(), r.t.db, r.t.coll)
	if err != nil {
		return err
	}
	if r.Method == http.MethodPost {
		return s.queryResources(r, c.RID, "Conflicts", nil)
	}
	r.writeFeed(c.RID, "Conflicts", nil, "", 1)
	return nil
}

// conflict answers a read or delete of one conflict: there is none.
func (s *Server) conflict(r *request) error {
	if _, err := s.eng.Container(r.Context(), r.t.db, r.t.coll); err != nil {
		return err
	}
	return &engine.Error{Status: http.StatusNotFound, Code: "NotFound",
		Message: "The conflict '" + r.t.id + "' does not exist: an account with one write region records no conflicts. Entity with the specified id does not exist in the system."}
}
