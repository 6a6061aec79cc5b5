package h1serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunkingSize is how much of a body is held before the header
// is written, as net/http's: a handler that finishes within it gets a
// Content-Length; one that writes more, chunked encoding.
const bufferBeforeChunkingSize = 2048

// special are the header keys the framing decides; the rest of a handler's
// header is written as it was at WriteHeader.
var special = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Content-Type": true}

var excludedHeadersNoBody = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}

// response is the http.ResponseWriter of one request.
type response struct {
	c             *conn
	req           *http.Request // &reqStore
	reqStore      http.Request  // the request, allocated with the response
	readReq       *http.Request // the request http.ReadRequest made, whose Trailer the body sets
	reqBody       io.ReadCloser
	body          *body          // nil without a body; else &bodyStore
	bodyStore     body           // the body's wrapper, allocated with the response
	urlStore      url.URL        // the URL of a request parseWhole made
	clStore       clBody         // the body of a request parseWhole made
	ctx           requestContext // the request's context
	handlerHeader http.Header

	calledHeader        bool
	wroteHeader         bool
	committed           bool // the header is in the connection's buffer
	handlerDone         atomic.Bool
	status              int
	contentLength       int64
	written             int64
	wants10KeepAlive    bool
	wantsClose          bool
	closeAfterReply     bool
	requestBodyLimitHit bool
	chunking            bool
	fullDuplex          bool

	canWriteContinue atomic.Bool
	writeContinueMu  sync.Mutex

	// The header as it was at WriteHeader: the other keys serialized
	// into conn.hdrBuf, these kept apart.
	hCL, hTE, hConn, hCT  []string
	hasCL, hasConn, hasCT bool
	hasDate, hasUpgrade   bool
	hCE                   string
	connForClose          string // Connection as net/http's close check sees it
	trailerKeys           []string
	trailers              bool
}

func (w *response) Header() http.Header {
	w.calledHeader = true
	return w.handlerHeader
}

func checkWriteHeaderCode(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
}

func (w *response) disableWriteContinue() {
	w.writeContinueMu.Lock()
	w.canWriteContinue.Store(false)
	w.writeContinueMu.Unlock()
}

func (w *response) WriteHeader(code int) {
	if w.c.hijacked() {
		w.c.srv.logf("http: response.WriteHeader on hijacked connection")
		return
	}
	if w.wroteHeader {
		w.c.srv.logf("http: superfluous response.WriteHeader call")
		return
	}
	checkWriteHeaderCode(code)
	if code < 101 || code > 199 {
		w.disableWriteContinue()
	}
	bw := w.c.bufw
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), code)
		w.handlerHeader.WriteSubset(bw, excludedHeadersNoBody)
		bw.WriteString("\r\n")
		bw.Flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	h := w.handlerHeader
	if cl := headerGet(h, "Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logf("http: invalid Content-Length of %q", cl)
			h.Del("Content-Length")
		}
	}
	w.snapshot()
}

// snapshot keeps the header as it is now, as net/http's clone does.
func (w *response) snapshot() {
	h := w.handlerHeader
	w.hCL, w.hasCL = h["Content-Length"]
	w.hTE = h["Transfer-Encoding"]
	w.hConn, w.hasConn = h["Connection"]
	w.hCT, w.hasCT = h["Content-Type"]
	_, w.hasDate = h["Date"]
	_, w.hasUpgrade = h["Upgrade"]
	w.hCE = h.Get("Content-Encoding")
	if w.calledHeader {
		w.connForClose = headerGet(h, "Connection")
	}
	exclude := special
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			if !w.trailers {
				exclude = make(map[string]bool, len(special)+1)
				for k := range special {
					exclude[k] = true
				}
			}
			exclude[k] = true
			w.trailers = true
		}
	}
	for _, v := range h["Trailer"] {
		w.trailers = true
		foreachHeaderElement(v, func(k string) {
			k = http.CanonicalHeaderKey(k)
			if httpguts.ValidTrailerHeader(k) {
				w.trailerKeys = append(w.trailerKeys, k)
			}
		})
	}
	w.c.writeHeaderLines(h, exclude)
}

// maxIdleKeys is the most header keys whose scratch a connection keeps
// between answers.
const maxIdleKeys = 64

// writeHeaderLines serializes h's lines but exclude's into c.hdrBuf,
// byte for byte as http.Header.WriteSubset does (keys sorted, invalid
// names dropped, values' CR and LF turned to spaces and the values
// trimmed), without its pooled sorter, its closure's comparisons and its
// writes through an interface: this runs on every answer.
func (c *conn) writeHeaderLines(h http.Header, exclude map[string]bool) {
	keys := c.hdrKeys[:0]
	for k := range h {
		if !exclude[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b := c.hdrBuf.b[:0]
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue // as net/http: dropped
		}
		for _, v := range h[k] {
			if strings.IndexByte(v, '\n') >= 0 || strings.IndexByte(v, '\r') >= 0 {
				v = headerNewlineToSpace.Replace(v)
			}
			v = textproto.TrimString(v)
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	c.hdrBuf.b = b
	clear(keys) // an idle connection keeps no key alive
	if cap(keys) > maxIdleKeys {
		keys = nil
	}
	c.hdrKeys = keys[:0]
}

func foreachHeaderElement(v string, fn func(string)) {
	v = strings.TrimSpace(v)
	if v == "" {
		return
	}
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			fn(f)
		}
	}
}

// hdrBuf collects a header's lines.
type hdrBuf struct{ b []byte }

func (h *hdrBuf) Write(p []byte) (int, error) { h.b = append(h.b, p...); return len(p), nil }
func (h *hdrBuf) WriteString(s string) (int, error) {
	h.b = append(h.b, s...)
	return len(s), nil
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199, status == 204, status == 304:
		return false
	}
	return true
}

func writeStatusLine(bw *bufio.Writer, is11 bool, code int) {
	if is11 {
		bw.WriteString("HTTP/1.1 ")
	} else {
		bw.WriteString("HTTP/1.0 ")
	}
	if text := http.StatusText(code); text != "" {
		writeInt(bw, int64(code), 10)
		bw.WriteByte(' ')
		bw.WriteString(text)
		bw.WriteString("\r\n")
	} else {
		fmt.Fprintf(bw, "%03d status code %d\r\n", code, code)
	}
}

// writeInt writes v in base to bw, formatted in bw's free space: a
// scratch array passed to bw.Write escapes (a write larger than the free
// space goes to the connection), which costs an allocation per call.
func writeInt(bw *bufio.Writer, v int64, base int) {
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), v, base))
}

var headerNewlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

func writeHeaderLines(bw *bufio.Writer, key string, vv []string) {
	for _, v := range vv {
		v = strings.Trim(headerNewlineToSpace.Replace(v), " \t")
		bw.WriteString(key)
		bw.WriteString(": ")
		bw.WriteString(v)
		bw.WriteString("\r\n")
	}
}

func first(vv []string) string {
	if len(vv) > 0 {
		return vv[0]
	}
	return ""
}

// commit decides the framing and writes the header, as net/http's
// chunkWriter.writeHeader; p is the first part of the body.
func (w *response) commit(p []byte) {
	if w.committed {
		return
	}
	w.committed = true
	c := w.c
	keepAlives := !c.srv.inShutdown.Load()
	isHEAD := w.req.Method == "HEAD"
	te := first(w.hTE)
	hasTE := te != ""
	var delCL, delTE, delConn, delCT bool
	var setConn, setTE, setCT string
	setCL := int64(-1) // a Content-Length the framing adds, written without formatting a string

	if w.handlerDone.Load() && !w.trailers && !hasTE && bodyAllowedForStatus(w.status) && !w.hasCL && (!isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		setCL = int64(len(p))
	}
	if w.wants10KeepAlive && keepAlives {
		if first(w.hCL) != "" && first(w.hConn) == "keep-alive" {
			w.closeAfterReply = false
		}
	}
	hasCL := w.contentLength != -1
	if w.wants10KeepAlive && (isHEAD || hasCL || !bodyAllowedForStatus(w.status)) {
		if !w.hasConn {
			setConn = "keep-alive"
		}
	} else if !w.req.ProtoAtLeast(1, 1) || w.wantsClose {
		w.closeAfterReply = true
	}
	if first(w.hConn) == "close" || !keepAlives {
		w.closeAfterReply = true
	}
	b := w.body
	if b != nil && b.expect && !b.sawEOF.Load() {
		w.closeAfterReply = true
	}
	if w.req.ContentLength != 0 && !w.closeAfterReply && !w.fullDuplex && b != nil && !b.expect {
		var discard, tooBig bool
		switch {
		case b.closed.Load():
			if !b.sawEOF.Load() {
				w.closeAfterReply = true
			}
		case b.sawEOF.Load():
		case w.req.ContentLength > 0 && w.req.ContentLength-b.n >= maxPostHandlerReadBytes:
			tooBig = true
		default:
			discard = true
		}
		if discard {
			_, err := io.CopyN(io.Discard, b.rc, maxPostHandlerReadBytes+1)
			switch err {
			case nil:
				tooBig = true
			case io.EOF:
				b.sawEOF.Store(true)
				if b.rc.Close() != nil {
					w.closeAfterReply = true
				}
			default:
				w.closeAfterReply = true
			}
		}
		if tooBig {
			w.closeAfterReply = true
			w.requestBodyLimitHit = true
			delConn = true
			setConn = "close"
		}
	}
	if bodyAllowedForStatus(w.status) {
		if w.hCE == "" && !w.hasCT && !hasTE && len(p) > 0 {
			setCT = http.DetectContentType(p)
		}
	} else {
		if w.status == 304 {
			delCT = true
		}
		delCL, delTE = true, true
	}
	if hasCL && hasTE && te != "identity" {
		c.srv.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		delCL = true
		hasCL = false
	}
	if isHEAD || !bodyAllowedForStatus(w.status) || w.status == http.StatusNoContent {
		delTE = true
	} else if hasCL {
		delTE = true
	} else if w.req.ProtoAtLeast(1, 1) {
		if hasTE && te == "identity" {
			w.chunking = false
			w.closeAfterReply = true
			delTE = true
		} else {
			w.chunking = true
			setTE = "chunked"
			if hasTE && te == "chunked" {
				delTE = true
			}
		}
	} else {
		w.closeAfterReply = true
		delTE = true
	}
	if w.chunking {
		delCL = true
	}
	if w.closeAfterReply && (!keepAlives || !hasToken(w.connForClose, "close")) && !(w.status == http.StatusSwitchingProtocols && w.hasUpgrade) {
		delConn = true
		if w.req.ProtoAtLeast(1, 1) {
			setConn = "close"
		}
	}

	bw := c.bufw
	writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), w.status)
	bw.Write(c.hdrBuf.b)
	if !delCL {
		writeHeaderLines(bw, "Content-Length", w.hCL)
	}
	if !delConn {
		writeHeaderLines(bw, "Connection", w.hConn)
	}
	if !delCT {
		writeHeaderLines(bw, "Content-Type", w.hCT)
	}
	if !delTE {
		writeHeaderLines(bw, "Transfer-Encoding", w.hTE)
	}
	if !w.hasDate {
		bw.WriteString("Date: ")
		bw.Write(c.dateCache.now())
		bw.WriteString("\r\n")
	}
	if setCL >= 0 {
		bw.WriteString("Content-Length: ")
		writeInt(bw, setCL, 10)
		bw.WriteString("\r\n")
	}
	for i, v := range [...]string{setCT, setConn, setTE} {
		if v != "" {
			bw.WriteString([...]string{"Content-Type: ", "Connection: ", "Transfer-Encoding: "}[i])
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
}

// dateCache formats the Date header once a second.
type dateCache struct {
	sec int64
	b   []byte
}

func (d *dateCache) now() []byte {
	t := time.Now()
	if s := t.Unix(); s != d.sec || d.b == nil {
		d.sec = s
		d.b = t.UTC().AppendFormat(d.b[:0], http.TimeFormat)
	}
	return d.b
}

// writeBody writes part of the body, framed.
func (w *response) writeBody(p []byte) (int, error) {
	if len(p) == 0 || w.req.Method == "HEAD" {
		return len(p), nil
	}
	bw := w.c.bufw
	if w.chunking {
		writeInt(bw, int64(len(p)), 16)
		bw.WriteString("\r\n")
	}
	n, err := bw.Write(p)
	if w.chunking && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	return n, err
}

func (w *response) Write(data []byte) (int, error) { return w.write(len(data), data, "") }

func (w *response) WriteString(s string) (int, error) { return w.write(len(s), nil, s) }

// write writes dataB or, when it is nil, dataS (as net/http's, so that
// WriteString does not copy its string).
func (w *response) write(lenData int, dataB []byte, dataS string) (int, error) {
	if dataB == nil && lenData > 0 && w.committed {
		// Past the header, a string goes through without a copy.
		if err := w.preWrite(lenData); err != nil {
			return 0, err
		}
		return w.writeBodyString(dataS)
	}
	data := dataB
	if data == nil && lenData > 0 {
		data = []byte(dataS) // before the header: buffered or sniffed
	}
	if err := w.preWrite(len(data)); err != nil || len(data) == 0 {
		return 0, err
	}
	if w.committed {
		return w.writeBody(data)
	}
	out := w.c.outBuf
	if len(out)+len(data) <= bufferBeforeChunkingSize {
		w.c.outBuf = append(out, data...)
		return len(data), nil
	}
	k := bufferBeforeChunkingSize - len(out)
	out = append(out, data[:k]...)
	w.c.outBuf = out[:0]
	w.commit(out)
	if _, err := w.writeBody(out); err != nil {
		return 0, err
	}
	n, err := w.writeBody(data[k:])
	return k + n, err
}

// preWrite does a write's checks, as net/http's, and counts it.
func (w *response) preWrite(lenData int) error {
	if w.c.hijacked() {
		if lenData > 0 {
			w.c.srv.logf("http: response.Write on hijacked connection")
		}
		return http.ErrHijacked
	}
	if w.canWriteContinue.Load() {
		w.disableWriteContinue()
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if lenData == 0 {
		return nil
	}
	if !bodyAllowedForStatus(w.status) {
		return http.ErrBodyNotAllowed
	}
	w.written += int64(lenData)
	if w.contentLength != -1 && w.written > w.contentLength {
		return http.ErrContentLength
	}
	return nil
}

// writeBodyString is writeBody for a string.
func (w *response) writeBodyString(s string) (int, error) {
	if len(s) == 0 || w.req.Method == "HEAD" {
		return len(s), nil
	}
	bw := w.c.bufw
	if w.chunking {
		writeInt(bw, int64(len(s)), 16)
		bw.WriteString("\r\n")
	}
	n, err := bw.WriteString(s)
	if w.chunking && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	return n, err
}

// flushOut commits the header and writes what the body buffer holds.
func (w *response) flushOut() error {
	out := w.c.outBuf
	w.c.outBuf = out[:0]
	if !w.committed {
		w.commit(out)
	}
	_, err := w.writeBody(out)
	return err
}

func (w *response) finishRequest() {
	w.handlerDone.Store(true)
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.flushOut()
	bw := w.c.bufw
	if w.chunking {
		bw.WriteString("0\r\n")
		if w.trailers {
			w.writeTrailers(bw)
		}
		bw.WriteString("\r\n")
	}
	bw.Flush()
	w.c.r.abortPendingRead()
	w.reqBody.Close()
	if w.req.MultipartForm != nil {
		w.req.MultipartForm.RemoveAll()
	}
}

func (w *response) writeTrailers(bw *bufio.Writer) {
	h := w.handlerHeader
	t := make(http.Header)
	for k, vv := range h {
		if kk, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			t[kk] = vv
		}
	}
	for _, k := range w.trailerKeys {
		for _, v := range h[k] {
			t.Add(k, v)
		}
	}
	t.Write(bw)
}

func (w *response) shouldReuseConnection() bool {
	if w.closeAfterReply {
		return false
	}
	if w.req.Method != "HEAD" && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written {
		return false
	}
	if w.c.werr != nil {
		return false
	}
	return !w.closedRequestBodyEarly()
}

func (w *response) closedRequestBodyEarly() bool { return w.body != nil && w.body.early }

// Flush sends what is buffered, as net/http's Flush.
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush returning its error (http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	err := w.flushOut()
	if e2 := w.c.bufw.Flush(); err == nil {
		err = e2
	}
	return err
}

// SetReadDeadline sets the connection's read deadline (http.ResponseController).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.rwc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline (http.ResponseController).
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.rwc.SetWriteDeadline(t) }

// EnableFullDuplex lets the handler read the body while writing the answer
// (http.ResponseController).
func (w *response) EnableFullDuplex() error {
	w.fullDuplex = true
	return nil
}

// Hijack hands the connection to the handler, as net/http's.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.handlerDone.Load() {
		panic("net/http: Hijack called after ServeHTTP finished")
	}
	w.disableWriteContinue()
	c := w.c
	if w.wroteHeader {
		if !w.committed {
			w.commit(nil)
		}
		c.bufw.Flush()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hijackedv {
		return nil, nil, http.ErrHijacked
	}
	c.r.endRequest()
	c.r.abortPendingRead()
	c.hijackedv = true
	rwc := c.rwc
	rwc.SetDeadline(time.Time{})
	if c.r.hasByte {
		if _, err := c.bufr.Peek(c.bufr.Buffered() + 1); err != nil {
			return nil, nil, fmt.Errorf("unexpected Peek failure reading buffered byte: %v", err)
		}
	}
	c.bufw.Reset(rwc)
	buf := bufio.NewReadWriter(c.bufr, c.bufw)
	c.setState(http.StateHijacked)
	return rwc, buf, nil
}

// serveGlobalOptions answers "OPTIONS *" as net/http's globalOptionsHandler
// (which net/http's server uses instead of the Handler unless
// DisableGeneralOptionsHandler, which New refuses): an empty 200, the body
// read up to 4 KiB and the connection closed when it is longer (as
// http.MaxBytesReader's limit does, which cannot reach this response).
func (w *response) serveGlobalOptions() {
	w.Header().Set("Content-Length", "0")
	if w.req.ContentLength != 0 {
		const limit = 4 << 10
		if n, _ := io.Copy(io.Discard, io.LimitReader(w.req.Body, limit+1)); n > limit {
			w.closeAfterReply = true
			w.requestBodyLimitHit = true
			if !w.wroteHeader {
				w.Header().Set("Connection", "close")
			}
		}
	}
}
