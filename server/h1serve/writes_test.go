package h1serve

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// writeCountingListener counts the writes made to its connections.
type writeCountingListener struct {
	net.Listener
	mu     sync.Mutex
	writes []int // the sizes, in order
}

func (l *writeCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeCountingConn{Conn: c, l: l}, nil
}

type writeCountingConn struct {
	net.Conn
	l *writeCountingListener
}

func (c *writeCountingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes = append(c.l.writes, len(p))
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// TestAResponseThatFitsTheWriteBufferIsOneWriteToItsConnection: a
// response's status line, header and body, when together they fit the
// connection's write buffer (4 KiB, as net/http's), reach the connection in
// one write (over TLS, one record and one write(2)), whether the handler
// wrote the body in one piece or several, with a Content-Length it set or
// one the server computed.
func TestAResponseThatFitsTheWriteBufferIsOneWriteToItsConnection(t *testing.T) {
	body := bytes.Repeat([]byte(`{"id":"r1","pk":"p1","v":12345}`), 90) // 2880 bytes
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-ms-session-token", "0:1#12")
		w.Header().Set("etag", `"00000000-0000-0000-0000-000000000001"`)
		switch r.URL.Path {
		case "/small": // the server computes the length
			w.Write(body[:700])
		case "/pieces": // past the sniffing buffer, in three writes
			w.Write(body[:1000])
			w.Write(body[1000:2200])
			w.Write(body[2200:])
		case "/length": // the handler's own length, one write
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &writeCountingListener{Listener: inner}
	s, err := New(&http.Server{Handler: h, ErrorLog: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/small", "/pieces", "/length", "/empty", "/small"} {
		ln.mu.Lock()
		before := len(ln.writes)
		ln.mu.Unlock()
		resp, err := client.Get("http://" + inner.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		ln.mu.Lock()
		writes := ln.writes[before:]
		ln.mu.Unlock()
		if len(writes) != 1 {
			t.Errorf("%s: %d writes to the connection %v, want 1 (body %d bytes)", path, len(writes), writes, len(got))
		}
	}
}
