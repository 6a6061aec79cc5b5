package h1serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
	"weak"
)

// heapAfterGC is the live heap after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// idleConns opens n connections to addr, sends each one GET of path with a
// head of about headBytes, reads its answer and leaves it open (idle).
func idleConns(t *testing.T, addr, path string, n, headBytes int) []net.Conn {
	t.Helper()
	head := "GET " + path + " HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", headBytes/1010) + "\r\n"
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", path, resp.Status)
		}
	}
	return conns
}

// TestAnIdleConnectionKeepsNoLargeBufferOfItsLastRequest: a connection
// whose last request had a large head, or whose last answer a large
// header, holds no more memory once idle than net/http's does (give or
// take a buffer of 8 KiB): many idle connections cannot be made to hold
// 64 KiB each.
func TestAnIdleConnectionKeepsNoLargeBufferOfItsLastRequest(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/", diffHandler())
	mux.HandleFunc("/big-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 50<<10))
		io.WriteString(w, "ok")
	})
	std, ours := servers(t, mux, nil)
	const n = 200
	for _, tc := range []struct {
		path      string
		headBytes int
	}{{"/small", 50 << 10}, {"/big-header", 100}} {
		per := map[string]int64{}
		for _, addr := range []string{std, ours} {
			before := heapAfterGC()
			conns := idleConns(t, addr, tc.path, n, tc.headBytes)
			per[addr] = (int64(heapAfterGC()) - int64(before)) / n
			for _, c := range conns {
				c.Close()
			}
		}
		t.Logf("%s, head of %d bytes: bytes per idle connection: net/http %d, h1serve %d", tc.path, tc.headBytes, per[std], per[ours])
		if per[ours] > per[std]+12<<10 {
			t.Errorf("%s, head of %d bytes: an idle connection holds %d bytes, net/http's %d", tc.path, tc.headBytes, per[ours], per[std])
		}
	}
}

// trickle writes s to c a byte at a time, every gap, until the server
// closes the connection; it returns how many bytes were written.
func trickle(c net.Conn, s string, gap time.Duration) int {
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(closed)
	}()
	for i := range len(s) {
		select {
		case <-closed:
			return i
		case <-time.After(gap):
		}
		if _, err := io.WriteString(c, s[i:i+1]); err != nil {
			return i
		}
	}
	<-closed
	return len(s)
}

// TestATrickledRequestIsCutAtItsTimeouts: headers sent a byte at a time (on
// a new connection and on a kept-alive one) are cut at ReadHeaderTimeout,
// a body sent a byte at a time at ReadTimeout, on both servers: long before
// the whole request is in.
func TestATrickledRequestIsCutAtItsTimeouts(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	std, ours := servers(t, h, func(hs *http.Server) {
		hs.ReadHeaderTimeout = 200 * time.Millisecond
		hs.ReadTimeout = 400 * time.Millisecond
		hs.IdleTimeout = 30 * time.Second
	})
	pad := strings.Repeat("X-Pad: p\r\n", 300) // 3,000 bytes: 60 s at 20 ms a byte
	first := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	cases := []struct {
		name, lead, slow string
	}{
		{"headers", "", "GET / HTTP/1.1\r\nHost: a\r\n" + pad + "\r\n"},
		{"headers after a kept-alive request", first, "GET / HTTP/1.1\r\nHost: a\r\n" + pad + "\r\n"},
		{"body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3000\r\n\r\n", strings.Repeat("b", 3000)},
		{"chunked body", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", strings.Repeat("1\r\nb\r\n", 500) + "0\r\n\r\n"},
	}
	for _, tc := range cases {
		for _, addr := range []string{std, ours} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if tc.lead != "" {
				io.WriteString(c, tc.lead)
			}
			if tc.lead == first {
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
			}
			if n := trickle(c, tc.slow, 20*time.Millisecond); n == len(tc.slow) {
				t.Errorf("%s, %s: the whole request was taken, byte by byte", tc.name, addr)
			}
			c.Close()
		}
	}
}

// TestAHandlersHeaderNeverReachesAnotherRequestsAnswer: the header map is
// one per connection; under concurrent keep-alive and pipelined requests,
// with 1xx answers, errors, trailers, hijacks and panics in between, each
// answer carries its own request's header and nothing of another's.
func TestAHandlersHeaderNeverReachesAnotherRequestsAnswer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		hd := w.Header()
		if len(hd) != 0 {
			panic(fmt.Sprintf("request %s: its header starts with %v", id, hd))
		}
		hd.Set("X-Id", id)
		hd.Set("X-Id-"+id, "1")
		switch r.URL.Path {
		case "/1xx":
			w.WriteHeader(http.StatusEarlyHints)
		case "/error":
			http.Error(w, "no", http.StatusTeapot)
			return
		case "/trailer":
			hd.Set("Trailer", "X-T-"+id)
			io.WriteString(w, "body")
			hd.Set("X-T-"+id, id)
			return
		case "/panic":
			if r.URL.Query().Get("late") != "" {
				io.WriteString(w, strings.Repeat("p", 3000))
			}
			panic(http.ErrAbortHandler)
		case "/late":
			w.WriteHeader(200)
			hd.Set("X-Late-"+id, "1") // not sent
		}
		io.WriteString(w, id)
	})
	_, ours := servers(t, h, nil)
	paths := []string{"/", "/1xx", "/error", "/trailer", "/late", "/", "/panic", "/"}
	const clients, rounds = 8, 60
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				c, err := net.Dial("tcp", ours)
				if err != nil {
					t.Error(err)
					return
				}
				// A pipelined batch, each request with its own id; the
				// answers up to the first panic are checked.
				var sb strings.Builder
				var ids, got []string
				for i, p := range paths {
					id := fmt.Sprintf("%d-%d-%d", g, round, i)
					q := "?id=" + id
					if p == "/panic" && round%2 == 1 {
						q += "&late=1"
					}
					fmt.Fprintf(&sb, "GET %s%s HTTP/1.1\r\nHost: a\r\n\r\n", p, q)
					ids = append(ids, id)
				}
				if round%3 == 0 {
					io.WriteString(c, sb.String())
				} else {
					for _, line := range strings.SplitAfter(sb.String(), "\r\n\r\n") {
						io.WriteString(c, line)
					}
				}
				br := bufio.NewReader(c)
				for i := range paths {
					if paths[i] == "/panic" {
						break
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Errorf("answer %s: %v", ids[i], err)
						bad.Add(1)
						break
					}
					if resp.StatusCode == http.StatusEarlyHints {
						if v := resp.Header.Get("X-Id"); v != ids[i] || len(resp.Header) != 2 {
							t.Errorf("103 of %s: %v", ids[i], resp.Header)
							bad.Add(1)
						}
						if resp, err = http.ReadResponse(br, nil); err != nil {
							t.Errorf("answer %s: %v", ids[i], err)
							bad.Add(1)
							break
						}
					}
					io.Copy(io.Discard, resp.Body)
					got = append(got, ids[i])
					for k, vv := range resp.Header {
						if strings.HasPrefix(k, "X-") && k != "X-Id" && k != "X-Id-"+ids[i] && k != "X-Content-Type-Options" {
							t.Errorf("answer %s carries %s: %v", ids[i], k, vv)
							bad.Add(1)
						}
					}
					for k := range resp.Trailer {
						if k != "X-T-"+ids[i] {
							t.Errorf("answer %s carries trailer %s", ids[i], k)
							bad.Add(1)
						}
					}
					if v := resp.Header.Get("X-Id"); v != ids[i] {
						t.Errorf("answer %s has X-Id %q", ids[i], v)
						bad.Add(1)
					}
				}
				// The panic closes the connection: nothing after it but
				// the part of its own answer written before it.
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				rest, _ := io.ReadAll(br)
				for i, p := range paths {
					if p == "/panic" {
						if n := strings.Count(string(rest), "HTTP/1.1 "); n > 1 || n == 1 && !strings.Contains(string(rest), "X-Id: "+ids[i]+"\r\n") {
							t.Errorf("after the panic of %s, %d answers: %.300q", ids[i], n, rest)
							bad.Add(1)
						}
						break
					}
				}
				c.Close()
				if bad.Load() > 10 {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestShutdownUnderLoadAnswersOrClosesCleanlyAndLeaksNothing: clients
// sending requests as fast as they are answered while Shutdown runs: every
// request that reached its handler is answered whole, the others see their
// connection closed before any byte of an answer; no handler starts after
// Shutdown returns; the connections' goroutines all end.
func TestShutdownUnderLoadAnswersOrClosesCleanlyAndLeaksNothing(t *testing.T) {
	base := runtime.NumGoroutine()
	var shutDone atomic.Bool
	var late, served atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if shutDone.Load() {
			late.Add(1)
		}
		served.Add(1)
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/slow" {
			time.Sleep(20 * time.Millisecond)
		}
		io.WriteString(w, strings.Repeat("a", 3000)) // chunked: a torn answer shows
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(&http.Server{Handler: h, ErrorLog: quiet, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	served0 := make(chan error, 1)
	go func() { served0 <- s.Serve(ln) }()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var torn, answered atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					return // the listener is closed
				}
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					path := "/"
					if (g+i)%4 == 0 {
						path = "/slow"
					}
					req := "POST " + path + " HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
					if i%3 == 0 {
						req += req // pipelined pair
					}
					if _, err := io.WriteString(c, req); err != nil {
						break
					}
					ok := true
					for range strings.Count(req, "POST") {
						if _, err := br.Peek(1); err != nil {
							ok = false // closed before the answer: clean
							break
						}
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							t.Errorf("a torn answer head: %v", err)
							torn.Add(1)
							ok = false
							break
						}
						b, err := io.ReadAll(resp.Body)
						if err != nil || len(b) != 3000 {
							t.Errorf("a torn answer body: %d bytes, %v", len(b), err)
							torn.Add(1)
							ok = false
							break
						}
						answered.Add(1)
						if resp.Close {
							ok = false
							break
						}
					}
					if !ok {
						break
					}
				}
				c.Close()
			}
		}()
	}
	for served.Load() < 500 {
		time.Sleep(time.Millisecond)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	shutDone.Store(true)
	close(stop)
	wg.Wait()
	if err := <-served0; err != http.ErrServerClosed {
		t.Errorf("Serve returned %v", err)
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d requests handled after Shutdown returned", n)
	}
	var n int
	for range 500 {
		if n = runtime.NumGoroutine(); n <= base {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", base, n, buf[:runtime.Stack(buf, true)])
	}
	if s, a := served.Load(), answered.Load(); s != a {
		t.Errorf("%d requests reached the handler, %d answers were received whole", s, a)
	}
	t.Logf("%d requests served", served.Load())
}

// TestAClientThatNeverReadsItsAnswerIsCutAtWriteTimeout: a handler writing
// a large answer to a client that reads nothing gets an error once
// WriteTimeout passes, and the connection is closed, on both servers.
func TestAClientThatNeverReadsItsAnswerIsCutAtWriteTimeout(t *testing.T) {
	done := make(chan error, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		var err error
		for i := 0; i < 1<<14 && err == nil; i++ { // up to 1 GiB
			_, err = w.Write(chunk)
		}
		done <- err
	})
	std, ours := servers(t, h, func(hs *http.Server) { hs.WriteTimeout = 300 * time.Millisecond })
	for _, addr := range []string{std, ours} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: a 1 GiB answer was written to a client that reads nothing", addr)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("%s: the handler still writes after 60 s (WriteTimeout 300 ms)", addr)
		}
		c.Close()
	}
}

// TestAPipelinedFloodIsHeldToABoundedBuffer: a client that pipelines
// thousands of requests and reads no answer makes the server hold no more
// than a few buffers: it stops reading when its answers cannot be written.
func TestAPipelinedFloodIsHeldToABoundedBuffer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 4000))
	})
	std, ours := servers(t, h, nil)
	req := "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: " + strings.Repeat("p", 170) + "\r\n\r\n"
	const n = 200000 // 40 MB of requests, 800 MB of answers
	for _, addr := range []string{std, ours} {
		before := heapAfterGC()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		var sent atomic.Int64
		go func() {
			batch := strings.Repeat(req, 100)
			for range n / 100 {
				if _, err := io.WriteString(c, batch); err != nil {
					return
				}
				sent.Add(100)
			}
		}()
		// Wait until the client's writes stall (the server stopped
		// reading), then weigh the heap.
		last, still := int64(-1), 0
		for still < 20 && sent.Load() < n {
			time.Sleep(25 * time.Millisecond)
			if v := sent.Load(); v == last {
				still++
			} else {
				last, still = v, 0
			}
		}
		grew := int64(heapAfterGC()) - int64(before)
		t.Logf("%s: %d requests sent before the writes stalled; heap grew %d bytes", addr, sent.Load(), grew)
		if sent.Load() >= n {
			t.Errorf("%s: all %d requests were taken from a client that reads no answer", addr, n)
		}
		if grew > 16<<20 {
			t.Errorf("%s: the heap grew %d bytes for one connection", addr, grew)
		}
		c.Close()
	}
}

// TestATLSPortAnswersPlainHTTPAndBadHandshakesAsNetHTTPDoes: on a TLS
// listener, plain HTTP gets net/http's 400, a broken or stalled handshake
// its connection closed (the stall at the handshake's timeout), on both
// servers alike.
func TestATLSPortAnswersPlainHTTPAndBadHandshakesAsNetHTTPDoes(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.NotFoundHandler()) // for its certificate
	ts.StartTLS()
	cfg := &tls.Config{Certificates: []tls.Certificate{ts.TLS.Certificates[0]}}
	ts.Close()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	var addrs []string
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: h, ErrorLog: quiet, ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 5 * time.Second}
		tln := tls.NewListener(ln, cfg)
		if i == 0 {
			go hs.Serve(tln)
			t.Cleanup(func() { hs.Close() })
		} else {
			s, err := New(hs)
			if err != nil {
				t.Fatal(err)
			}
			go s.Serve(tln)
			t.Cleanup(func() { s.Close() })
		}
		addrs = append(addrs, ln.Addr().String())
	}
	for _, send := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"\x16\x03\x01\x00\x05hello",
		"\x16\x03\x01\xff\xff" + strings.Repeat("x", 100), // a record never completed: the handshake's timeout
		"", // nothing: the handshake's timeout
	} {
		var got []string
		for _, addr := range addrs {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, send)
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			b, err := io.ReadAll(c)
			if err != nil {
				t.Errorf("%q to %s: %v after %q (the connection was not closed)", send, addr, err, b)
			}
			got = append(got, string(b))
			c.Close()
		}
		if got[0] != got[1] {
			t.Errorf("%q: net/http answered %q, h1serve %q", send, got[0], got[1])
		}
	}
}

// TestCloseDuringAHandlerCancelsItAndClosesItsConnection: Close while a
// handler runs (its body read, or without one, as a query's) closes the
// client's connection and cancels the handler's context, on both servers;
// Serve returns ErrServerClosed.
func TestCloseDuringAHandlerCancelsItAndClosesItsConnection(t *testing.T) {
	for _, req := range []string{
		"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
	} {
		for i := range 2 {
			started := make(chan struct{})
			ended := make(chan error, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				close(started)
				select {
				case <-r.Context().Done():
					ended <- nil
				case <-time.After(30 * time.Second):
					ended <- fmt.Errorf("not cancelled")
				}
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hs := &http.Server{Handler: h, ErrorLog: quiet}
			var closeFn func() error
			served := make(chan error, 1)
			if i == 0 {
				closeFn = hs.Close
				go func() { served <- hs.Serve(ln) }()
			} else {
				s, err := New(hs)
				if err != nil {
					t.Fatal(err)
				}
				closeFn = s.Close
				go func() { served <- s.Serve(ln) }()
			}
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, req)
			<-started
			closeFn()
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if b, err := io.ReadAll(c); err != nil || len(b) > 0 {
				t.Errorf("server %d, %q: the client read %q, %v", i, req, b, err)
			}
			if err := <-ended; err != nil {
				t.Errorf("server %d, %q: the handler's context was %v", i, req, err)
			}
			if err := <-served; err != http.ErrServerClosed {
				t.Errorf("server %d: Serve returned %v", i, err)
			}
			c.Close()
		}
	}
}

// TestAHeadParsedHereCostsNoMoreMemoryThanNetHTTPsParse: the heads a client
// can craft for parseWhole (the most lines it takes, each a new key, a key
// repeated on every line, keys to canonicalize, a value filling the
// reader's buffer) are parsed here (the test fails if one is not) with no
// more bytes allocated than http.ReadRequest allocates for the same head
// and one copy of the head (the string its values are cut from): what one
// request can make the server hold stays bounded by its head, as with
// net/http.
func TestAHeadParsedHereCostsNoMoreMemoryThanNetHTTPsParseAndItsHead(t *testing.T) {
	var keys, repeated, lower strings.Builder
	for i := range maxSplitLines - 1 {
		fmt.Fprintf(&keys, "K%d: v\r\n", i)
		repeated.WriteString("X-Ms-Date: v\r\n")
		fmt.Fprintf(&lower, "x-k%d-y: v\r\n", i)
	}
	heads := map[string]string{
		"distinct keys": keys.String(),
		"one key":       repeated.String(),
		"lower case":    lower.String(),
		"long value":    "X-Long: " + strings.Repeat("v", 3900) + "\r\n",
		"long keys":     strings.Repeat("A"+strings.Repeat("b", 100)+": v\r\n", 30),
	}
	for name, lines := range heads {
		data := []byte("GET /x HTTP/1.1\r\nHost: h\r\n" + lines + "\r\n")
		if len(data) > 4096 {
			t.Fatalf("%s: %d bytes, past the reader's buffer", name, len(data))
		}
		if (&conn{}).parseWhole(bytes.Clone(data), nil, &response{}) == 0 {
			t.Fatalf("%s: not parsed by parseWhole", name)
		}
		weigh := func(read func(*bufio.Reader) (*http.Request, error)) uint64 {
			brs := make([]*bufio.Reader, 50)
			for i := range brs {
				brs[i] = bufio.NewReader(bytes.NewReader(data))
				brs[i].Peek(1) // as readRequest peeks before readHead
			}
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for _, br := range brs {
				if _, err := read(br); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			runtime.ReadMemStats(&m1)
			return (m1.TotalAlloc - m0.TotalAlloc) / uint64(len(brs))
		}
		// The response, which the server makes for every request
		// whoever parses it, is not weighed.
		c, w := &conn{}, &response{}
		std, ours := weigh(http.ReadRequest), weigh(func(br *bufio.Reader) (*http.Request, error) { return c.readHead(br, w) })
		t.Logf("%s (%d bytes): http.ReadRequest allocates %d bytes, readHead %d", name, len(data), std, ours)
		if ours > std+uint64(len(data)) {
			t.Errorf("%s: readHead allocates %d bytes per head of %d, http.ReadRequest %d", name, ours, len(data), std)
		}
	}
}

// TestAnIdleConnectionKeepsNoReferenceToItsLastHead: once its answer is
// written, nothing the server keeps for an idle connection refers to the
// string its last request's head was parsed into (the values the handler
// saw are cut from it), so an idle connection cannot be made to hold a head.
func TestAnIdleConnectionKeepsNoReferenceToItsLastHead(t *testing.T) {
	var seen atomic.Pointer[weak.Pointer[byte]]
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("X-Ms-Version")
		p := weak.Make(unsafe.StringData(v))
		seen.Store(&p)
	})
	_, ours := servers(t, h, nil)
	c, err := net.Dial("tcp", ours)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, sdkHead("GET", "/x", "", ""))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	p := seen.Load()
	if p == nil {
		t.Fatal("the handler did not run")
	}
	// The server's goroutine may still be finishing the answer: collected
	// until the head is gone, for up to 5 s.
	for deadline := time.Now().Add(5 * time.Second); p.Value() != nil && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p.Value() != nil {
		t.Errorf("the idle connection still refers to its last request's head")
	}
}
