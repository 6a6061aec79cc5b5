package h1serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// watchDelay is how long a handler runs before its connection is watched
// for the client going away (net/http watches from the start).
const watchDelay = 5 * time.Millisecond

// maxPostHandlerReadBytes is how much of a body the handler left unread is
// read to keep the connection, as net/http's.
const maxPostHandlerReadBytes = 256 << 10

// maxIdleBuf is the largest per-connection buffer (the head's record, the
// answer's header) kept between requests: twice the reader's 4 KiB, which
// a common head fits in. Larger ones are dropped, so that an idle
// connection holds about what net/http's does, whatever its last request
// was.
const maxIdleBuf = 8 << 10

// aLongTimeAgo is a deadline in the past, to stop a pending read.
var aLongTimeAgo = time.Unix(1, 0)

// connReader is the connection under the bufio.Reader: it limits a
// request's headers to MaxHeaderBytes+4096 (as net/http), records the bytes
// the headers are parsed from (for the Host header, which http.ReadRequest
// hides), and runs the background read that notices a client gone.
type connReader struct {
	c      *conn
	remain int64

	recording bool
	rec       []byte

	mu      sync.Mutex
	cond    *sync.Cond
	inRead  bool
	aborted bool
	hasByte bool
	byteBuf [1]byte

	cur     *response // the request being handled, for the watcher
	pending bool      // the watcher fired before the body's end
}

func (cr *connReader) init(c *conn) {
	cr.c = c
	cr.cond = sync.NewCond(&cr.mu)
}

func (cr *connReader) setReadLimit(n int64)  { cr.remain = n }
func (cr *connReader) setInfiniteReadLimit() { cr.remain = math.MaxInt64 }
func (cr *connReader) hitReadLimit() bool    { return cr.remain <= 0 }

func (cr *connReader) Read(p []byte) (int, error) {
	cr.mu.Lock()
	if cr.inRead {
		cr.mu.Unlock()
		panic("h1serve: invalid concurrent Body.Read call")
	}
	if cr.hitReadLimit() {
		cr.mu.Unlock()
		return 0, io.EOF
	}
	if len(p) == 0 {
		cr.mu.Unlock()
		return 0, nil
	}
	if int64(len(p)) > cr.remain {
		p = p[:cr.remain]
	}
	if cr.hasByte {
		p[0] = cr.byteBuf[0]
		cr.hasByte = false
		cr.mu.Unlock()
		cr.got(p[:1])
		return 1, nil
	}
	cr.inRead = true
	cr.mu.Unlock()
	n, err := cr.c.rwc.Read(p)
	cr.mu.Lock()
	cr.inRead = false
	if err != nil {
		cr.handleReadError(err)
	}
	cr.remain -= int64(n)
	cr.mu.Unlock()
	cr.cond.Broadcast()
	cr.got(p[:n])
	return n, err
}

func (cr *connReader) got(p []byte) {
	if cr.recording {
		cr.rec = append(cr.rec, p...)
	}
}

// handleReadError cancels the connection's context: the client is gone or
// the connection broke. Called with cr.mu held.
func (cr *connReader) handleReadError(error) { cr.c.cancelCtx() }

func (cr *connReader) startRecording(br *bufio.Reader) {
	cr.rec = cr.rec[:0]
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		cr.rec = append(cr.rec, b...)
	}
	cr.recording = true
}

// stopRecording returns the bytes the request's head was read from.
func (cr *connReader) stopRecording(br *bufio.Reader) []byte {
	cr.recording = false
	raw := cr.rec[:max(0, len(cr.rec)-br.Buffered())]
	if cap(cr.rec) > maxIdleBuf {
		cr.rec = nil // a large head's buffer is not kept
	}
	return raw
}

// beginRequest arms the watcher for w's handler.
func (cr *connReader) beginRequest(w *response) {
	cr.mu.Lock()
	cr.cur = w
	cr.pending = false
	cr.mu.Unlock()
	c := cr.c
	if c.watch == nil {
		c.watch = time.AfterFunc(watchDelay, cr.watchFired)
	} else {
		c.watch.Reset(watchDelay)
	}
}

// endRequest disarms the watcher and stops a background read.
func (cr *connReader) endRequest() {
	if cr.c.watch != nil {
		cr.c.watch.Stop()
	}
	cr.mu.Lock()
	cr.cur = nil
	cr.pending = false
	cr.mu.Unlock()
}

// watchFired starts the background read for a handler that runs long, once
// its body is read (before that, the body's end starts it).
func (cr *connReader) watchFired() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	w := cr.cur
	if w == nil {
		return
	}
	if w.body != nil && !w.body.sawEOF.Load() {
		cr.pending = true
		return
	}
	cr.startBackgroundReadLocked()
}

// bodyDone is called when w's body hits its end.
func (cr *connReader) bodyDone(w *response) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.cur == w && cr.pending {
		cr.pending = false
		cr.startBackgroundReadLocked()
	}
}

func (cr *connReader) startBackgroundReadLocked() {
	if cr.inRead || cr.hasByte {
		return
	}
	cr.inRead = true
	cr.c.rwc.SetReadDeadline(time.Time{})
	go cr.backgroundRead()
}

func (cr *connReader) backgroundRead() {
	n, err := cr.c.rwc.Read(cr.byteBuf[:])
	cr.mu.Lock()
	if n == 1 {
		cr.hasByte = true
	}
	if ne, ok := err.(net.Error); ok && cr.aborted && ne.Timeout() {
		// Stopped by abortPendingRead: not an error.
	} else if err != nil {
		cr.handleReadError(err)
	}
	cr.aborted = false
	cr.inRead = false
	cr.mu.Unlock()
	cr.cond.Broadcast()
}

func (cr *connReader) abortPendingRead() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if !cr.inRead {
		return
	}
	cr.aborted = true
	cr.c.rwc.SetReadDeadline(aLongTimeAgo)
	for cr.inRead {
		cr.cond.Wait()
	}
	cr.c.rwc.SetReadDeadline(time.Time{})
}

// body wraps a request's body: 100-continue, its end noticed (for the
// watcher and the connection's reuse), a bounded Close.
type body struct {
	w      *response
	rc     io.ReadCloser
	expect bool
	n      int64 // bytes read
	sawEOF atomic.Bool
	closed atomic.Bool
	early  bool // closed by the handler with more than maxPostHandlerReadBytes left
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	w := b.w
	if b.expect && w.canWriteContinue.Load() {
		w.writeContinueMu.Lock()
		if w.canWriteContinue.Load() {
			w.c.bufw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			w.c.bufw.Flush()
			w.canWriteContinue.Store(false)
		}
		w.writeContinueMu.Unlock()
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err == io.EOF && !b.sawEOF.Load() {
		b.sawEOF.Store(true)
		b.takeTrailer()
		w.c.r.bodyDone(w)
	}
	return n, err
}

// takeTrailer gives the handler's request the trailers the body ended
// with: net/http's body stores those a request did not declare (in a
// Trailer header) in the request http.ReadRequest made, which is not the
// handler's here (see readRequest), where net/http's handler sees them.
func (b *body) takeTrailer() {
	if req := b.w.req; req.Trailer == nil && b.w.readReq != nil {
		req.Trailer = b.w.readReq.Trailer
	}
}

// Close closes the body as net/http's does for a server request: the rest
// is read, up to maxPostHandlerReadBytes; beyond, the connection is not
// reused.
func (b *body) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.sawEOF.Load() {
		return b.rc.Close()
	}
	if b.expect {
		// The client may be waiting for a 100 Continue that will not
		// come: nothing is read; the connection closes after the answer.
		return nil
	}
	_, err := io.CopyN(io.Discard, b.rc, maxPostHandlerReadBytes+1)
	if err == io.EOF {
		b.sawEOF.Store(true)
		b.takeTrailer()
		return b.rc.Close()
	}
	b.early = true
	return err // as net/http's: the body's error (a malformed chunk or trailer, a short body), nil when it is only long
}

func isUnsupportedTEError(err error) bool {
	return fmt.Sprintf("%T", err) == "*http.unsupportedTEError"
}

func numLeadingCRorLF(v []byte) (n int) {
	for _, b := range v {
		if b == '\r' || b == '\n' {
			n++
			continue
		}
		break
	}
	return
}

func http1ServerSupportsRequest(req *http.Request) bool {
	if req.ProtoMajor == 1 {
		return true
	}
	return req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*"
}

// hostHeader returns the request's Host header as net/http's server sees it
// (http.ReadRequest removes it from the map): in r.Host when the target is
// not in absolute form; otherwise read from the head's bytes.
func hostHeader(req *http.Request, raw []byte) (string, bool) {
	if req.URL.Host == "" {
		if req.Host != "" {
			return req.Host, true
		}
	}
	// Skip the request line, then look for a Host line.
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		raw = raw[i+1:]
	} else {
		return "", false
	}
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		var line []byte
		if i < 0 {
			line, raw = raw, nil
		} else {
			line, raw = raw[:i], raw[i+1:]
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if len(line) >= 5 && line[4] == ':' && strings.EqualFold(string(line[:4]), "host") {
			return textproto.TrimString(string(line[5:])), true
		}
	}
	return "", false
}

// headerGet is Header.Get for a canonical key without canonicalising it.
func headerGet(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// hasToken reports whether token is one of v's comma-separated elements,
// case-insensitively, as net/http's.
func hasToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !isTokenBoundary(v[sp-1]) {
			continue
		}
		if endPos := sp + len(token); endPos != len(v) && !isTokenBoundary(v[endPos]) {
			continue
		}
		if strings.EqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// readRequest reads the next request as net/http's conn.readRequest does.
func (c *conn) readRequest(ctx context.Context) (*response, error) {
	if c.hijacked() {
		return nil, http.ErrHijacked
	}
	t0 := time.Now()
	var wholeReqDeadline time.Time
	if d := c.srv.readTimeout; d > 0 {
		wholeReqDeadline = t0.Add(d)
	}
	if d := c.srv.writeTimeout; d > 0 {
		defer func() { c.rwc.SetWriteDeadline(time.Now().Add(d)) }()
	}
	c.r.setReadLimit(c.srv.initialReadLimitSize())
	if c.lastMethod == "POST" {
		peek, _ := c.bufr.Peek(4)
		c.bufr.Discard(numLeadingCRorLF(peek))
	}
	c.r.startRecording(c.bufr)
	// The response is made once a head has begun (not for the end of a
	// connection): parseWhole makes the request in it. readHead reads the
	// head this peek buffered.
	var w *response
	_, err := c.bufr.Peek(1)
	var req *http.Request
	if err == nil {
		w = &response{c: c, contentLength: -1}
		req, err = c.readHead(c.bufr, w)
	}
	raw := c.r.stopRecording(c.bufr)
	if err != nil {
		if c.r.hitReadLimit() {
			return nil, errTooLarge
		}
		return nil, err
	}
	if !http1ServerSupportsRequest(req) {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	c.lastMethod = req.Method
	c.r.setInfiniteReadLimit()

	host, haveHost := hostHeader(req, raw)
	isH2Upgrade := req.Method == "PRI" && len(req.Header) == 0 && !haveHost && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
	if req.ProtoAtLeast(1, 1) && !haveHost && !isH2Upgrade && req.Method != "CONNECT" {
		return nil, badRequest("missing required Host header")
	}
	if haveHost && !httpguts.ValidHostHeader(host) {
		return nil, badRequest("malformed Host header")
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, badRequest("invalid header name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, badRequest("invalid header value")
			}
		}
	}

	c.rwc.SetReadDeadline(wholeReqDeadline)

	w.wants10KeepAlive = req.ProtoMajor == 1 && req.ProtoMinor == 0 && hasToken(headerGet(req.Header, "Connection"), "keep-alive")
	w.wantsClose = req.Close || hasToken(headerGet(req.Header, "Connection"), "close")
	// The request and its context are kept in the response's allocation:
	// WithContext, inlined here, copies it there instead of into an
	// allocation of its own. One parseWhole made is there already (its
	// URL and body too), with no trailer to take.
	w.ctx.init(ctx)
	if req != &w.reqStore {
		w.readReq = req
	}
	w.reqStore = *req.WithContext(&w.ctx)
	req = &w.reqStore
	req.RemoteAddr = c.remoteAddr
	req.TLS = c.tlsState
	w.req = req
	w.reqBody = req.Body
	if req.Body != http.NoBody && req.Body != nil {
		w.bodyStore = body{w: w, rc: req.Body}
		w.body = &w.bodyStore
		req.Body = w.body
		w.reqBody = w.body
	}
	if isH2Upgrade {
		w.closeAfterReply = true
	}
	if c.header == nil {
		c.header = make(http.Header)
	} else {
		clear(c.header)
	}
	w.handlerHeader = c.header
	return w, nil
}
