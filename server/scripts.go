package server

import (
	"net/http"

	"github.com/orrery-db/orrery/engine"
)

// scripts serves /dbs/{db}/colls/{coll}/{sprocs|triggers|udfs}: create, list
// and query.
func (s *Server) scripts(r *request, db, coll string, kind engine.ScriptKind) error {
	switch {
	case r.Method == http.MethodPost && r.isQuery():
		list, err := s.eng.ListScripts(db, coll, kind)
		if err != nil {
			return err
		}
		return s.queryResources(r, "", kind.FeedKey(), list)
	case r.Method == http.MethodPost:
		res, err := s.eng.CreateScript(db, coll, kind, r.body)
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
		return nil
	case r.Method == http.MethodGet:
		list, err := s.eng.ListScripts(db, coll, kind)
		if err != nil {
			return err
		}
		return s.readResourceFeed(r, kind.FeedKey(), list)
	}
	return methodNotAllowed(r)
}

// script serves /dbs/{db}/colls/{coll}/{kind}/{id}: read, replace, delete
// and, for stored procedures, execute (POST).
func (s *Server) script(r *request, db, coll string, kind engine.ScriptKind, id string) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err := s.eng.ReadScript(db, coll, kind, id)
		if err != nil {
			return err
		}
		return r.writeResource(res)
	case http.MethodPut:
		res, err := s.eng.ReplaceScript(db, coll, kind, id, r.body, r.ifMatch())
		if err != nil {
			return err
		}
		r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
		return nil
	case http.MethodDelete:
		if err := s.eng.DeleteScript(db, coll, kind, id, r.ifMatch()); err != nil {
			return err
		}
		r.writeJSON(http.StatusNoContent, nil, "", 1)
		return nil
	case http.MethodPost:
		if kind == engine.StoredProcedures {
			return s.executeStoredProcedure(r, db, coll, id)
		}
	}
	return methodNotAllowed(r)
}

// executeStoredProcedure runs a stored procedure in one logical partition.
func (s *Server) executeStoredProcedure(r *request, db, coll, id string) error {
	return &engine.Error{Status: http.StatusBadRequest, Code: "BadRequest", Message: "Stored procedure execution arrives with the scripting runtime."}
}
