package server

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/throughput"
)

// Faults returns the server's fault rules, to install and remove rules in
// process (the admin API at /_admin/faults does the same over HTTP).
func (s *Server) Faults() *faults.Injector { return s.faults }

// The service's texts for the errors a rule injects.
const (
	msgTooManyRequests    = "Message: {\"Errors\":[\"Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later. Learn more: http://aka.ms/cosmosdb-error-429\"]}"
	msgRequestTimeout     = "Message: {\"Errors\":[\"The requested operation exceeded maximum alloted time. Learn more: https://aka.ms/cosmosdb-tsg-service-request-timeout\"]}"
	msgServiceUnavailable = "Message: {\"Errors\":[\"The request failed because the service is temporarily unavailable. Please retry the request. Learn more: https://aka.ms/cosmosdb-tsg-service-unavailable\"]}"
	msgInternalError      = "Message: {\"Errors\":[\"An unknown error occurred while processing this request. Learn more: https://aka.ms/cosmosdb-tsg-service-unavailable\"]}"
	msgRetryWith          = "Message: {\"Errors\":[\"The request conflicted with a concurrent operation on the same resource: retry it.\"]}"
	msgCompletingSplit    = "Message: {\"Errors\":[\"The partition is completing a split: refresh the partition key ranges and retry.\"]}"
	msgCompletingMigrate  = "Message: {\"Errors\":[\"The partition is completing a migration: refresh the partition key ranges and retry.\"]}"
	msgSessionUnavailable = "Message: {\"Errors\":[\"The read session is not available for the input session token.\"]}"
)

// SubStatusRequestRateTooLarge is the substatus of a 429 for exceeding
// provisioned throughput (the service's RUBudgetExceeded).
const SubStatusRequestRateTooLarge = 3200

// faultError is the Cosmos error of a rule's result; nil for results that
// are not an error answer.
func faultError(t faults.Type) *engine.Error {
	switch t {
	case faults.TooManyRequests:
		return &engine.Error{Status: http.StatusTooManyRequests, SubStatus: SubStatusRequestRateTooLarge, Code: "TooManyRequests", Message: msgTooManyRequests}
	case faults.Timeout:
		return &engine.Error{Status: http.StatusRequestTimeout, Code: "RequestTimeout", Message: msgRequestTimeout}
	case faults.ServiceUnavailable:
		return &engine.Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", Message: msgServiceUnavailable}
	case faults.InternalServerError:
		return &engine.Error{Status: http.StatusInternalServerError, Code: "InternalServerError", Message: msgInternalError}
	case faults.RetryWith:
		return &engine.Error{Status: 449, Code: "RetryWith", Message: msgRetryWith}
	case faults.PartitionIsSplitting:
		return &engine.Error{Status: http.StatusGone, SubStatus: 1007, Code: "Gone", Message: msgCompletingSplit}
	case faults.PartitionIsMigrating:
		return &engine.Error{Status: http.StatusGone, SubStatus: 1008, Code: "Gone", Message: msgCompletingMigrate}
	case faults.ReadSessionNotAvailable:
		return &engine.Error{Status: http.StatusNotFound, SubStatus: 1002, Code: "NotFound", Message: msgSessionUnavailable}
	}
	return nil
}

// lostError is the answer sent instead of a lost reply.
func lostError(lost string) *engine.Error {
	if lost == faults.LostTimeout {
		return faultError(faults.Timeout)
	}
	return faultError(faults.ServiceUnavailable)
}

// throttled are the operations a throughput budget governs: those on
// items, which the service charges to a partition's RU/s.
var throttled = map[operation]bool{
	{"docs", "create"}: true, {"docs", "upsert"}: true, {"docs", "read"}: true, {"docs", "replace"}: true,
	{"docs", "patch"}: true, {"docs", "delete"}: true, {"docs", "list"}: true, {"docs", "query"}: true,
	{"docs", "changefeed"}: true, {"docs", "batch"}: true, {"docs", "bulk"}: true,
	{"docs", "partitionkeydelete"}: true, {"sprocs", "execute"}: true,
}

// inject runs the request's throughput budget and fault rules, once the
// request is routed and authorized and before its body is read. done means
// the request was answered (or its connection dropped); otherwise after,
// when not nil, must run once the request has been served.
func (s *Server) inject(outer http.ResponseWriter, rec *statusRecorder, r *request) (done bool, after func()) {
	var ticket *throughput.Ticket
	if s.throttle != nil && throttled[r.op] {
		if c, id, epk := s.routeOf(r); c != nil {
			var wait time.Duration
			if ticket, wait = s.throttle.Admit(r.Context(), c, id, epk, r.op.String()); wait > 0 {
				markFault(outer, "throughput:"+string(faults.TooManyRequests))
				rec.Header().Set("X-Ms-Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
				writeCosmosError(rec, activityID(rec), faultError(faults.TooManyRequests))
				return true, nil
			}
		}
	}
	pay := func() {
		if ticket != nil {
			ticket.Done(chargeOf(rec.Header()))
		}
	}
	var f *faults.Fault
	if s.faults.Active() {
		f = s.faults.Match(s.faultRequest(r))
	}
	if f == nil {
		if ticket != nil {
			return false, pay
		}
		return false, nil
	}
	res := f.Rule.Result
	markFault(outer, f.Rule.ID+":"+string(res.Type))
	s.log.Debug("fault injected", "rule", f.Rule.ID, "type", string(res.Type), "op", r.op.String(), "path", r.URL.Path)
	if d := time.Duration(res.Delay); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			// The client is gone: nothing to answer.
			t.Stop()
			markDropped(outer)
			ticket.Done(0)
			return true, nil
		}
	}
	switch res.Type {
	case faults.ResponseDelay:
		if ticket != nil {
			return false, pay
		}
		return false, nil
	case faults.PartitionIsGone:
		// A real split, then the request goes on as the service's
		// gateway serves it: routed by partition key to the child that
		// holds it, or, scoped to the range split (a query or feed page
		// of one range), answered 410/1002 by the engine.
		if _, err := s.splitFor(r); err != nil {
			ticket.Done(0)
			writeError(rec, r.Request, err)
			return true, nil
		}
		if ticket != nil {
			return false, pay
		}
		return false, nil
	case faults.AppliedThenLost:
		real := rec.ResponseWriter
		lost := &lostWriter{h: real.Header().Clone()}
		rec.ResponseWriter = lost
		return false, func() {
			rec.ResponseWriter = real
			// What was written went to the lost writer: the status
			// the client gets (and the access log shows) is lose's.
			rec.status = 0
			if ticket != nil {
				ticket.Done(chargeOf(lost.h))
			}
			s.lose(outer, rec, res.Lost)
		}
	}
	ticket.Done(0)
	switch res.Type {
	case faults.ConnectionReset:
		s.drop(outer, rec)
	case faults.LostBeforeApply:
		// The request arrives whole, and nothing comes of it.
		if r.Body != nil {
			io.Copy(io.Discard, io.LimitReader(r.Body, maxRequestBytes))
		}
		s.lose(outer, rec, res.Lost)
	default:
		e := faultError(res.Type)
		if res.Type == faults.TooManyRequests {
			rec.Header().Set("X-Ms-Retry-After-Ms", strconv.FormatInt(time.Duration(res.RetryAfter).Milliseconds(), 10))
		}
		writeCosmosError(rec, activityID(rec), e)
	}
	return true, nil
}

// chargeOf reads the request charge a response carries.
func chargeOf(h http.Header) float64 {
	v, _ := strconv.ParseFloat(header(h, "X-Ms-Request-Charge"), 64)
	return v
}

// faultRequest describes r for the rules' conditions.
func (s *Server) faultRequest(r *request) *faults.Request {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	req := &faults.Request{
		Operation:    r.op.String(),
		Database:     r.t.db,
		Container:    r.t.coll,
		PartitionKey: header(r.Header, "X-Ms-Documentdb-Partitionkey"),
		ClientIP:     ip,
		UserAgent:    r.UserAgent(),
		Range: func() string {
			c, id, epk := s.routeOf(r)
			if c != nil && id == "" && epk != "" {
				id = rangeContaining(c, epk)
			}
			return id
		},
		User: func() string { return s.tokenUser(r) },
	}
	// A path may name its database and container by RID (the JavaScript
	// SDK's partition key range reads do): conditions name them by id.
	if r.t.coll != "" {
		if c, err := s.eng.CachedContainer(r.Context(), r.t.db, r.t.coll); err == nil {
			req.DatabaseAlt, req.ContainerAlt = alt(r.t.db, c.Database().ID, c.Database().RID), alt(r.t.coll, c.ID, c.RID)
		}
	} else if r.t.db != "" {
		if db, err := s.eng.ReadDatabase(r.Context(), r.t.db); err == nil {
			req.DatabaseAlt = alt(r.t.db, db.ID, db.RID)
		}
	}
	return req
}

// alt is the other spelling of a resource named as named: its RID when it
// was named by id, its id when by RID.
func alt(named, id, rid string) string {
	if named == id {
		return rid
	}
	return id
}

// routeOf finds the request's container, the partition key range it names
// and the effective partition key (hex) it starts at: that of its partition
// key, or its feed range's start; both "" when it reaches the whole
// container.
func (s *Server) routeOf(r *request) (c *engine.Container, rangeID, epk string) {
	if r.t.coll == "" {
		return nil, "", ""
	}
	c, err := s.eng.CachedContainer(r.Context(), r.t.db, r.t.coll)
	if err != nil {
		return nil, "", ""
	}
	epk = header(r.Header, "X-Ms-Start-Epk")
	if pk, has, err := r.partitionKey(); err == nil && has {
		def := c.PartitionKeyDefinition()
		epk = engine.EPKHex(engine.EffectivePartitionKey(&def, pk))
	}
	return c, r.partitionKeyRangeID(), epk
}

// rangeContaining returns the id of c's current range holding epk (hex).
func rangeContaining(c *engine.Container, epk string) string {
	epk = strings.ToUpper(epk)
	ranges, _ := c.PartitionKeyRanges()
	for _, pr := range ranges {
		if epk >= pr.MinInclusive && (pr.MaxExclusive == "FF" || epk < pr.MaxExclusive) {
			return pr.ID
		}
	}
	return ""
}

// tokenUser is the id of the user whose resource token authorized r, ""
// for any other credential.
func (s *Server) tokenUser(r *request) string {
	p := r.grant.perm
	if p == nil {
		return ""
	}
	var self struct {
		Self string `json:"_self"`
	}
	if json.Unmarshal(p.Body, &self) != nil {
		return ""
	}
	segs := strings.Split(strings.Trim(self.Self, "/"), "/")
	if len(segs) < 4 || segs[0] != "dbs" || segs[2] != "users" {
		return ""
	}
	users, err := s.eng.ListUsers(r.Context(), segs[1])
	if err != nil {
		return ""
	}
	for _, u := range users {
		if u.RID == segs[3] {
			return u.ID
		}
	}
	return ""
}

// splitFor splits the partition key range r reaches (the container's first
// when it reaches all of them) with the split the admin API performs, and
// returns the id of the range split.
func (s *Server) splitFor(r *request) (string, error) {
	c, id, epk := s.routeOf(r)
	if c == nil {
		return "", engine.BadRequest("A PartitionIsGone fault needs a request to a container's items; %s reaches none.", r.op)
	}
	if id == "" && epk != "" {
		id = rangeContaining(c, epk)
	}
	if id == "" || !c.HasPartitionKeyRange(id) {
		ranges, _ := c.PartitionKeyRanges()
		id = ranges[0].ID
	}
	children, err := s.eng.SplitPartitionKeyRange(r.Context(), c.Database().ID, c.ID, id)
	if err != nil {
		return "", err
	}
	s.log.Info("split partition key range", "db", c.Database().ID, "coll", c.ID, "range", id,
		"children", children[0].ID+","+children[1].ID, "cause", "fault")
	return id, nil
}

// lose loses a reply: the connection is reset, or a 503 or 408 is sent
// in its place.
func (s *Server) lose(outer http.ResponseWriter, rec *statusRecorder, lost string) {
	if lost == faults.LostReset {
		s.drop(outer, rec)
		return
	}
	h := rec.Header()
	for _, k := range []string{"Etag", "X-Ms-Session-Token", "X-Ms-Request-Charge", "X-Ms-Continuation", "X-Ms-Item-Count", "Content-Length"} {
		delete(h, k)
	}
	writeCosmosError(rec, activityID(rec), lostError(lost))
}

// drop resets the request's connection without an answer (an RST where
// the connection is TCP). Where it cannot be taken over, a 503 is sent.
func (s *Server) drop(outer http.ResponseWriter, rec *statusRecorder) {
	conn, _, err := http.NewResponseController(rec.ResponseWriter).Hijack()
	if err != nil {
		s.log.Warn("fault: the connection cannot be reset; answering 503", "error", err)
		writeCosmosError(rec, activityID(rec), faultError(faults.ServiceUnavailable))
		return
	}
	markDropped(outer)
	hardClose(conn)
}

// hardClose closes c with a TCP reset rather than an orderly close, as a
// failing network or server does.
func hardClose(c net.Conn) {
	for {
		switch v := c.(type) {
		case *tls.Conn:
			c = v.NetConn()
			continue
		case *handshakeConn: // what an HTTPS connection's NetConn is
			c = v.peekedConn.Conn
			continue
		case *peekedConn:
			c = v.Conn
			continue
		case *headerConn: // what Server.Listener makes of a plain connection
			c = v.Conn
			continue
		case *net.TCPConn:
			v.SetLinger(0)
		}
		break
	}
	c.Close()
}

// markFault tells the access log (the observer's recorder) which rule
// faulted the request.
func markFault(w http.ResponseWriter, mark string) {
	if o, ok := w.(*statusRecorder); ok {
		o.fault = mark
	}
}

// markDropped tells the access log that no answer was sent.
func markDropped(w http.ResponseWriter) {
	if o, ok := w.(*statusRecorder); ok {
		o.dropped = true
	}
}

// Unwrap lets http.ResponseController reach the connection under the recorder.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// lostWriter takes a reply that is to be lost.
type lostWriter struct {
	h      http.Header
	status int
}

func (w *lostWriter) Header() http.Header { return w.h }
func (w *lostWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *lostWriter) Write(b []byte) (int, error) { return len(b), nil }
