package server

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/server/explorer"
	"github.com/orrery-db/orrery/throughput"
)

// Config configures a Server.
type Config struct {
	Engine *engine.Engine
	Keys   Keys
	// AAD configures Entra ID (AAD) tokens; by default the emulator's
	// mode while Keys.Master is EmulatorKey, off otherwise.
	AAD    AAD
	Logger *slog.Logger
	// Now is the clock used to check x-ms-date; time.Now when nil.
	Now func() time.Time
	// Limits bound how long clients may take to send requests and how much
	// memory their bodies may hold together; zero fields take the defaults.
	Limits Limits
	// CertificatePEM is the certificate served over HTTPS, as PEM: it is
	// served at /_explorer/emulator.pem without authentication, where the
	// official emulator serves its own and CI scripts fetch it. Nil when
	// the server has no certificate (plain HTTP only): that path is a 404.
	CertificatePEM []byte
	// Faults holds the fault rules the server injects (see package
	// faults); nil: a set of its own, empty until rules are added.
	Faults *faults.Injector
	// EnforceThroughput refuses requests over their container's or shared
	// database's provisioned RU/s with 429 (see package throughput).
	EnforceThroughput bool
}

var gatewayVersionHeader = []string{"version=2.14.0"}

// Server serves the Cosmos DB REST API over an engine.
type Server struct {
	eng  *engine.Engine
	keys *keyRing
	aad  *aadVerifier
	log  *slog.Logger
	now  func() time.Time
	// clock is set when now is time.Now: a request behind Observe then
	// checks its x-ms-date against the time the observer read as it began.
	clock bool
	cert  []byte

	limits Limits
	// faults are the fault rules; throttle, when set, the RU/s budgets.
	faults   *faults.Injector
	throttle *throughput.Enforcer
	// smallBodyMem and bodyMem share Limits.BodyMemory (see readBody).
	smallBodyMem, bodyMem *semaphore.Weighted
	// token is the session token setSessionLSN formatted last (nil:
	// none yet): requests at the same watermark, as reads between writes
	// are, set it without formatting it again.
	token atomic.Pointer[sessionToken]
}

// sessionToken is a formatted x-ms-session-token: text, of the partition
// key range id and the watermark lsn. One is never changed once
// published in Server.token.
type sessionToken struct {
	id   string
	lsn  uint64
	text string
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	keys, err := newKeyRing(cfg.Keys)
	if err != nil {
		return nil, err
	}
	aad, err := newAADVerifier(cfg.AAD, cfg.Keys.Master)
	if err != nil {
		return nil, err
	}
	s := &Server{eng: cfg.Engine, keys: keys, aad: aad, log: cfg.Logger, now: cfg.Now, limits: cfg.Limits.withDefaults(), cert: cfg.CertificatePEM}
	s.smallBodyMem, s.bodyMem = newBodyBudgets(s.limits)
	if s.faults = cfg.Faults; s.faults == nil {
		s.faults = faults.New(faults.Options{Now: cfg.Now})
	}
	if cfg.EnforceThroughput {
		s.throttle = throughput.New(cfg.Engine, throughput.Options{})
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now, s.clock = time.Now, true
	}
	return s, nil
}

// request is one Cosmos request after routing and authentication.
type request struct {
	*http.Request
	w     http.ResponseWriter
	segs  []string
	body  []byte
	op    operation
	t     target
	grant grant
	// hdr holds the values of the response headers the request sets on
	// every answer (see the hdr constants), so that they take no
	// allocation of their own: each is set as a one-element slice of it,
	// capped so that an append to one cannot overwrite the next.
	hdr [hdrCount]string
	// charge is the request charge whose text writeJSON set in
	// hdr[hdrCharge]: the observer takes it from here instead of parsing
	// the header back.
	charge float64
	// item is the engine request of an item's read, replace, patch or
	// delete (Server.item), in the request's allocation.
	item engine.ItemRequest
	// pk holds the partition key partitionKey parsed, when it is one plain
	// string, in the request's allocation.
	pk [1]engine.PartitionKeyValue
	// token is the session token this request formatted, in the
	// request's allocation, published as Server.token (once: never
	// written after). tokenText holds its text's bytes, written once,
	// before it is published.
	token     sessionToken
	tokenText [sessionTokenMax]byte
}

// sessionTokenMax is the longest session token setSessionLSN formats: a
// partition key range id of a uint32, ":-1#", an LSN of a uint64.
const sessionTokenMax = 10 + 4 + 20

// The response headers whose values live in request.hdr.
const (
	hdrContentPath = iota
	hdrAltContentPath
	hdrSessionToken
	hdrETag
	hdrCharge
	hdrContentLength
	hdrQueryMetrics
	hdrCount
)

// setHeader sets the response header name (canonical) to the one value v,
// held in r.hdr[i].
func (r *request) setHeader(name string, i int, v string) {
	r.hdr[i] = v
	r.w.Header()[name] = r.hdr[i : i+1 : i+1]
}

// ServeHTTP authenticates, routes and answers one request, as the
// service's (routing) gateway does.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(w, r, false) }

// ComputeGateway returns a handler that serves s as the emulator's compute
// gateway (its second port) does: an item id is read from the path as
// the client encoded it, each segment decoded once, so that ids ending with
// whitespace, holding '/', '\', '#', a percent-escape or a control character
// are addressed like any other, where the routing gateway (ServeHTTP)
// answers 401 or 400 to them. The SDKs' own suites record both gateways.
func (s *Server) ComputeGateway() http.Handler { return computeGateway{s} }

type computeGateway struct{ s *Server }

func (g computeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.s.serve(w, r, true) }

// serve answers one request; literalPath is the compute gateway's reading
// of the path (see ComputeGateway).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, literalPath bool) {
	markHeadersDone(r)
	// Behind Observe, w is its recorder already: one serves both.
	rec, outer := w.(*statusRecorder)
	if !outer {
		rec = &statusRecorder{ResponseWriter: w}
	}
	activity := header(r.Header, "X-Ms-Activity-Id")
	if activity == "" {
		activity = newActivityID()
	}
	h := w.Header()
	// Canonical keys set directly: this runs on every request.
	rec.activity[0] = activity
	h["X-Ms-Activity-Id"] = rec.activity[:1:1]
	h["X-Ms-Gatewayversion"] = gatewayVersionHeader
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			if rec.status == 0 {
				writeCosmosError(rec, activity, &engine.Error{Status: 500, Code: "InternalServerError", Message: "An unexpected error occurred while processing the request."})
			}
		}
	}()
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		start := time.Now()
		defer func() {
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
		}()
	}
	if r.URL.Path == "/_health" {
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(200)
		io.WriteString(rec, `{"status":"ready"}`)
		return
	}
	if r.URL.Path == CertificatePath {
		s.serveCertificate(rec, r)
		return
	}
	if explorer.Owns(r.URL.Path) {
		explorerHandler.ServeHTTP(rec, r)
		return
	}
	foldQueryIntoPath(r.URL)
	segs := splitPathInto(rec.segs[:0], r.URL.Path)
	if literalPath {
		segs = splitEscapedPath(r.URL.EscapedPath())
	}
	if len(segs) == 0 && header(r.Header, "Authorization") == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// Someone looking, not an SDK (which signs every request).
		serveRootHint(rec, r, activity)
		return
	}
	if len(segs) > 0 && segs[0] == adminPrefix {
		if err := s.serveAdmin(rec, r, segs[1:]); err != nil {
			writeError(rec, r, err)
		}
		return
	}
	if !literalPath && holdsRestrictedChar(r.URL.Path) {
		writeInvalidURL(rec)
		return
	}
	// A path of no known shape is answered before authentication (see
	// unknownPathError); everything else is classified after it.
	op, t, cerr := classify(r, segs)
	if cerr == nil && !literalPath && op.kind == "docs" && t.id != "" {
		cerr = checkItemID(t.id)
	}
	if up, ok := cerr.(*unknownPathError); ok { // classify returns it unwrapped
		writeCosmosError(rec, activity, up.e)
		return
	}
	now := rec.start
	if !s.clock || now.IsZero() {
		now = s.now()
	}
	cred, aerr := s.keys.authenticate(r, segs, now)
	var principal *aadPrincipal
	if aerr == nil && cred.aad != "" {
		principal, aerr = s.aad.verify(r, cred.aad, now)
	}
	if aerr != nil {
		writeCosmosError(rec, activity, aerr)
		return
	}
	if cerr != nil {
		writeError(rec, r, cerr)
		return
	}
	// The observer names the request by the operation classified here.
	rec.op = op
	req := &rec.req
	*req = request{Request: r, w: rec, segs: segs, op: op, t: t}
	rt, ok := operations[op]
	if !ok || rt.serve == nil {
		writeCosmosError(rec, activity, noAccessRow())
		return
	}
	switch {
	case principal != nil:
		req.grant, aerr = s.authorizeAAD(req, rt, principal)
	case cred.tok != nil:
		req.grant, aerr = s.authorizeToken(req, rt, cred.tok)
	default:
		req.grant, aerr = authorizeKey(rt, cred.key)
	}
	if aerr != nil {
		writeCosmosError(rec, activity, aerr)
		return
	}
	if s.throttle != nil || s.faults.Active() {
		done, after := s.inject(w, rec, req)
		if done {
			return
		}
		if after != nil {
			defer after()
		}
	}
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		var hold bodyHold
		body, err := s.readBody(r, &hold)
		defer hold.release()
		if err != nil {
			// The rest of the body is not read: the connection closes.
			rec.Header().Set("Connection", "close")
			writeError(rec, r, err)
			return
		}
		if e := checkUTF8(body); e != nil {
			writeCosmosError(rec, activity, e)
			return
		}
		req.body = body
	}
	err := s.checkIntendedContainer(req)
	if err == nil {
		err = rt.serve(s, req)
	}
	if err != nil {
		if op.kind == "docs" {
			switch engine.StatusOf(err) {
			case http.StatusNotFound, http.StatusConflict, http.StatusPreconditionFailed:
				// The service sends the session token with these too:
				// the one the operation read, if it did.
				var lsn uint64
				if e, ok := engine.AsError(err); ok {
					lsn = e.SessionLSN
				}
				if serr := s.setResultSession(req, lsn); serr != nil {
					err = serr
				}
			}
		}
		writeError(rec, r, err)
	}
}

// splitPath splits a decoded URL path into its segments, ignoring leading and
// trailing slashes.
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// splitEscapedPath splits an escaped path at its '/' and decodes each
// segment once: "a%2Fb" is one segment, "a/b". A segment that does not
// decode is kept as sent.
func splitEscapedPath(p string) []string {
	segs := splitPath(p)
	for i, seg := range segs {
		if d, err := url.PathUnescape(seg); err == nil {
			segs[i] = d
		}
	}
	return segs
}

// splitPathInto is splitPath appending the segments to segs, which may
// hold them without allocating. The result's capacity is its length.
func splitPathInto(segs []string, p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			segs = append(segs, p)
			break
		}
		segs = append(segs, p[:i])
		p = p[i+1:]
	}
	return segs[:len(segs):len(segs)]
}

// foldQueryIntoPath puts a '?' in a resource path back into the path. The
// REST API has no query parameters, and the JavaScript SDK leaves a '?' in
// an item id unencoded (encodeURI), signing the id whole: the service's
// gateway reads "docs/a?b" as the item "a?b", and so does Orrery.
func foldQueryIntoPath(u *url.URL) {
	if (u.RawQuery == "" && !u.ForceQuery) || !strings.HasPrefix(u.Path, "/dbs/") {
		return
	}
	q, err := url.PathUnescape(u.RawQuery)
	if err != nil {
		q = u.RawQuery
	}
	raw := u.EscapedPath() + "%3F" + url.PathEscape(q)
	u.Path += "?" + q
	u.RawPath = raw
	u.RawQuery, u.ForceQuery = "", false
}

// isQuery reports whether a POST carries a query (or query plan request).
func isQuery(h http.Header) bool {
	return strings.HasPrefix(header(h, "Content-Type"), "application/query+json") ||
		headerBool(h, "X-Ms-Documentdb-Isquery") ||
		headerBool(h, "X-Ms-Documentdb-Query") ||
		headerBool(h, "X-Ms-Cosmos-Is-Query-Plan-Request")
}

// header is h.Get(name) for a name spelled canonically, as every name the
// server spells out is (TestHeaderNamesInTheServerAreSpelledCanonically):
// the map is read as is, without canonicalizing the name again on every
// call. net/http stores a request's header names canonically.
func header(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func headerBool(h http.Header, name string) bool {
	return strings.EqualFold(strings.Trim(header(h, name), `"`), "true")
}

// statusRecorder remembers the status written, for logs, and the fault
// injected if any.
type statusRecorder struct {
	http.ResponseWriter
	status int
	// fault names the rule and result of an injected fault ("rule:type");
	// dropped means the connection was dropped without an answer.
	fault   string
	dropped bool
	// op is the request's operation once the server has classified it
	// (the zero operation before).
	op operation
	// start is when Observe began the request (zero without it): the
	// server's clock as the request came, read once for the request's
	// duration and its authentication.
	start time.Time
	// activity holds the x-ms-activity-id header's value (no allocation
	// of its own).
	activity [1]string
	// segs holds the path's segments and req the request, made with the
	// recorder in one allocation.
	segs [8]string
	req  request
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		if code >= 200 {
			setDate(r.ResponseWriter.Header())
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
		setDate(r.ResponseWriter.Header())
	}
	return r.ResponseWriter.Write(b)
}

// setDate sets the Date header, from a value formatted once a second, on
// an answer whose header map has room for it: net/http otherwise formats
// the time for every answer (time.Time.AppendFormat, 3.4% of net/http's
// CPU for a point read in instance's BenchmarkTLSRequest). Only below 8
// headers: a Go map holds 8 entries in one group, and past them the map
// and net/http's copy of it (Header.Clone) grow into tables, which costs
// more than the formatting; net/http then writes the Date itself.
func setDate(h http.Header) {
	if len(h) >= 8 {
		return
	}
	if _, ok := h["Date"]; ok {
		return // set, or suppressed (nil)
	}
	h["Date"] = currentDate(time.Now())
}

// dateValue is the Date header of one second.
type dateValue struct {
	unix int64
	v    []string
}

var lastDate atomic.Pointer[dateValue]

// currentDate is the Date header's value for now (http.TimeFormat), shared
// by the answers of one second: net/http copies the map's values before
// writing them.
func currentDate(now time.Time) []string {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.unix == sec {
		return d.v
	}
	d := &dateValue{unix: sec, v: []string{now.UTC().Format(http.TimeFormat)}}
	lastDate.Store(d)
	return d.v
}

// newActivityID makes a random (version 4) GUID for x-ms-activity-id. It
// correlates logs; it is no secret, so a fast generator serves.
func newActivityID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:])
	return string(out[:])
}

func formatCharge(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

// chargeText is a request charge and formatCharge's text of it.
type chargeText struct {
	bits uint64 // math.Float64bits of the charge
	text string
}

// itemChargeTexts keep the texts of the charges item operations answer
// with: a few values (the engine charges a write and a read by the
// kilobyte), formatted once each instead of on every request. A slot
// holds the last charge that fell in it.
var itemChargeTexts [64]atomic.Pointer[chargeText]

// itemChargeText is formatCharge(c), from itemChargeTexts when c was
// formatted before.
func itemChargeText(c float64) string {
	bits := math.Float64bits(c)
	slot := &itemChargeTexts[(bits*0x9e3779b97f4a7c15)>>58]
	if t := slot.Load(); t != nil && t.bits == bits {
		return t.text
	}
	t := &chargeText{bits: bits, text: formatCharge(c)}
	slot.Store(t)
	return t.text
}
