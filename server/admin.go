package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
)

// Administrative calls live under /_admin/, outside the Cosmos REST API:
// operations the service performs on its own that tests want to provoke.
//
//	POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split
//
// splits partition key range {id} in two and answers 200 with the children
// in the pkranges feed's shape. It needs the master key, signed as a POST on
// the range itself: resource type "pkranges", resource link
// "dbs/{db}/colls/{coll}/pkranges/{id}" (Sign(key, "POST", "pkranges", link,
// date)). A read-only key or resource token gets 403; a range that is not
// current 410/1002.
//
// Fault rules (package faults), named in the operations table as faults.*:
//
//	GET    /_admin/faults       the rules with their hits: {"rules": [...]}
//	POST   /_admin/faults       add rules (one, an array, or {"rules": [...]}): 201 {"rules": [...]}
//	DELETE /_admin/faults       remove every rule: 200 {"removed": n}
//	GET    /_admin/faults/{id}  one rule with its hits
//	DELETE /_admin/faults/{id}  remove one rule: 204
//
// signed with the master key as resource type "faults" and link "" (the
// feed) or "faults/{id}" (one rule); any other credential gets 403.

// adminPrefix is the first path segment of administrative calls.
const adminPrefix = "_admin"

// serveAdmin authenticates and answers an administrative call; segs are the
// path segments after adminPrefix.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request, segs []string) error {
	if len(segs) > 0 && segs[0] == "faults" {
		return s.serveFaultsAdmin(w, r, segs)
	}
	ctx := r.Context()
	if len(segs) != 7 || segs[0] != "dbs" || segs[2] != "colls" || segs[4] != "pkranges" || segs[6] != "split" {
		return engine.NotFound("The administrative path %q names no operation: use POST /_admin/dbs/{db}/colls/{coll}/pkranges/{id}/split.", r.URL.Path)
	}
	cred, aerr := s.keys.authenticate(r, segs[:6], s.now())
	if aerr != nil {
		return aerr
	}
	if cred.tok != nil || cred.aad != "" || cred.key != accessAll {
		return engine.Forbidden("Administrative calls need the master key.")
	}
	if r.Method != http.MethodPost {
		return methodNotAllowed(r)
	}
	req := &request{Request: r, w: w, segs: segs[:6]}
	c, err := s.eng.Container(ctx, segs[1], segs[3])
	if err != nil {
		return err
	}
	children, err := s.eng.SplitPartitionKeyRange(ctx, segs[1], segs[3], segs[5])
	if err != nil {
		return err
	}
	all, _ := c.PartitionKeyRanges()
	n := len(all) + 1
	docs := make([][]byte, len(children))
	for i := range children {
		docs[i] = partitionKeyRangeJSON(c, &children[i], n)
	}
	s.log.Info("split partition key range", "db", segs[1], "coll", segs[3], "range", segs[5],
		"children", children[0].ID+","+children[1].ID)
	req.writeFeed(c.RID, "PartitionKeyRanges", docs, "", 1)
	return nil
}

// serveFaultsAdmin authenticates and answers a call on the fault rules,
// as the operations table says.
func (s *Server) serveFaultsAdmin(w http.ResponseWriter, r *http.Request, segs []string) error {
	full := append([]string{adminPrefix}, segs...)
	op, t, err := classify(r, full)
	if err != nil {
		if up, ok := err.(*unknownPathError); ok {
			return up.e
		}
		return err
	}
	cred, aerr := s.keys.authenticate(r, segs, s.now())
	if aerr != nil {
		return aerr
	}
	req := &request{Request: r, w: w, segs: full, op: op, t: t}
	rt := operations[op]
	switch {
	case cred.aad != "":
		principal, aerr := s.aad.verify(r, cred.aad, s.now())
		if aerr != nil {
			return aerr
		}
		_, aerr = s.authorizeAAD(req, rt, principal)
		if aerr == nil {
			aerr = noAccessRow()
		}
		return aerr
	case cred.tok != nil:
		_, aerr = s.authorizeToken(req, rt, cred.tok)
	default:
		_, aerr = authorizeKey(rt, cred.key)
	}
	if aerr != nil {
		return aerr
	}
	if r.Method == http.MethodPost {
		var hold bodyHold
		body, err := s.readBody(r, &hold)
		defer hold.release()
		if err != nil {
			w.Header().Set("Connection", "close")
			return err
		}
		req.body = body
	}
	return rt.serve(s, req)
}

// writeRules writes {"rules": [...]}.
func (r *request) writeRules(status int, rules any) error {
	b, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		return err
	}
	r.writeJSON(status, b, "", 0)
	return nil
}

// listFaults serves GET /_admin/faults.
func (s *Server) listFaults(r *request) error { return r.writeRules(http.StatusOK, s.faults.List()) }

// addFaults serves POST /_admin/faults: every rule is installed, or none.
func (s *Server) addFaults(r *request) error {
	rules, err := faults.ParseRules(r.body)
	if err != nil {
		return badRequest("%v", err)
	}
	if len(rules) == 0 {
		return badRequest("The request holds no fault rule.")
	}
	added, err := s.faults.Add(rules...)
	if err != nil {
		return badRequest("%v", err)
	}
	for i := range added {
		s.log.Info("fault rule added", "rule", added[i].String())
	}
	return r.writeRules(http.StatusCreated, added)
}

// clearFaults serves DELETE /_admin/faults.
func (s *Server) clearFaults(r *request) error {
	n := s.faults.Clear()
	s.log.Info("fault rules cleared", "removed", n)
	r.writeJSON(http.StatusOK, []byte(`{"removed":`+strconv.Itoa(n)+`}`), "", 0)
	return nil
}

// readFault serves GET /_admin/faults/{id}.
func (s *Server) readFault(r *request) error {
	st, ok := s.faults.Get(r.t.id)
	if !ok {
		return engine.NotFound("No fault rule has the id %q.", r.t.id)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, b, "", 0)
	return nil
}

// deleteFault serves DELETE /_admin/faults/{id}.
func (s *Server) deleteFault(r *request) error {
	if !s.faults.Remove(r.t.id) {
		return engine.NotFound("No fault rule has the id %q.", r.t.id)
	}
	s.log.Info("fault rule removed", "rule", r.t.id)
	r.writeJSON(http.StatusNoContent, nil, "", 0)
	return nil
}
