package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine"
)

// maxClockSkew is how far x-ms-date may be from the server's clock.
const maxClockSkew = 15 * time.Minute

// Keys are the account's master keys, base64 as clients hold them.
type Keys struct {
	Master   string
	ReadOnly string
}

type keyRing struct {
	master   *signer
	readOnly *signer
	// lastDate is the x-ms-date parsed last (see parseDate).
	lastDate atomic.Pointer[requestDate]
}

// signer computes HMAC-SHA256 signatures with one key, reusing hash states
// (keying an HMAC costs as much as signing a short payload).
type signer struct {
	pool sync.Pool // of *macState
}

// macState is a keyed hash with the buffers its payload and sum are
// written to, reused so that a signature check allocates nothing.
type macState struct {
	h       hash.Hash
	payload []byte
	sum     []byte
}

func newSigner(key []byte) *signer {
	s := &signer{}
	s.pool.New = func() any {
		return &macState{h: hmac.New(sha256.New, key), sum: make([]byte, 0, sha256.Size)}
	}
	return s
}

func (s *signer) get() *macState {
	m := s.pool.Get().(*macState)
	m.h.Reset()
	return m
}

func (s *signer) put(m *macState) {
	if cap(m.payload) > 4<<10 {
		m.payload = nil
	}
	s.pool.Put(m)
}

func (s *signer) sign(payload string) []byte {
	m := s.get()
	m.payload = append(m.payload[:0], payload...)
	m.h.Write(m.payload)
	sum := m.h.Sum(nil)
	s.put(m)
	return sum
}

// signs reports whether sig is the signature of payload.
func (s *signer) signs(sig, payload []byte) bool {
	m := s.get()
	m.h.Write(payload)
	m.sum = m.h.Sum(m.sum[:0])
	ok := hmac.Equal(sig, m.sum)
	s.put(m)
	return ok
}

// signsPrefixed reports whether sig is the signature of prefix followed by
// payload, written into the reused state's buffer.
func (s *signer) signsPrefixed(sig []byte, prefix string, payload []byte) bool {
	m := s.get()
	m.payload = append(append(m.payload[:0], prefix...), payload...)
	m.h.Write(m.payload)
	m.sum = m.h.Sum(m.sum[:0])
	ok := hmac.Equal(sig, m.sum)
	s.put(m)
	return ok
}

func newKeyRing(k Keys) (*keyRing, error) {
	m, err := base64.StdEncoding.DecodeString(k.Master)
	if err != nil || len(m) == 0 {
		return nil, fmt.Errorf("server: the master key is not valid base64")
	}
	ring := &keyRing{master: newSigner(m)}
	if k.ReadOnly != "" {
		ro, err := base64.StdEncoding.DecodeString(k.ReadOnly)
		if err != nil {
			return nil, fmt.Errorf("server: the read-only key is not valid base64")
		}
		ring.readOnly = newSigner(ro)
	}
	return ring, nil
}

// access is what a verified request may do.
type access int

const (
	accessNone access = iota
	accessRead
	accessAll
)

// signingScope derives the resource type and link a request is signed over,
// from its decoded path segments.
func signingScope(segs []string) (resourceType, resourceLink string) {
	rtype, link := signingScopeSegs(segs)
	return rtype, strings.Join(link, "/")
}

// signingScopeSegs is signingScope with the link as its segments (those of
// segs, but for an offer's lower-cased id), which the signature's payload
// joins: no string of the link is made.
func signingScopeSegs(segs []string) (resourceType string, resourceLink []string) {
	if len(segs) > 0 && segs[0] == adminPrefix {
		// Administrative calls are signed as the resource after /_admin/.
		segs = segs[1:]
	}
	switch {
	case len(segs) == 0:
		return "", nil
	case segs[0] == "offers":
		if len(segs) == 1 {
			return "offers", nil
		}
		return "offers", []string{strings.ToLower(segs[1])}
	case isContainerOperation(segs):
		// dbs/{db}/colls/{coll}/operations/{op} is signed as its container.
		return "colls", segs[:4]
	case len(segs)%2 == 1:
		return segs[len(segs)-1], segs[:len(segs)-1]
	default:
		return segs[len(segs)-2], segs
	}
}

// isContainerOperation reports whether segs name an operation on a container
// (dbs/{db}/colls/{coll}/operations/{op}).
func isContainerOperation(segs []string) bool {
	return len(segs) == 6 && segs[0] == "dbs" && segs[2] == "colls" && segs[4] == "operations"
}

// ridScope is the other link a RID-addressed request may be signed over: the
// Python SDK signs the RID of the resource (of the parent, for a feed),
// lower-cased, where the others sign the path. "" when the request is not
// addressed by RID.
func ridScope(segs []string) string {
	if len(segs) < 2 || segs[0] == "offers" {
		return ""
	}
	rid := segs[len(segs)-1]
	if len(segs)%2 == 1 {
		rid = segs[len(segs)-2]
	}
	if isContainerOperation(segs) {
		rid = segs[3]
	}
	// A RID is 4, 8 or 16 bytes: 8, 12 or 24 characters of base64
	// (padded), and line breaks, which the decoder skips; any other
	// segment is no RID, and is not decoded.
	if len(rid) != 8 && len(rid) != 12 && len(rid) != 24 && !strings.ContainsAny(rid, "\r\n") {
		return ""
	}
	var b [18]byte
	d, err := decodeBase64(base64.StdEncoding, b[:], []byte(strings.ReplaceAll(rid, "-", "/")))
	if n := len(d); err != nil || (n != 4 && n != 8 && n != 16) {
		return ""
	}
	return strings.ToLower(rid)
}

// credential is what authenticate found in a request: a key's access, a
// verified resource token, or an Entra ID token (unverified: the server
// checks it as its mode says).
type credential struct {
	key access
	tok *resourceToken
	aad string
}

// authenticate verifies the Authorization header of r and returns what the
// request may do, or a 401 error. For a resource token it returns the
// verified token instead, for the caller to check against its permission.
func (k *keyRing) authenticate(r *http.Request, segs []string, now time.Time) (credential, *engine.Error) {
	rawAuth := header(r.Header, "Authorization")
	if rawAuth == "" {
		return credential{}, unauthorized("The request has no authorization header.")
	}
	// Decoded as url.PathUnescape would, into a buffer on the stack: a
	// master-key header is about 90 bytes.
	var buf [256]byte
	decoded, ok := appendPathUnescape(buf[:0], rawAuth)
	if !ok {
		return credential{}, unauthorized("The authorization header is not correctly URL-encoded.")
	}
	sigAt := bytes.Index(decoded, []byte("sig="))
	if sigAt < 0 {
		return credential{}, unauthorized("The authorization header has no signature (sig=).")
	}
	sig := decoded[sigAt+len("sig="):]
	var typ []byte
	for rest := decoded[:sigAt]; len(rest) > 0; {
		var part []byte
		part, rest, _ = bytes.Cut(rest, []byte("&"))
		if name, value, _ := bytes.Cut(part, []byte("=")); string(name) == "type" {
			typ = value
		}
	}
	switch string(typ) {
	case "master":
	case "resource":
		tok, terr := k.verifyResourceToken(sig, now)
		return credential{tok: tok}, terr
	case "aad":
		if len(sig) == 0 {
			return credential{}, unauthorized("The authorization header carries no Entra ID (AAD) token after sig=.")
		}
		return credential{aad: string(sig)}, nil
	default:
		return credential{}, unauthorized(fmt.Sprintf("Authorization type %q is not supported: sign requests with the account's master key (type=master), or send a resource token (type=resource) or an Entra ID token (type=aad).", string(typ)))
	}
	acc, aerr := k.verifyMasterSignature(r, segs, sig, now)
	return credential{key: acc}, aerr
}

// appendPathUnescape appends s to b decoded as url.PathUnescape decodes it
// (each %XX a byte, '+' kept); ok is false where PathUnescape fails: a '%'
// not followed by two hexadecimal digits. The runs between escapes are
// found with IndexByte and appended whole: a signature holds a few.
func appendPathUnescape(b []byte, s string) ([]byte, bool) {
	for {
		i := strings.IndexByte(s, '%')
		if i < 0 {
			return append(b, s...), true
		}
		b = append(b, s[:i]...)
		if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
			return b, false
		}
		b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
		s = s[i+3:]
	}
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// requestDate is an x-ms-date value and the time it reads, kept from the
// request before: clients sign many requests within one second.
type requestDate struct {
	value string
	t     time.Time
}

// parseDate is http.ParseTime(v), remembering the last date parsed.
func (k *keyRing) parseDate(v string) (time.Time, error) {
	if d := k.lastDate.Load(); d != nil && d.value == v {
		return d.t, nil
	}
	t, err := http.ParseTime(v)
	if err == nil {
		k.lastDate.Store(&requestDate{value: v, t: t})
	}
	return t, err
}

// verifyMasterSignature checks a master-key or read-only-key signature.
func (k *keyRing) verifyMasterSignature(r *http.Request, segs []string, sig []byte, now time.Time) (access, *engine.Error) {
	xmsDate, httpDate := header(r.Header, "X-Ms-Date"), header(r.Header, "Date")
	date := xmsDate
	if date == "" {
		date = httpDate
	}
	if date == "" {
		return accessNone, unauthorized("The request has no x-ms-date header.")
	}
	t, err := k.parseDate(date)
	if err != nil {
		return accessNone, unauthorized(fmt.Sprintf("The x-ms-date header %q is not an RFC 1123 date.", date))
	}
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return accessNone, unauthorized(fmt.Sprintf("The authorization token is not valid at the current time: x-ms-date %q is more than %v away from the server's clock (%s).",
			date, maxClockSkew, now.UTC().Format(http.TimeFormat)))
	}
	// A SHA-256 signature is 44 characters of base64: decoded on the stack.
	var gotBuf [64]byte
	got, err := decodeBase64(base64.StdEncoding, gotBuf[:], sig)
	if err != nil {
		return accessNone, unauthorized("The signature in the authorization header is not valid base64.")
	}
	rtype, rlink := signingScopeSegs(segs)
	links := [2][]string{rlink}
	nlinks := 1
	if rid := ridScope(segs); rid != "" {
		links[1] = []string{rid}
		nlinks = 2
	}
	rtypes := [2]string{rtype}
	nrtypes := 1
	if isContainerOperation(segs) {
		rtypes[1] = "partitionkey" // the Python SDK signs the operation so
		nrtypes = 2
	}
	dates := [2]string{""}
	ndates := 1
	if httpDate != "" {
		dates[1] = httpDate
		ndates = 2
	}
	// Each payload is built in the master key's hash state's buffer and
	// checked against both keys.
	m := k.master.get() // reset
	defer k.master.put(m)
	fresh := true
	for _, rt := range rtypes[:nrtypes] {
		for _, link := range links[:nlinks] {
			for _, d := range dates[:ndates] {
				m.payload = appendSigningPayload(m.payload[:0], r.Method, rt, link, xmsDate, d)
				if !fresh {
					m.h.Reset()
				}
				fresh = false
				m.h.Write(m.payload)
				m.sum = m.h.Sum(m.sum[:0])
				if hmac.Equal(got, m.sum) {
					return accessAll, nil
				}
				if k.readOnly != nil && k.readOnly.signs(got, m.payload) {
					return accessRead, nil
				}
			}
		}
	}
	return accessNone, unauthorized("The input authorization token can't serve the request. The wrong key is being used or the expected payload is not built as per the protocol. Server used the following payload to sign: '" +
		strings.ReplaceAll(string(appendSigningPayload(nil, r.Method, rtypes[0], links[0], xmsDate, "")), "\n", "\\n") + "'")
}

func signingPayload(verb, rtype, rlink, xmsDate, date string) string {
	return string(appendSigningPayload(nil, verb, rtype, []string{rlink}, xmsDate, date))
}

// appendSigningPayload appends to b the text a request's signature is the
// HMAC of: the verb, resource type, x-ms-date and Date lower-cased, and
// the resource link, its segments joined with '/'.
func appendSigningPayload(b []byte, verb, rtype string, rlink []string, xmsDate, date string) []byte {
	b = appendLower(b, verb)
	b = append(b, '\n')
	b = appendLower(b, rtype)
	b = append(b, '\n')
	for i, seg := range rlink {
		if i > 0 {
			b = append(b, '/')
		}
		b = append(b, seg...)
	}
	b = append(b, '\n')
	b = appendLower(b, xmsDate)
	b = append(b, '\n')
	b = appendLower(b, date)
	return append(b, '\n')
}

// appendLower appends s lower-cased as strings.ToLower would: ASCII
// letters in place, any other letter through strings.ToLower.
func appendLower(b []byte, s string) []byte {
	n := len(b)
	b = append(b, s...)
	for i := n; i < len(b); i++ {
		c := b[i]
		if c >= utf8.RuneSelf {
			return append(b[:n], strings.ToLower(s)...)
		}
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// Sign returns the Authorization header value a client sends for a request,
// signed with the base64 master key. Tools and tests that speak raw HTTP use it.
func Sign(masterKey, verb, resourceType, resourceLink, xmsDate string) (string, error) {
	key, err := base64.StdEncoding.DecodeString(masterKey)
	if err != nil {
		return "", err
	}
	sig := base64.StdEncoding.EncodeToString(newSigner(key).sign(signingPayload(verb, resourceType, resourceLink, xmsDate, "")))
	return url.QueryEscape("type=master&ver=1.0&sig=" + sig), nil
}

func unauthorized(msg string) *engine.Error {
	return &engine.Error{Status: 401, Code: "Unauthorized", Message: msg}
}

// EmulatorKey is the well-known master key of the Cosmos DB emulator; Orrery
// uses it by default so every SDK sample works unchanged.
const EmulatorKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// decodeBase64 decodes src into buf when it fits there (a signature, a
// token or a RID, into an array on the caller's stack), else into a new
// slice (longer input: line breaks, which the decoder skips).
func decodeBase64(enc *base64.Encoding, buf, src []byte) ([]byte, error) {
	if enc.DecodedLen(len(src)) <= len(buf) {
		n, err := enc.Decode(buf, src)
		return buf[:n], err
	}
	return enc.DecodeString(string(src))
}
