package server

import (
	"net/http"
	"strconv"
	"unsafe"

	"github.com/orrery-db/orrery/engine"
)

// containerOf finds the request's container and names it in the response
// headers.
func (s *Server) containerOf(r *request) (*engine.Container, error) {
	ctx := r.Context()
	c, err := s.eng.Container(ctx, r.t.db, r.t.coll)
	if err != nil {
		return nil, err
	}
	r.setContentPath(c)
	return c, nil
}

// itemContainerOf is containerOf for an item operation, which checks the
// catalog against the store itself: from the engine's cache when it knows
// the container (no round trip of its own on a shared store).
func (s *Server) itemContainerOf(r *request) (*engine.Container, error) {
	ref, err := s.itemContainerRef(r)
	return ref.Container(), err
}

// itemContainerRef is itemContainerOf for a request whose item operation
// is passed the container (engine.ItemRequest.Resolved): it is looked up
// once.
func (s *Server) itemContainerRef(r *request) (engine.ContainerRef, error) {
	ref, err := s.eng.ResolveContainer(r.Context(), r.t.db, r.t.coll)
	if err != nil {
		return engine.ContainerRef{}, err
	}
	r.setContentPath(ref.Container())
	return ref, nil
}

// createItem serves POST /dbs/{db}/colls/{coll}/docs: create, or upsert.
func (s *Server) createItem(r *request) error {
	ctx := r.Context()
	ref, err := s.itemContainerRef(r)
	if err != nil {
		return err
	}
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	req := &engine.ItemRequest{Database: r.t.db, Container: r.t.coll, PartitionKey: pk, HasPartitionKey: hasPK,
		Body: r.body, IfMatch: r.ifMatch(), PreTriggers: r.triggers("pre"), PostTriggers: r.triggers("post"), Resolved: ref}
	var res *engine.ItemResult
	if r.op.verb == "upsert" {
		res, err = s.eng.UpsertItem(ctx, req)
	} else {
		res, err = s.eng.CreateItem(ctx, req)
	}
	if err != nil {
		return err
	}
	return s.writeItem(r, res)
}

// readItemFeed serves GET /dbs/{db}/colls/{coll}/docs: the read feed. The
// container comes from the engine's cache: on a shared store the page's
// own first round trip checks the catalog, and reads the session token.
func (s *Server) readItemFeed(r *request) error {
	ctx := r.Context()
	c, err := s.itemContainerOf(r)
	if err != nil {
		return err
	}
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	n, err := r.maxItemCount()
	if err != nil {
		return err
	}
	res, err := s.eng.ReadFeed(ctx, &engine.FeedRequest{Database: r.t.db, Container: r.t.coll, PartitionKey: pk, HasPartitionKey: hasPK,
		MaxItems: n, Continuation: header(r.Header, "X-Ms-Continuation"), PartitionKeyRangeID: r.partitionKeyRangeID(),
		MinEPK: header(r.Header, "X-Ms-Start-Epk"), MaxEPK: header(r.Header, "X-Ms-End-Epk")})
	if err != nil {
		return err
	}
	if cur, cerr := s.eng.CachedContainer(ctx, c.Database().ID, c.ID); cerr == nil && cur != c {
		// The page found the cache stale and reloaded it.
		c = cur
		r.setContentPath(c)
	}
	if err := s.setSessionLSN(r, res.SessionLSN); err != nil {
		return err
	}
	r.writeFeed(c.RID, "Documents", res.Items, res.Continuation, res.Charge)
	return nil
}

// item serves /dbs/{db}/colls/{coll}/docs/{id}: read, replace, patch, delete.
func (s *Server) item(r *request) error {
	ctx := r.Context()
	db, coll, id := r.t.db, r.t.coll, r.t.id
	ref, err := s.itemContainerRef(r)
	if err != nil {
		return err
	}
	c := ref.Container()
	pk, hasPK, err := r.partitionKey()
	if err != nil {
		return err
	}
	if coll == c.RID && c.Self() == "dbs/"+db+"/colls/"+coll+"/" {
		// A RID-based link (an item's _self): its last segment is the
		// item's RID, which names its partition key too.
		ridID, ridPK, err := s.eng.ItemByRID(ctx, c, id)
		if err != nil {
			return err
		}
		if hasPK && !pk.Equal(ridPK) {
			return &engine.Error{Status: http.StatusBadRequest, SubStatus: engine.SubStatusPartitionKeyMismatch, Code: "BadRequest",
				Message: "The partition key " + pk.String() + " of the request differs from the item's " + ridPK.String() + "."}
		}
		id, pk, hasPK = ridID, ridPK, true
	}
	req := &r.item
	*req = engine.ItemRequest{Database: db, Container: coll, ID: id, PartitionKey: pk, HasPartitionKey: hasPK,
		Body: r.body, IfMatch: r.ifMatch(), IfNoneMatch: r.ifNoneMatch(), Resolved: ref}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		req.PreTriggers, req.PostTriggers = r.triggers("pre"), r.triggers("post")
	}
	var res *engine.ItemResult
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		res, err = s.eng.ReadItem(ctx, req)
	case http.MethodPut:
		res, err = s.eng.ReplaceItem(ctx, req)
	case http.MethodPatch:
		res, err = s.eng.PatchItem(ctx, req)
	case http.MethodDelete:
		res, err = s.eng.DeleteItem(ctx, req)
	default:
		return methodNotAllowed(r.Request)
	}
	if err != nil {
		return err
	}
	return s.writeItem(r, res)
}

// writeItem writes an item result; writes under Prefer: return=minimal get no body.
func (s *Server) writeItem(r *request, res *engine.ItemResult) error {
	if err := s.setResultSession(r, res.SessionLSN); err != nil {
		return err
	}
	body := res.Body
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.preferMinimal() {
		body = nil
	}
	r.writeJSONCharged(res.Status, body, res.ETag, res.Charge, itemChargeText(res.Charge))
	return nil
}

// setResultSession sets the session token of a result (see setSessionLSN).
// One that read it with its own work may have brought the cache up to
// date: the container's path is then taken from the cache again.
func (s *Server) setResultSession(r *request, lsn uint64) error {
	if lsn != 0 {
		if c, err := s.eng.CachedContainer(r.Context(), r.t.db, r.t.coll); err == nil {
			r.setContentPath(c)
		}
	}
	return s.setSessionLSN(r, lsn)
}

// setContentPath names the container in the headers the JavaScript SDK keys
// its session tokens by.
func (r *request) setContentPath(c *engine.Container) {
	r.setHeader("X-Ms-Content-Path", hdrContentPath, c.RID)
	r.setHeader("X-Ms-Alt-Content-Path", hdrAltContentPath, c.AltLink())
}

// setSessionLSN sets the session token: the request's partition key range
// ("0" when it names none), one region, and lsn, a result's own (0: the
// engine is asked for it). It fails when the store cannot tell its
// watermark: the request is then answered with that error (503 when the
// store is unreachable), never with a session token of 0.
func (s *Server) setSessionLSN(r *request, lsn uint64) error {
	if lsn == 0 {
		var err error
		if lsn, err = s.eng.SessionLSN(r.Context()); err != nil {
			return err
		}
	}
	id := r.partitionKeyRangeID()
	if id == "" {
		id = "0" // without the error ParseUint would allocate
	} else if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		id = "0"
	}
	if t := s.token.Load(); t != nil && t.lsn == lsn && t.id == id {
		r.setHeader("X-Ms-Session-Token", hdrSessionToken, t.text)
		return nil
	}
	if r.token.text != "" {
		// The request formatted and published one already: its bytes
		// are not written again.
		var buf [sessionTokenMax]byte
		token := string(strconv.AppendUint(append(append(buf[:0], id...), ":-1#"...), lsn, 10))
		r.setHeader("X-Ms-Session-Token", hdrSessionToken, token)
		return nil
	}
	// Formatted into the request's own allocation, written once and
	// published from it, which it keeps alive until another token
	// replaces it: no allocation of its own.
	b := strconv.AppendUint(append(append(r.tokenText[:0], id...), ":-1#"...), lsn, 10)
	token := unsafe.String(unsafe.SliceData(b), len(b))
	r.setHeader("X-Ms-Session-Token", hdrSessionToken, token)
	r.token = sessionToken{id: id, lsn: lsn, text: token}
	s.token.Store(&r.token)
	return nil
}
