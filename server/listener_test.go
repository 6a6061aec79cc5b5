package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestDualListenerServesTLSAndPlainOnOnePort(t *testing.T) {
	dir := t.TempDir()
	cert, pemBytes, err := LoadOrCreateCertificate(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dual := NewDualListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			io.WriteString(w, "tls")
		} else {
			io.WriteString(w, "plain")
		}
	})}
	go hs.Serve(dual)
	defer hs.Close()

	// A silent connection must not hold up the others.
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("certificate PEM does not parse")
	}
	port := ln.Addr().(*net.TCPAddr).Port
	clients := map[string]*http.Client{
		"http://127.0.0.1":  {Timeout: 5 * time.Second},
		"https://127.0.0.1": {Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		"https://localhost": {Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
	}
	want := map[string]string{"http://127.0.0.1": "plain", "https://127.0.0.1": "tls", "https://localhost": "tls"}
	for base, c := range clients {
		resp, err := c.Get(base + ":" + itoa(port) + "/")
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want[base] {
			t.Errorf("%s answered %q, want %q", base, b, want[base])
		}
	}
	// The certificate is reused on the next start, and a new directory gets a new one.
	if _, again, err := LoadOrCreateCertificate(dir); err != nil || string(again) != string(pemBytes) {
		t.Fatalf("the saved certificate was not reused: %v", err)
	}
	if _, other, err := LoadOrCreateCertificate(t.TempDir()); err != nil || string(other) == string(pemBytes) {
		t.Fatalf("a new directory should get a new certificate: %v", err)
	}
}

func itoa(n int) string { return formatUint(uint64(n)) }

// filesRunOutListener answers its first failures calls to Accept as the
// system does when the process has no file left for a new connection.
type filesRunOutListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *filesRunOutListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestDualListenerKeepsAcceptingAfterTheProcessRanOutOfFiles: accept fails
// with EMFILE while the process is at its open-file limit (ulimit -n), as
// when thousands of clients connect at once; once files are free again the
// connections waiting in the accept queue must be served, over TLS and plain
// HTTP alike. A listener that gave up at the first EMFILE would leave the
// server up but deaf.
func TestDualListenerKeepsAcceptingAfterTheProcessRanOutOfFiles(t *testing.T) {
	cert, pemBytes, err := LoadOrCreateCertificate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &filesRunOutListener{Listener: inner}
	ln.failures.Store(5)
	dual := NewDualListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(dual)
	defer hs.Close()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	port := itoa(inner.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		url    string
		client *http.Client
	}{
		{"https://127.0.0.1:" + port + "/", &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}},
		{"http://127.0.0.1:" + port + "/", &http.Client{Timeout: 20 * time.Second}},
	} {
		resp, err := c.client.Get(c.url)
		if err != nil {
			t.Fatalf("%s after the accept loop met EMFILE: %v", c.url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Errorf("%s answered %q", c.url, b)
		}
	}
	if n := ln.failures.Load(); n > 0 {
		t.Errorf("%d of the EMFILE answers were never met", n)
	}
}

// TestTLSHandshakesAreComputedAFewAtATimeAndAllComplete connects 24
// clients at once to a listener allowed 2 handshakes at a time: the server's
// part of a handshake (from the ClientHello to its reply) never runs for
// more than 2 connections together, and every client still completes its
// handshake and request. Unbounded, a crowd's handshakes share the cores and
// finish late together, past the clients' handshake timeouts.
func TestTLSHandshakesAreComputedAFewAtATimeAndAllComplete(t *testing.T) {
	defer func(n int) { handshakeSlots = n }(handshakeSlots)
	handshakeSlots = 2
	const clients = 24
	cert, pemBytes, err := LoadOrCreateCertificate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	active, most := 0, 0
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		// Linger a moment, so that handshakes let through together are
		// seen together.
		mu.Lock()
		active++
		most = max(most, active)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		active--
		mu.Unlock()
		return nil, nil
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dual := NewDualListener(inner, cfg)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(dual)
	defer hs.Close()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	url := "https://127.0.0.1:" + itoa(inner.Addr().(*net.TCPAddr).Port) + "/"
	start := make(chan struct{})
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			<-start
			resp, err := c.Get(url)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "ok" {
				errs <- errors.New("answered " + string(b))
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a client of the crowd: %v", err)
	}
	if most > handshakeSlots {
		t.Errorf("%d handshakes were computed at once; at most %d may be", most, handshakeSlots)
	}
}

// A sniffed connection reads the bytes the sniffing buffered, then the
// rest from the connection itself, all in order, whatever the reads'
// sizes; the buffer is dropped once read.
func TestSniffedConnectionReadsEveryByteInOrder(t *testing.T) {
	want := make([]byte, 20000)
	for i := range want {
		want[i] = byte(i * 7)
	}
	for _, size := range []int{1, 3, 100, 4096, 5000} {
		client, srv := net.Pipe()
		go func() {
			client.Write(want[:10])
			client.Write(want[10:])
			client.Close()
		}()
		br := bufio.NewReader(srv)
		if _, err := br.Peek(1); err != nil {
			t.Fatal(err)
		}
		c := &peekedConn{Conn: srv, r: br}
		var got []byte
		buf := make([]byte, size)
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("reads of %d: %d bytes, not the %d sent in order", size, len(got), len(want))
		}
		if c.r != nil {
			t.Errorf("reads of %d: the sniffing buffer is kept after it was read", size)
		}
		srv.Close()
	}
}
