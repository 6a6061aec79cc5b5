package h1serve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.x on listeners with net/http's semantics (see the
// package doc). Build it with New from the http.Server it replaces.
type Server struct {
	hs                *http.Server // the configuration; for http.ServerContextKey
	handler           http.Handler
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxHeaderBytes    int
	connState         func(net.Conn, http.ConnState)
	connContext       func(context.Context, net.Conn) context.Context
	baseContext       func(net.Listener) context.Context
	errorLog          *log.Logger

	inShutdown atomic.Bool
	mu         sync.Mutex
	listeners  map[*net.Listener]struct{}
	conns      map[*conn]struct{}
	lnGroup    sync.WaitGroup
}

// ErrUnsupported is returned by New for an http.Server whose configuration
// this server does not implement.
var ErrUnsupported = errors.New("h1serve: unsupported http.Server configuration")

// New returns a Server configured as hs: Handler, the four timeouts,
// MaxHeaderBytes, ConnState, ConnContext, BaseContext and ErrorLog. It
// refuses what it does not implement (TLSNextProto, a TLSConfig to serve
// TLS itself, HTTP/2 protocols, DisableGeneralOptionsHandler off is kept as
// net/http's default only when a Handler is set), so that nothing configured
// is silently dropped.
func New(hs *http.Server) (*Server, error) {
	if hs.Handler == nil || len(hs.TLSNextProto) > 0 || hs.TLSConfig != nil || hs.Protocols != nil ||
		hs.HTTP2 != nil || hs.DisableGeneralOptionsHandler {
		return nil, ErrUnsupported
	}
	s := &Server{hs: hs, handler: hs.Handler, readHeaderTimeout: hs.ReadHeaderTimeout, readTimeout: hs.ReadTimeout,
		writeTimeout: hs.WriteTimeout, idleTimeout: hs.IdleTimeout, maxHeaderBytes: hs.MaxHeaderBytes,
		connState: hs.ConnState, connContext: hs.ConnContext, baseContext: hs.BaseContext, errorLog: hs.ErrorLog}
	if s.readHeaderTimeout <= 0 {
		s.readHeaderTimeout = s.readTimeout
	}
	if s.idleTimeout <= 0 {
		s.idleTimeout = s.readTimeout
	}
	if s.maxHeaderBytes <= 0 {
		s.maxHeaderBytes = http.DefaultMaxHeaderBytes
	}
	return s, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.errorLog != nil {
		s.errorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (s *Server) tlsHandshakeTimeout() time.Duration {
	var ret time.Duration
	for _, v := range [...]time.Duration{s.hs.ReadHeaderTimeout, s.readTimeout, s.writeTimeout} {
		if v > 0 && (ret == 0 || v < ret) {
			ret = v
		}
	}
	return ret
}

// Serve accepts connections on ln and serves each on its own goroutine,
// as http.Server.Serve; it returns http.ErrServerClosed after Shutdown or
// Close.
func (s *Server) Serve(ln net.Listener) error {
	if !s.trackListener(&ln, true) {
		return http.ErrServerClosed
	}
	defer s.trackListener(&ln, false)
	baseCtx := context.Background()
	if s.baseContext != nil {
		if baseCtx = s.baseContext(ln); baseCtx == nil {
			panic("BaseContext returned a nil context")
		}
	}
	ctx := context.WithValue(baseCtx, http.ServerContextKey, s.hs)
	var tempDelay time.Duration
	for {
		rw, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return http.ErrServerClosed
			}
			if ne, ok := err.(net.Error); ok && ne.Temporary() { //nolint:staticcheck // as net/http
				if tempDelay == 0 {
					tempDelay = 5 * time.Millisecond
				} else {
					tempDelay *= 2
				}
				tempDelay = min(tempDelay, time.Second)
				s.logf("http: Accept error: %v; retrying in %v", err, tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			return err
		}
		connCtx := ctx
		if s.connContext != nil {
			if connCtx = s.connContext(connCtx, rw); connCtx == nil {
				panic("ConnContext returned nil")
			}
		}
		tempDelay = 0
		c := &conn{srv: s, rwc: rw}
		c.setState(http.StateNew)
		go c.serve(connCtx)
	}
}

func (s *Server) trackListener(ln *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners == nil {
		s.listeners = make(map[*net.Listener]struct{})
	}
	if add {
		if s.inShutdown.Load() {
			return false
		}
		s.listeners[ln] = struct{}{}
		s.lnGroup.Add(1)
	} else {
		delete(s.listeners, ln)
		s.lnGroup.Done()
	}
	return true
}

func (s *Server) trackConn(c *conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	if add {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *Server) closeListenersLocked() error {
	var err error
	for ln := range s.listeners {
		if cerr := (*ln).Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// Shutdown closes the listeners, then the idle connections, and waits for
// the active ones to finish their request and close (they answer with
// Connection: close), as http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	s.mu.Lock()
	lnerr := s.closeListenersLocked()
	s.mu.Unlock()
	s.lnGroup.Wait()
	base := time.Millisecond
	next := func() time.Duration {
		d := base + time.Duration(rand.Int64N(int64(base/10)))
		base = min(base*2, 500*time.Millisecond)
		return d
	}
	timer := time.NewTimer(next())
	defer timer.Stop()
	for {
		if s.closeIdleConns() {
			return lnerr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			timer.Reset(next())
		}
	}
}

func (s *Server) closeIdleConns() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	quiescent := true
	for c := range s.conns {
		st, unixSec := c.getState()
		if st == http.StateNew && unixSec < time.Now().Unix()-5 {
			st = http.StateIdle
		}
		if st != http.StateIdle || unixSec == 0 {
			quiescent = false
			continue
		}
		c.rwc.Close()
		delete(s.conns, c)
	}
	return quiescent
}

// Close closes the listeners and every connection at once, as
// http.Server.Close.
func (s *Server) Close() error {
	s.inShutdown.Store(true)
	s.mu.Lock()
	err := s.closeListenersLocked()
	s.mu.Unlock()
	s.lnGroup.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.rwc.Close()
		delete(s.conns, c)
	}
	return err
}

// conn is one connection.
type conn struct {
	srv        *Server
	rwc        net.Conn
	remoteAddr string
	tlsState   *tls.ConnectionState
	cancelCtx  context.CancelFunc
	r          connReader
	bufr       *bufio.Reader
	bufw       *bufio.Writer
	werr       error
	curState   atomic.Uint64
	lastMethod string

	mu        sync.Mutex // guards hijackedv
	hijackedv bool

	// Reused per request (see response).
	header  http.Header
	hdrBuf  hdrBuf
	hdrKeys []string // writeHeaderLines's scratch
	// splitHead's scratch.
	splitLines []splitLine
	splitRest  []byte

	// parseWhole's scratch.
	wholeLines []wholeLine
	outBuf     []byte
	exclude    map[string]bool
	watch      *time.Timer
	dateCache  dateCache
}

func (c *conn) setState(state http.ConnState) {
	switch state {
	case http.StateNew:
		c.srv.trackConn(c, true)
	case http.StateHijacked, http.StateClosed:
		c.srv.trackConn(c, false)
	}
	c.curState.Store(uint64(time.Now().Unix()<<8) | uint64(state))
	if hook := c.srv.connState; hook != nil {
		hook(c.rwc, state)
	}
}

func (c *conn) getState() (http.ConnState, int64) {
	p := c.curState.Load()
	return http.ConnState(p & 0xff), int64(p >> 8)
}

func (c *conn) hijacked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hijackedv
}

// connWriter notes the first write error.
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
		w.c.cancelCtx()
	}
	return n, err
}

var errTooLarge = errors.New("http: request too large")

// statusError is a request refused with a status, as net/http's.
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

func badRequest(e string) error { return statusError{http.StatusBadRequest, e} }

func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	if oe, ok := err.(*net.OpError); ok && oe.Op == "read" {
		return true
	}
	return false
}

func tlsRecordHeaderLooksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

const rstAvoidanceDelay = 500 * time.Millisecond

func (c *conn) finalFlush() {
	if c.bufw != nil {
		c.bufw.Flush()
	}
}

func (c *conn) close() {
	c.finalFlush()
	c.rwc.Close()
}

func (c *conn) closeWriteAndWait() {
	c.finalFlush()
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

func (c *conn) serve(ctx context.Context) {
	if ra := c.rwc.RemoteAddr(); ra != nil {
		c.remoteAddr = ra.String()
	}
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, c.rwc.LocalAddr())
	var inFlight *response
	defer func() {
		if err := recover(); err != nil && err != http.ErrAbortHandler {
			const size = 64 << 10
			buf := make([]byte, size)
			buf = buf[:runtime.Stack(buf, false)]
			c.srv.logf("http: panic serving %v: %v\n%s", c.remoteAddr, err, buf)
		}
		if inFlight != nil {
			inFlight.ctx.end()
			inFlight.disableWriteContinue()
		}
		if c.watch != nil {
			c.watch.Stop()
		}
		if !c.hijacked() {
			if inFlight != nil {
				c.r.endRequest()
				c.r.abortPendingRead()
				inFlight.reqBody.Close()
			}
			c.close()
			c.setState(http.StateClosed)
		}
	}()

	if tlsConn, ok := c.rwc.(*tls.Conn); ok {
		tlsTO := c.srv.tlsHandshakeTimeout()
		if tlsTO > 0 {
			dl := time.Now().Add(tlsTO)
			c.rwc.SetReadDeadline(dl)
			c.rwc.SetWriteDeadline(dl)
		}
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			var reason string
			if re, ok := err.(tls.RecordHeaderError); ok && re.Conn != nil && tlsRecordHeaderLooksLikeHTTP(re.RecordHeader) {
				io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
				re.Conn.Close()
				reason = "client sent an HTTP request to an HTTPS server"
			} else {
				reason = err.Error()
			}
			c.srv.logf("http: TLS handshake error from %s: %v", c.rwc.RemoteAddr(), reason)
			return
		}
		if tlsTO > 0 {
			c.rwc.SetReadDeadline(time.Time{})
			c.rwc.SetWriteDeadline(time.Time{})
		}
		c.tlsState = new(tls.ConnectionState)
		*c.tlsState = tlsConn.ConnectionState()
		// No TLSNextProto (New refuses one): a connection that agreed on
		// another protocol than HTTP/1 is closed unanswered, as net/http
		// closes it when it has no handler for that protocol.
		switch c.tlsState.NegotiatedProtocol {
		case "", "http/1.1", "http/1.0":
		default:
			return
		}
	}
	if c.tlsState == nil {
		if tc, ok := c.rwc.(interface{ ConnectionState() tls.ConnectionState }); ok {
			c.tlsState = new(tls.ConnectionState)
			*c.tlsState = tc.ConnectionState()
		}
	}

	ctx, cancelCtx := context.WithCancel(ctx)
	c.cancelCtx = cancelCtx
	defer cancelCtx()

	c.r.init(c)
	c.bufr = bufio.NewReader(&c.r)
	c.bufw = bufio.NewWriterSize(connWriter{c}, 4<<10)

	if d := c.srv.readHeaderTimeout; d > 0 {
		c.rwc.SetReadDeadline(time.Now().Add(d))
	}

	for {
		w, err := c.readRequest(ctx)
		if c.r.remain != c.srv.initialReadLimitSize() {
			c.setState(http.StateActive)
		}
		if c.srv.inShutdown.Load() {
			return
		}
		if err != nil {
			const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
			switch {
			case err == errTooLarge:
				const publicErr = "431 Request Header Fields Too Large"
				fmt.Fprintf(c.rwc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
				c.closeWriteAndWait()
				return
			case isUnsupportedTEError(err):
				code := http.StatusNotImplemented
				fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s%sUnsupported transfer encoding", code, http.StatusText(code), errorHeaders)
				return
			case isCommonNetReadError(err):
				return
			default:
				if v, ok := err.(statusError); ok {
					fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s: %s%s%d %s: %s", v.code, http.StatusText(v.code), v.text, errorHeaders, v.code, http.StatusText(v.code), v.text)
					return
				}
				const publicErr = "400 Bad Request"
				fmt.Fprintf(c.rwc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
				return
			}
		}

		req := w.req
		if hasToken(headerGet(req.Header, "Expect"), "100-continue") {
			if req.ProtoAtLeast(1, 1) && req.ContentLength != 0 {
				w.body.expect = true
				w.canWriteContinue.Store(true)
			}
		} else if headerGet(req.Header, "Expect") != "" {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusExpectationFailed)
			w.finishRequest()
			return
		}

		c.r.beginRequest(w)
		inFlight = w
		if req.RequestURI == "*" && req.Method == "OPTIONS" {
			w.serveGlobalOptions() // as net/http's serverHandler
		} else {
			c.srv.handler.ServeHTTP(w, w.req)
		}
		inFlight = nil
		c.r.endRequest()
		w.ctx.end()
		if c.hijacked() {
			return
		}
		w.finishRequest()
		// The header map is reused: emptied now, so that an idle
		// connection holds none of its last answer's values (which may
		// point into a request's body).
		clear(c.header)
		if cap(c.hdrBuf.b) > maxIdleBuf {
			c.hdrBuf.b = nil
		}
		c.rwc.SetWriteDeadline(time.Time{})
		if !w.shouldReuseConnection() {
			if w.requestBodyLimitHit || w.closedRequestBodyEarly() {
				c.closeWriteAndWait()
			}
			return
		}
		c.setState(http.StateIdle)
		if c.srv.inShutdown.Load() {
			return
		}
		if d := c.srv.idleTimeout; d > 0 {
			c.rwc.SetReadDeadline(time.Now().Add(d))
		} else {
			c.rwc.SetReadDeadline(time.Time{})
		}
		if _, err := c.bufr.Peek(4); err != nil {
			return
		}
		if d := c.srv.readHeaderTimeout; d > 0 {
			c.rwc.SetReadDeadline(time.Now().Add(d))
		} else {
			c.rwc.SetReadDeadline(time.Time{})
		}
	}
}

func (s *Server) initialReadLimitSize() int64 { return int64(s.maxHeaderBytes) + 4096 }
