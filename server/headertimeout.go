package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// net/http cuts a request whose headers do not arrive within
// ReadHeaderTimeout with a plain-text 400 (when the request line is
// incomplete) or by closing the connection without a word (when a header
// is). Orrery answers such a request as it answers a body that does not
// arrive in time: 408 RequestTimeout in the service's error format, then
// the connection is closed. The connections of Server.Listener time the
// headers themselves, from a request's first byte until its handler starts,
// and write the 408 before net/http's own, slightly later, limit passes.

// headerGrace is how much later than Limits.HeaderTimeout net/http's own
// ReadHeaderTimeout passes, so that the 408 is written first.
const headerGrace = 2 * time.Second

// Listener wraps ln so that a request whose headers do not arrive within
// Limits.HeaderTimeout is answered 408 in the service's format. Serve the
// HTTPServer on it. TLS connections (server.DualListener's) are passed
// through: net/http cuts their late headers itself, two seconds later.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &headerTimeoutListener{Listener: ln, timeout: s.limits.HeaderTimeout}
}

type headerTimeoutListener struct {
	net.Listener
	timeout time.Duration
}

func (l *headerTimeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if _, ok := c.(*tls.Conn); ok {
		// net/http must see the *tls.Conn itself (for the handshake,
		// r.TLS and HTTP/2), and a 408 would have to go through TLS:
		// HTTPS connections keep net/http's header limit.
		return c, nil
	}
	return &headerConn{Conn: c, timeout: l.timeout}, nil
}

// headerConn times the headers of each request on one connection.
type headerConn struct {
	net.Conn
	timeout time.Duration

	mu       sync.Mutex
	waiting  bool        // between requests: the next byte starts a request
	timer    *time.Timer // running while a request's headers arrive
	answered bool        // the 408 is written: later writes are dropped
}

func (c *headerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.waiting && !c.answered {
			c.waiting = false
			c.timer = time.AfterFunc(c.timeout, c.headersLate)
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *headerConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	answered := c.answered
	c.mu.Unlock()
	if answered {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// awaitRequest is called between requests (the connection is new or idle).
func (c *headerConn) awaitRequest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
	c.waiting = true
}

// headersDone is called when a request's handler starts.
func (c *headerConn) headersDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
	c.waiting = false
}

func (c *headerConn) stopLocked() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// headersLate answers the request whose headers did not arrive in time
// and closes the connection.
func (c *headerConn) headersLate() {
	c.mu.Lock()
	if c.timer == nil || c.answered {
		c.mu.Unlock()
		return
	}
	c.timer = nil
	c.answered = true
	c.mu.Unlock()
	activity := newActivityID()
	body, _ := json.Marshal(errorBody{Code: "RequestTimeout",
		Message: fmt.Sprintf("The request headers did not arrive within the server's time limit (%v).", c.timeout) +
			"\r\nActivityId: " + activity + ", " + gatewayVersion})
	resp := fmt.Sprintf("HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"x-ms-activity-id: %s\r\nx-ms-request-charge: 0\r\nConnection: close\r\n\r\n", len(body), activity)
	c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.Conn.Write(append([]byte(resp), body...))
	c.Conn.Close()
}

type headerConnKey struct{}

// headerConnContext puts a connection's headerConn into its requests'
// contexts, for markHeadersDone.
func headerConnContext(ctx context.Context, c net.Conn) context.Context {
	if hc, ok := c.(*headerConn); ok {
		return context.WithValue(ctx, headerConnKey{}, hc)
	}
	return ctx
}

// headerConnState starts timing at each request's first byte.
func headerConnState(c net.Conn, st http.ConnState) {
	if hc, ok := c.(*headerConn); ok {
		switch st {
		case http.StateNew, http.StateIdle:
			hc.awaitRequest()
		case http.StateHijacked, http.StateClosed:
			hc.headersDone()
		}
	}
}

// markHeadersDone stops the header timer of r's connection: r's headers
// have arrived.
func markHeadersDone(r *http.Request) {
	if hc, ok := r.Context().Value(headerConnKey{}).(*headerConn); ok {
		hc.headersDone()
	}
}
