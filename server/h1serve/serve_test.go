package h1serve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzRawRequestsAreAnsweredAlike feeds any bytes, in two writes, to both
// servers and compares the answers.
func FuzzRawRequestsAreAnsweredAlike(f *testing.F) {
	for _, tc := range rawCases() {
		if tc.tune == nil && len(tc.chunks) == 1 && len(tc.chunks[0]) < 4096 {
			f.Add([]byte(tc.chunks[0]), uint16(len(tc.chunks[0])/2))
		}
	}
	std, ours := servers(f, diffHandler(), nil)
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		s := string(data)
		k := min(int(split), len(s))
		chunks := []string{s[:k], s[k:]}
		var methods []string
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "HEAD ") {
				methods = nil // which answer is a HEAD's is not tracked
				t.Skip("HEAD in a fuzzed stream")
			}
		}
		a, b := sendToBoth(t, std, ours, chunks, true, methods, false)
		compareExchanges(t, a, b, false)
	})
}

// TestADepartedClientsRequestHasItsContextCancelled: a handler still
// running when its client goes away sees its context cancelled, on both
// servers.
func TestADepartedClientsRequestHasItsContextCancelled(t *testing.T) {
	for _, halfClose := range []bool{false, true} {
		got := make(chan error, 2)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body) // both watch the connection once the body is read
			select {
			case <-r.Context().Done():
				got <- r.Context().Err()
			case <-time.After(10 * time.Second):
				got <- errors.New("not cancelled")
			}
		})
		std, ours := servers(t, h, nil)
		for _, addr := range []string{std, ours} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
			time.Sleep(50 * time.Millisecond)
			if halfClose {
				c.(*net.TCPConn).CloseWrite()
			} else {
				c.Close()
			}
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Errorf("%s (half-close %v): the handler's context: %v", addr, halfClose, err)
			}
			c.Close()
		}
	}
}

// TestShutdownWaitsForTheRequestInFlightAndClosesIdleConnections.
func TestShutdownWaitsForTheRequestInFlightAndClosesIdleConnections(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var states []http.ConnState
	stateCh := make(chan http.ConnState, 64)
	s, err := New(&http.Server{Handler: h, ErrorLog: quiet, ConnState: func(c net.Conn, st http.ConnState) { stateCh <- st }})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(idle, "GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
	ibr := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(ibr, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("idle connection's first answer: %v %v", resp, err)
	} else {
		io.ReadAll(io.LimitReader(resp.Body, 100))
	}
	busy, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// The idle connection is closed.
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Errorf("the idle connection: %v, want EOF", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a request in flight: %v", err)
	default:
	}
	close(release)
	br := bufio.NewReader(busy)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request in flight was not answered: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "done" || !resp.Close {
		t.Errorf("answer in flight: %q, Connection: close %v", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve returned %v", err)
	}
	// The hooks run after the connection is untracked: wait for both
	// connections' StateClosed.
	count := map[http.ConnState]int{}
	for count[http.StateClosed] < 2 {
		select {
		case st := <-stateCh:
			states = append(states, st)
			count[st]++
		case <-time.After(10 * time.Second):
			t.Fatalf("connection states: %v", states)
		}
	}
	if count[http.StateNew] != 2 || count[http.StateActive] != 2 || count[http.StateIdle] != 1 {
		t.Errorf("connection states: %v", states)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Errorf("still accepting after Shutdown")
	}
}

// TestAnIdleConnectionIsClosedAtItsIdleTimeout, on both servers.
func TestAnIdleConnectionIsClosedAtItsIdleTimeout(t *testing.T) {
	std, ours := servers(t, diffHandler(), func(hs *http.Server) { hs.IdleTimeout = 100 * time.Millisecond })
	for _, addr := range []string{std, ours} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /small HTTP/1.1\r\nHost: a\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: idle connection read: %v, want EOF", addr, err)
		}
		c.Close()
	}
}

// TestHeadersThatDoNotArriveInTimeCloseTheConnection (ReadHeaderTimeout),
// on both servers.
func TestHeadersThatDoNotArriveInTimeCloseTheConnection(t *testing.T) {
	std, ours := servers(t, diffHandler(), func(hs *http.Server) { hs.ReadHeaderTimeout = 100 * time.Millisecond })
	var got []exchange
	for _, addr := range []string{std, ours} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /small HTTP/1.1\r\nHost: a\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
		}
		got = append(got, exchange{rest: string(b)})
		c.Close()
	}
	if got[0].rest != got[1].rest {
		t.Errorf("late headers: net/http wrote %q, h1serve %q", got[0].rest, got[1].rest)
	}
}

// TestHTTPSRequestsCarryTheConnectionsTLSStateAndRemoteAddr.
func TestHTTPSRequestsCarryTheConnectionsTLSStateAndRemoteAddr(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || !r.TLS.HandshakeComplete || r.RemoteAddr == "" {
			http.Error(w, "no TLS state or remote address", 500)
			return
		}
		io.WriteString(w, r.RemoteAddr)
	})
	ts := httptest.NewUnstartedServer(h) // for its certificate
	ts.StartTLS()
	cert := ts.TLS.Certificates[0]
	client := ts.Client()
	ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(&http.Server{Handler: h, ErrorLog: quiet})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}}))
	defer s.Close()
	for i := 0; i < 2; i++ {
		resp, err := client.Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "127.0.0.1:") {
			t.Errorf("answer %d: %s", resp.StatusCode, body)
		}
	}
}

// TestNewRefusesWhatItDoesNotImplement.
func TestNewRefusesWhatItDoesNotImplement(t *testing.T) {
	h := http.NotFoundHandler()
	for _, hs := range []*http.Server{
		{},
		{Handler: h, TLSConfig: &tls.Config{}},
		{Handler: h, TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){"h2": nil}},
	} {
		if _, err := New(hs); !errors.Is(err, ErrUnsupported) {
			t.Errorf("New(%+v) = %v", hs, err)
		}
	}
}

// TestAConnectionThatNegotiatedAnotherProtocolIsClosedAsNetHTTPClosesIt:
// a TLS listener offering ALPN protocols may agree on one neither server
// speaks (here h2, with no TLSNextProto): net/http then closes the
// connection unanswered, and so must h1serve; an HTTP/1.1 agreement is
// served.
func TestAConnectionThatNegotiatedAnotherProtocolIsClosedAsNetHTTPClosesIt(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ts := httptest.NewUnstartedServer(h) // for its certificate
	ts.StartTLS()
	cert := ts.TLS.Certificates[0]
	ts.Close()
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	listen := func(serve func(net.Listener) error) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go serve(tls.NewListener(ln, serverTLS))
		return ln.Addr().String()
	}
	std := &http.Server{Handler: h, ErrorLog: quiet, TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	defer std.Close()
	ours, err := New(&http.Server{Handler: h, ErrorLog: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	servers := map[string]string{"net/http": listen(std.Serve), "h1serve": listen(ours.Serve)}
	ask := func(addr, proto string) string {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if got := c.ConnectionState().NegotiatedProtocol; got != proto {
			t.Fatalf("negotiated %q, want %q", got, proto)
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		b, err := io.ReadAll(c)
		if len(b) == 0 {
			return "closed unanswered"
		}
		line, _, _ := strings.Cut(string(b), "\r\n")
		return line
	}
	for name, addr := range servers {
		if got := ask(addr, "h2"); got != "closed unanswered" {
			t.Errorf("%s, h2 agreed: %q, want the connection closed unanswered", name, got)
		}
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 200 OK\r\n") {
			t.Errorf("%s, http/1.1 agreed: %q", name, b)
		}
	}
}
