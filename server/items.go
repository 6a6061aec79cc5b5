package server

import (
	"net/http"
	"strconv"

	"github.com/orrery-db/orrery/engine"
)

// items serves /dbs/{db}/colls/{coll}/docs: create and upsert (POST), query
// (POST query), batch and bulk (POST batch), read feed (GET) and change feed
// (GET with A-IM).
func (s *Server) items(r *request, db, coll string) error {
	c, err := s.eng.Container(db, coll)
	if err != nil {
		return err
	}
	r.setContentPath(c)
	switch {
	case r.Method == http.MethodPost && r.isQuery():
		return s.queryItems(r, c)
	case r.Method == http.MethodPost && r.isBatch():
		return s.batch(r, db, coll)
	case r.Method == http.MethodPost:
		pk, hasPK, err := r.partitionKey()
		if err != nil {
			return err
		}
		req := &engine.ItemRequest{Database: db, Container: coll, PartitionKey: pk, HasPartitionKey: hasPK,
			Body: r.body, IfMatch: r.ifMatch(), PreTriggers: r.triggers("pre"), PostTriggers: r.triggers("post")}
		var res *engine.ItemResult
		if headerBool(r.Header, "x-ms-documentdb-is-upsert") {
			res, err = s.eng.UpsertItem(req)
		} else {
			res, err = s.eng.CreateItem(req)
		}
		if err != nil {
			return err
		}
		return s.writeItem(r, res)
	case r.Method == http.MethodGet && r.isChangeFeed():
		return s.changeFeed(r, c)
	case r.Method == http.MethodGet:
		pk, hasPK, err := r.partitionKey()
		if err != nil {
			return err
		}
		n, err := r.maxItemCount()
		if err != nil {
			return err
		}
		res, err := s.eng.ReadFeed(&engine.FeedRequest{Database: db, Container: coll, PartitionKey: pk, HasPartitionKey: hasPK,
			MaxItems: n, Continuation: r.Header.Get("x-ms-continuation"), PartitionKeyRangeID: r.partitionKeyRangeID(),
			MinEPK: r.Header.Get("x-ms-start-epk"), MaxEPK: r.Header.Get("x-ms-end-epk")})
		if err != nil {
			return err
		}
		s.setSession(r)
		r.writeFeed(c.RID, "Documents", res.Items, res.Continuation, res.Charge)
		return nil
	}
	return methodNotAllowed(r)
}

// item serves /dbs/{db}/colls/{coll}/docs/{id}: read, replace, patch, delete.
func (s *Server) item(r *request, db, coll, id string) error {
	c, err := s.eng.Container(db, coll)
	if err != nil {
		return err
	}
	r.setContentPath(c)
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	if coll == c.RID && c.Self() == "dbs/"+db+"/colls/"+coll+"/" {
		// A RID-based link (an item's _self): its last segment is the
		// item's RID, which names its partition key too.
		ridID, ridPK, err := s.eng.ItemByRID(c, id)
		if err != nil {
			return err
		}
		if hasPK && !pk.Equal(ridPK) {
			return &engine.Error{Status: http.StatusBadRequest, SubStatus: engine.SubStatusPartitionKeyMismatch, Code: "BadRequest",
				Message: "The partition key " + pk.String() + " of the request differs from the item's " + ridPK.String() + "."}
		}
		id, pk, hasPK = ridID, ridPK, true
	}
	req := &engine.ItemRequest{Database: db, Container: coll, ID: id, PartitionKey: pk, HasPartitionKey: hasPK,
		Body: r.body, IfMatch: r.ifMatch(), IfNoneMatch: r.ifNoneMatch()}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		req.PreTriggers, req.PostTriggers = r.triggers("pre"), r.triggers("post")
	}
	var res *engine.ItemResult
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err = s.eng.ReadItem(req)
	case http.MethodPut:
		res, err = s.eng.ReplaceItem(req)
	case http.MethodPatch:
		res, err = s.eng.PatchItem(req)
	case http.MethodDelete:
		res, err = s.eng.DeleteItem(req)
	default:
		return methodNotAllowed(r)
	}
	if err != nil {
		return err
	}
	return s.writeItem(r, res)
}

// writeItem writes an item result; writes under Prefer: return=minimal get no body.
func (s *Server) writeItem(r *request, res *engine.ItemResult) error {
	s.setSession(r)
	body := res.Body
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.preferMinimal() {
		body = nil
	}
	r.writeJSON(res.Status, body, res.ETag, res.Charge)
	return nil
}

// setContentPath names the container in the headers the JavaScript SDK keys
// its session tokens by.
func (r *request) setContentPath(c *engine.Container) {
	h := r.w.Header()
	h["X-Ms-Content-Path"] = []string{c.RID}
	h["X-Ms-Alt-Content-Path"] = []string{c.AltLink()}
}

// setSession sets the session token: the request's partition key range
// ("0" when it names none), one region.
func (s *Server) setSession(r *request) {
	id := r.partitionKeyRangeID()
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		id = "0"
	}
	r.w.Header()["X-Ms-Session-Token"] = []string{id + ":-1#" + formatUint(s.eng.SessionLSN())}
}
