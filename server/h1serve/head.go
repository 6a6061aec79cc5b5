package h1serve

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// The header lines an SDK sends are parsed here instead of by
// http.ReadRequest, which makes a string per value and per key that is not
// one of net/textproto's common headers (no x-ms- header is): about half a
// point read's allocations. Here the values are substrings of one string
// and the keys are interned.
//
// It is done only where the result is provably http.ReadRequest's, and
// http.ReadRequest still reads the request: when the whole head is in the
// reader's buffer, its lines end in CRLF, no line is folded, every byte of
// its header lines is printable ASCII, space or tab, the target is in
// origin form (so the Host line names the host), the version is HTTP/1.1,
// there is at most one Host line and no Pragma line, splitHead takes out the
// lines whose key is one of sdkHeaderKeys (in any case, followed at once by
// the colon) and the Host line, and leaves in the buffer, for
// http.ReadRequest, the request line and every other line, in their order.
// Those keys are ones http.ReadRequest never reads nor changes (it reads
// Host, Content-Length, Transfer-Encoding, Connection, Trailer, Pragma and
// Cache-Control when Pragma is set), and textproto accepts such a line
// always, as the key its CanonicalMIMEHeaderKey makes and the value trimmed
// of spaces and tabs at both ends: so http.ReadRequest refuses the rest
// exactly when it would refuse the whole head, makes of it the same
// request, and the header it makes and the lines taken out here have no key
// in common. Anything else is left whole to http.ReadRequest.

// sdkHeaderNames are the header names the Cosmos DB SDKs (Go, .NET, Java,
// JavaScript, Python) send, lower case. None may be one http.ReadRequest
// reads (see above): TestSDKHeaderKeysAreNoneHTTPReadRequestReads.
var sdkHeaderNames = []string{
	"accept", "accept-encoding", "accept-language", "authorization", "cache-control", "content-type",
	"expect", "if-match", "if-modified-since", "if-none-match", "prefer", "a-im", "user-agent",
	"traceparent", "tracestate", "x-ms-activity-id", "x-ms-consistency-level", "x-ms-continuation",
	"x-ms-date", "x-ms-version", "x-ms-session-token", "x-ms-max-item-count", "x-ms-offer-throughput",
	"x-ms-offer-type", "x-ms-indexing-directive", "x-ms-start-epk", "x-ms-end-epk", "x-ms-useragent",
	"x-ms-client-request-id", "x-ms-read-key-type",
	"x-ms-cosmos-sdk-supportedcapabilities", "x-ms-cosmos-is-batch-request", "x-ms-cosmos-batch-atomic",
	"x-ms-cosmos-batch-continue-on-error", "x-ms-cosmos-is-query-plan-request", "x-ms-cosmos-supported-query-features",
	"x-ms-cosmos-query-version", "x-ms-cosmos-correlated-activityid", "x-ms-cosmos-priority-level",
	"x-ms-cosmos-populateindexmetrics", "x-ms-cosmos-populateindexmetrics-v2", "x-ms-cosmos-intended-collection-rid",
	"x-ms-cosmos-changefeed-wire-format-version", "x-ms-cosmos-allow-tentative-writes",
	"x-ms-cosmos-query-optimisticdirectexecute", "x-ms-cosmos-offer-autopilot-settings", "x-ms-cosmos-min-throughput",
	"x-ms-documentdb-partitionkey", "x-ms-documentdb-partitionkeyrangeid", "x-ms-documentdb-is-upsert",
	"x-ms-documentdb-isquery", "x-ms-documentdb-query", "x-ms-documentdb-query-enablecrosspartition",
	"x-ms-documentdb-query-enable-scan", "x-ms-documentdb-query-parallelizecrosspartitionquery",
	"x-ms-documentdb-query-iscontinuationexpected", "x-ms-documentdb-populatequerymetrics",
	"x-ms-documentdb-populatequotainfo", "x-ms-documentdb-responsecontinuationtokenlimitinkb",
	"x-ms-documentdb-pre-trigger-include", "x-ms-documentdb-post-trigger-include",
	"x-ms-documentdb-expiry-seconds", "x-ms-documentdb-script-enable-logging",
	"x-ms-documentdb-populatepartitionstatistics", "x-ms-documentdb-content-serialization-format",
}

// sdkHeaderKeys maps each of sdkHeaderNames to its canonical key, as
// textproto.CanonicalMIMEHeaderKey makes it.
var sdkHeaderKeys = func() map[string]string {
	m := make(map[string]string, len(sdkHeaderNames))
	for _, n := range sdkHeaderNames {
		m[n] = textproto.CanonicalMIMEHeaderKey(n)
	}
	return m
}()

// maxSplitKey is the longest key looked up in sdkHeaderKeys (longer ones are
// left to http.ReadRequest).
const maxSplitKey = 64

// maxSplitLines is the most header lines splitHead takes a head of.
const maxSplitLines = 128

// splitLine is a header line taken out of a head: its key and where its
// value is in the head (in the block of values, once splitHead returns).
type splitLine struct {
	key        string
	start, end int
}

// headLines walks the header lines of a head at the start of buf, from
// pos (the line after the request line), for splitHead and parseWhole:
// each call of next walks one line and reports true, until the head's
// empty line (end is then the head's length) or a line that makes the head
// not plain (end stays 0): a line not ending in CRLF within buf (the head
// goes on past the buffer, or a bare LF), the maxSplitLines+1st header
// line, a folded line, a byte that is not printable ASCII, space or tab.
type headLines struct {
	buf []byte
	pos int // where the next line starts
	n   int // the header lines walked
	end int // the head's length, once its empty line is walked

	// The line walked last: buf[start:pos], its CRLF included.
	start int
	// colon is the index in the line of its first colon (-1: none);
	// token tells whether the bytes before it are a token (none are not).
	colon int
	token bool
	// vs, ve: where the value (after the colon) is in buf, without the
	// spaces and tabs at both ends.
	vs, ve int
	// lower[:nameLen] is the key lower-cased when the line has a colon
	// within maxSplitKey bytes (see name).
	nameLen int
	lower   [maxSplitKey]byte
}

// name is the key of the line walked last, lower-cased, when it has a
// colon within maxSplitKey bytes; else nil.
func (h *headLines) name() []byte {
	if h.nameLen < 0 {
		return nil
	}
	return h.lower[:h.nameLen]
}

func (h *headLines) next() bool {
	buf := h.buf
	i := bytes.IndexByte(buf[h.pos:], '\n')
	if i < 1 || buf[h.pos+i-1] != '\r' {
		return false // the head goes on past the buffer, or a bare LF
	}
	line := buf[h.pos : h.pos+i-1]
	h.start = h.pos
	h.pos += i + 1
	if len(line) == 0 {
		h.end = h.pos
		return false
	}
	if h.n++; h.n > maxSplitLines || line[0] == ' ' || line[0] == '\t' {
		return false // too many lines, or a folded one
	}
	h.colon, h.token = -1, true
	for j, b := range line {
		if b == ':' && h.colon < 0 {
			h.colon = j
		} else if h.colon < 0 && !tokenBytes[b] {
			h.token = false
		}
		if (b < 0x20 || b > 0x7e) && b != '\t' {
			return false
		}
	}
	h.nameLen = -1
	if h.colon < 1 {
		h.token = false
	}
	if h.colon < 0 {
		return true
	}
	h.vs, h.ve = h.start+h.colon+1, h.start+len(line)
	for h.vs < h.ve && (buf[h.vs] == ' ' || buf[h.vs] == '\t') {
		h.vs++
	}
	for h.ve > h.vs && (buf[h.ve-1] == ' ' || buf[h.ve-1] == '\t') {
		h.ve--
	}
	if h.colon <= maxSplitKey {
		for j, b := range line[:h.colon] {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			h.lower[j] = b
		}
		h.nameLen = h.colon
	}
	return true
}

// splitHead takes the SDK's header lines and the Host line out of the head
// at the start of buf, the bytes buffered in c.bufr (see above). When it
// does, it writes the rest of the head back into the buffer, just before
// the bytes that follow the head, and returns how many bytes of buf to
// discard to start there, the lines taken out (valid until the next call),
// the string their values are in and the Host line's value. skip < 0: the
// head is left whole to http.ReadRequest.
func (c *conn) splitHead(buf []byte) (skip int, split []splitLine, block, host string) {
	// The request line: "METHOD /target HTTP/1.1".
	eol := bytes.IndexByte(buf, '\n')
	if eol < 1 || buf[eol-1] != '\r' {
		return -1, nil, "", ""
	}
	line := buf[:eol-1]
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 || sp+1 >= len(line) || line[sp+1] != '/' || !bytes.HasSuffix(line, []byte(" HTTP/1.1")) {
		return -1, nil, "", ""
	}
	rest, lines := c.splitRest[:0], c.splitLines[:0]
	defer func() { c.splitRest, c.splitLines = rest[:0], lines[:0] }() // kept for the next head
	rest = append(rest, buf[:eol+1]...)
	hostAt := [2]int{-1, -1}
	hl := headLines{buf: buf, pos: eol + 1}
	for hl.next() {
		name := hl.name()
		if name == nil {
			rest = append(rest, buf[hl.start:hl.pos]...)
			continue
		}
		switch string(name) {
		case "host":
			if hostAt[0] >= 0 {
				return -1, nil, "", "" // http.ReadRequest refuses two
			}
			hostAt = [2]int{hl.vs, hl.ve}
			continue
		case "pragma":
			return -1, nil, "", "" // http.ReadRequest may set Cache-Control
		}
		key, ok := sdkHeaderKeys[string(name)]
		if !ok {
			rest = append(rest, buf[hl.start:hl.pos]...)
			continue
		}
		lines = append(lines, splitLine{key: key, start: hl.vs, end: hl.ve})
	}
	headEnd := hl.end
	if headEnd == 0 {
		return -1, nil, "", "" // not plain, or the head goes on past the buffer
	}
	if len(lines) == 0 {
		return -1, nil, "", ""
	}
	rest = append(rest, '\r', '\n')

	// One string holds every value taken out.
	first := eol + 1
	block = string(buf[first:headEnd])
	for i := range lines {
		lines[i].start -= first
		lines[i].end -= first
	}
	if hostAt[0] >= 0 {
		host = block[hostAt[0]-first : hostAt[1]-first]
	}
	skip = headEnd - len(rest)
	copy(buf[skip:headEnd], rest)
	return skip, lines, block, host
}

// readHead reads a request from br as http.ReadRequest(br) does: parsed by
// parseWhole where it can, into w (the response the request is for: its
// reqStore, urlStore and clStore), else by http.ReadRequest, the SDK's
// header lines taken out of its head first where splitHead can.
//
// Its caller has peeked a byte of br (readRequest does, to know that a
// head has begun before it makes the response), so that the head is
// looked at once buffered, as http.ReadRequest's first read would buffer
// it; an error of that peek is the one http.ReadRequest would return.
func (c *conn) readHead(br *bufio.Reader, w *response) (*http.Request, error) {
	var split []splitLine
	var block, host string
	if buf, _ := br.Peek(br.Buffered()); len(buf) > 0 {
		if n := c.parseWhole(buf, br, w); n > 0 {
			br.Discard(n)
			return &w.reqStore, nil
		}
		var skip int
		if skip, split, block, host = c.splitHead(buf); skip >= 0 {
			br.Discard(skip)
		}
	}
	req, err := http.ReadRequest(br)
	if err != nil || split == nil {
		return req, err
	}
	// The header and host http.ReadRequest would have made of the whole
	// head: its header has none of split's keys; the target is in origin
	// form, so the Host line names the host. Added to its map, which has
	// room for as many keys as lines were left to it, split's lines cost
	// fewer allocations than a map of their own.
	h := req.Header
	vals := make([]string, len(split))
	for i, l := range split {
		v := block[l.start:l.end]
		if vv := h[l.key]; vv != nil {
			h[l.key] = append(vv, v)
		} else {
			vals[i] = v
			h[l.key] = vals[i : i+1 : i+1]
		}
	}
	req.Host = host
	return req, nil
}

// The whole head is parsed here, and http.ReadRequest not called, when the
// head is of the plain form splitHead asks for (see above) and, moreover,
// valid, with nothing in it that http.ReadRequest changes the request for:
// the method a token, the target an origin-form path of bytes url.URL
// keeps as they are (no escape, so Path is the target and RawPath empty)
// and any query, every key a token, no Host line twice, no
// Transfer-Encoding (so no chunked body and no trailers), no Pragma, at
// most one Content-Length, of 1 to 18 digits. The request made is then
// the one http.ReadRequest would make: Method, RequestURI and the header's
// values substrings of one string, the keys interned (or textproto's
// canonical keys), Host out of the header and in req.Host, Close when a
// Connection line has the token close, the body the Content-Length's
// bytes read as net/http's body reads them. Anything else (an error
// included) is left to splitHead and http.ReadRequest, which answer it as
// before.

// wholeHeaderKeys maps the lower-case keys parseWhole interns to their
// canonical keys: the SDKs' and the few others clients commonly send.
var wholeHeaderKeys = func() map[string]string {
	m := make(map[string]string, len(sdkHeaderKeys)+16)
	for n, k := range sdkHeaderKeys {
		m[n] = k
	}
	for _, n := range []string{"content-length", "connection", "keep-alive", "trailer", "te", "upgrade", "cookie",
		"origin", "referer", "range", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-real-ip",
		"x-request-id", "via"} {
		m[n] = textproto.CanonicalMIMEHeaderKey(n)
	}
	return m
}()

// pathBytes are the bytes url.URL keeps in a path as they are: unescaped,
// and not escaped by URL.EscapedPath (shouldEscape's encodePath mode).
var pathBytes = byteSet("-._~/$&+,:;=@")

// tokenBytes are the bytes a header key or a method may hold (RFC 7230
// tchar), as textproto's validHeaderFieldByte and net/http's isToken.
var tokenBytes = byteSet("!#$%&'*+-.^_`|~")

// byteSet is the ASCII letters and digits and the bytes of extra.
func byteSet(extra string) *[256]bool {
	var set [256]bool
	for b := range 256 {
		set[b] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
	}
	for i := range len(extra) {
		set[extra[i]] = true
	}
	return &set
}

// wholeLine is a header line of a head parseWhole reads: its key and
// where its value is in the head.
type wholeLine struct {
	key        string
	start, end int
}

// parseWhole parses the head at the start of buf, the bytes buffered in
// c.bufr, into the request the handler will see, w.reqStore (its URL
// w.urlStore, its body w.clStore reading from br), when it is of the form
// described above, and returns the head's length; 0 when it leaves it to
// splitHead and http.ReadRequest (w's fields are then left as they were).
func (c *conn) parseWhole(buf []byte, br *bufio.Reader, w *response) int {
	// The request line: "METHOD /target HTTP/1.1".
	eol := bytes.IndexByte(buf, '\n')
	if eol < 1 || buf[eol-1] != '\r' {
		return 0
	}
	line := buf[:eol-1]
	sp := bytes.IndexByte(line, ' ')
	if sp < 1 || !bytes.HasSuffix(line, []byte(" HTTP/1.1")) {
		return 0
	}
	for _, b := range line[:sp] {
		if !tokenBytes[b] {
			return 0
		}
	}
	targetEnd := len(line) - len(" HTTP/1.1")
	if sp+1 >= targetEnd || line[sp+1] != '/' {
		return 0
	}
	q := -1
	for i := sp + 1; i < targetEnd; i++ {
		b := line[i]
		if q < 0 && b == '?' {
			q = i
			continue
		}
		if q < 0 && !pathBytes[b] || q >= 0 && (b <= 0x20 || b > 0x7e) {
			return 0
		}
	}

	lines := c.wholeLines[:0]
	defer func() { c.wholeLines = lines[:0] }() // kept for the next head
	hostAt := [2]int{-1, -1}
	clAt := [2]int{-1, -1}
	hl := headLines{buf: buf, pos: eol + 1}
	for hl.next() {
		if !hl.token {
			return 0 // an invalid key
		}
		key := ""
		if name := hl.name(); name != nil {
			switch string(name) {
			case "host":
				if hostAt[0] >= 0 {
					return 0 // http.ReadRequest refuses two
				}
				hostAt = [2]int{hl.vs, hl.ve}
				continue
			case "content-length":
				if clAt[0] >= 0 {
					return 0 // two: refused or deduplicated by http.ReadRequest
				}
				clAt = [2]int{hl.vs, hl.ve}
				key = "Content-Length"
			case "pragma", "transfer-encoding":
				return 0
			default:
				key = wholeHeaderKeys[string(name)]
			}
		}
		if key == "" {
			// The key, canonicalized once the head's string is made,
			// then its value.
			lines = append(lines, wholeLine{start: hl.start, end: hl.start + hl.colon})
			lines = append(lines, wholeLine{start: hl.vs, end: hl.ve})
			continue
		}
		lines = append(lines, wholeLine{key: key, start: hl.vs, end: hl.ve})
	}
	headEnd, n := hl.end, hl.n
	if headEnd == 0 {
		return 0 // not plain, or the head goes on past the buffer
	}
	var cl int64
	if clAt[0] >= 0 {
		d := buf[clAt[0]:clAt[1]]
		if len(d) == 0 || len(d) > 18 {
			return 0
		}
		for _, b := range d {
			if b < '0' || b > '9' {
				return 0
			}
			cl = cl*10 + int64(b-'0')
		}
	}

	// One string holds the request line and every value.
	block := string(buf[:headEnd])
	// The common methods interned: the connection keeps the last one
	// (lastMethod), which would otherwise keep the head's string.
	method := block[:sp]
	switch method {
	case "GET":
		method = "GET"
	case "POST":
		method = "POST"
	case "PUT":
		method = "PUT"
	case "PATCH":
		method = "PATCH"
	case "DELETE":
		method = "DELETE"
	case "HEAD":
		method = "HEAD"
	case "OPTIONS":
		method = "OPTIONS"
	}
	target := block[sp+1 : targetEnd]
	u := &w.urlStore
	*u = url.URL{}
	switch {
	case q < 0:
		u.Path = target
	case q == targetEnd-1: // the only '?'
		u.Path, u.ForceQuery = target[:len(target)-1], true
	default:
		u.Path, u.RawQuery = target[:q-sp-1], target[q-sp:]
	}
	if hostAt[0] >= 0 {
		n-- // a key fewer: at most 8 keys fit a map's smallest form (2 allocations; 4 beyond)
	}
	h := make(http.Header, n)
	vals := make([]string, n)
	nv := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		key := l.key
		if key == "" {
			key = textproto.CanonicalMIMEHeaderKey(block[l.start:l.end])
			i++
			l = lines[i]
		}
		v := block[l.start:l.end]
		if vv := h[key]; vv != nil {
			h[key] = append(vv, v)
		} else {
			vals[nv] = v
			h[key] = vals[nv : nv+1 : nv+1]
			nv++
		}
	}
	host := ""
	if hostAt[0] >= 0 {
		host = block[hostAt[0]:hostAt[1]]
	}
	w.reqStore = http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          http.NoBody,
		ContentLength: cl,
		Close:         httpguts.HeaderValuesContainsToken(h["Connection"], "close"),
		Host:          host,
		RequestURI:    target,
	}
	if cl > 0 {
		w.clStore.init(br, cl, w.reqStore.Close)
		w.reqStore.Body = &w.clStore
	}
	return headEnd
}

// clBody is a body of Content-Length bytes, read as net/http's body reads
// one (Read, Close and their errors), for the requests parseWhole makes.
type clBody struct {
	mu      sync.Mutex
	r       *bufio.Reader
	n       int64 // bytes left
	closing bool  // the request's Close
	sawEOF  bool
	closed  bool
}

func (b *clBody) init(r *bufio.Reader, n int64, closing bool) {
	b.r, b.n, b.closing, b.sawEOF, b.closed = r, n, closing, false, false
}

func (b *clBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *clBody) readLocked(p []byte) (n int, err error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	// io.LimitedReader's Read.
	if b.n <= 0 {
		err = io.EOF
	} else {
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err = b.r.Read(p)
		b.n -= int64(n)
	}
	if err == io.EOF {
		b.sawEOF = true
		if b.n > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && b.n == 0 {
		err = io.EOF
		b.sawEOF = true
	}
	return n, err
}

// Close is net/http's body's Close for a body with no trailer: the rest is
// read, unless its end was seen or the connection closes next (h1serve's
// body calls it only once the end was seen).
func (b *clBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	if !b.sawEOF && !b.closing {
		_, err = io.Copy(io.Discard, readerFunc(b.readLocked))
	}
	b.closed = true
	return err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
