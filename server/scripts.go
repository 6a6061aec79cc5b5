package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/orrery-db/orrery/engine"
)

// listScripts answers GET /dbs/{db}/colls/{coll}/{sprocs|triggers|udfs}.
func (s *Server) listScripts(r *request) error {
	ctx := r.Context()
	list, err := s.eng.ListScripts(ctx, r.t.db, r.t.coll, r.t.kind)
	if err != nil {
		return err
	}
	return s.readResourceFeed(r, r.t.kind.FeedKey(), list)
}

// queryScripts answers a query POSTed to a feed of scripts.
func (s *Server) queryScripts(r *request) error {
	ctx := r.Context()
	list, err := s.eng.ListScripts(ctx, r.t.db, r.t.coll, r.t.kind)
	if err != nil {
		return err
	}
	return s.queryResources(r, "", r.t.kind.FeedKey(), list)
}

// createScript serves POST on a feed of scripts.
func (s *Server) createScript(r *request) error {
	ctx := r.Context()
	res, err := s.eng.CreateScript(ctx, r.t.db, r.t.coll, r.t.kind, r.body)
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusCreated, res.Body, res.ETag, 1)
	return nil
}

// readScript serves GET /dbs/{db}/colls/{coll}/{kind}/{id}.
func (s *Server) readScript(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReadScript(ctx, r.t.db, r.t.coll, r.t.kind, r.t.id)
	if err != nil {
		return err
	}
	return r.writeResource(res)
}

// replaceScript serves PUT /dbs/{db}/colls/{coll}/{kind}/{id}.
func (s *Server) replaceScript(r *request) error {
	ctx := r.Context()
	res, err := s.eng.ReplaceScript(ctx, r.t.db, r.t.coll, r.t.kind, r.t.id, r.body, r.ifMatch())
	if err != nil {
		return err
	}
	r.writeJSON(http.StatusOK, res.Body, res.ETag, 1)
	return nil
}

// deleteScript serves DELETE /dbs/{db}/colls/{coll}/{kind}/{id}.
func (s *Server) deleteScript(r *request) error {
	ctx := r.Context()
	if err := s.eng.DeleteScript(ctx, r.t.db, r.t.coll, r.t.kind, r.t.id, r.ifMatch()); err != nil {
		return err
	}
	r.writeJSON(http.StatusNoContent, nil, "", 1)
	return nil
}

// executeStoredProcedure serves POST /dbs/{db}/colls/{coll}/sprocs/{id}: it
// runs the procedure in one logical partition; the body is the JSON array of
// its arguments.
func (s *Server) executeStoredProcedure(r *request) error {
	db, coll, id := r.t.db, r.t.coll, r.t.id
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
		EnableLogging: headerBool(r.Header, "X-Ms-Documentdb-Script-Enable-Logging"),
	})
	if err != nil {
		return err
	}
	if res.Log != "" {
		r.w.Header().Set("X-Ms-Documentdb-Script-Log-Results", encodeURIComponent(res.Log))
	}
	if err := s.setResultSession(r, res.SessionLSN); err != nil {
		return err
	}
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
	// The header's canonical name: looked up as is, with no allocation on
	// the writes that name none.
	var name string
	switch kind {
	case "pre":
		name = "X-Ms-Documentdb-Pre-Trigger-Include"
	case "post":
		name = "X-Ms-Documentdb-Post-Trigger-Include"
	default:
		name = http.CanonicalHeaderKey("x-ms-documentdb-" + kind + "-trigger-include")
	}
	var out []string
	for _, v := range r.Header[name] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				out = append(out, id)
			}
		}
	}
	return out
}
