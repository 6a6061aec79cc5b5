package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

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

// executeStoredProcedure runs a stored procedure in one logical partition;
// the body is the JSON array of its arguments.
func (s *Server) executeStoredProcedure(r *request, db, coll, id string) error {
	var args []json.RawMessage
	if len(bytes.TrimSpace(r.body)) > 0 {
		if err := json.Unmarshal(r.body, &args); err != nil {
			return badRequest("The body of a stored procedure execution must be a JSON array of its arguments: %v", err)
		}
	}
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	res, err := s.eng.ExecuteStoredProcedure(r.Context(), &engine.ExecuteRequest{
		Database: db, Container: coll, ID: id, PartitionKey: pk, HasPartitionKey: hasPK, Args: args,
		EnableLogging: headerBool(r.Header, "x-ms-documentdb-script-enable-logging"),
	})
	if err != nil {
		return err
	}
	if res.Log != "" {
		r.w.Header().Set("x-ms-documentdb-script-log-results", encodeURIComponent(res.Log))
	}
	s.setSession(r)
	body := res.Body
	if body == nil {
		body = []byte{}
	}
	r.writeJSON(http.StatusOK, body, "", res.Charge)
	return nil
}

// encodeURIComponent escapes s as JavaScript's encodeURIComponent does, which
// is how the service encodes a script's log: SDKs hand the header over as it
// came or decode it with a percent-decoder that leaves '+' alone, so a space
// must be %20, and A-Z a-z 0-9 - _ . ! ~ * ' ( ) stay as they are.
func encodeURIComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', strings.IndexByte("-_.!~*'()", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// triggers lists the triggers a write names in
// x-ms-documentdb-{pre|post}-trigger-include: comma-separated (Go) or one
// header each (JavaScript).
func (r *request) triggers(kind string) []string {
	var out []string
	for _, v := range r.Header.Values("x-ms-documentdb-" + kind + "-trigger-include") {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				out = append(out, id)
			}
		}
	}
	return out
}
