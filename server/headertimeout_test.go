package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// A request whose headers have not all arrived when the header timeout
// passes is answered 408 RequestTimeout in the service's error format and
// its connection closed, as README says, wherever the headers stop: in the
// request line, in a header, or trickling a byte a second.
func TestSlowHeadersAreAnswered408(t *testing.T) {
	const headerTimeout = time.Second
	c := newLimitedServer(t, Limits{HeaderTimeout: headerTimeout})
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		partial string
		trickle bool
	}{
		{"request line cut", "GET /dbs HT", false},
		{"header cut", "GET /dbs HTTP/1.1\r\nHost: x\r\nx-ms-date: Sat", false},
		{"headers trickled a byte a second", "GET /dbs HTTP/1.1\r\nHost: x\r\nx-ms-version: ", true},
	} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, tc.partial); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		if tc.trickle {
			go func() {
				tick := time.NewTicker(300 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte{'2'}); err != nil {
							return
						}
					}
				}
			}()
		}
		// Generous against a loaded machine, far short of never.
		conn.SetReadDeadline(time.Now().Add(headerTimeout + 60*time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			close(stop)
			t.Fatalf("%s: no answer after %v: %v", tc.name, time.Since(start).Round(time.Millisecond), err)
		}
		if resp.Header.Get("x-ms-activity-id") == "" {
			t.Errorf("%s: the 408 has no x-ms-activity-id", tc.name)
		}
		wantCosmosError(t, resp, http.StatusRequestTimeout, "RequestTimeout")
		if took := time.Since(start); took < headerTimeout {
			t.Errorf("%s: answered after %v, before the header timeout (%v)", tc.name, took, headerTimeout)
		}
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if b, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the connection stayed open after the 408: read %q, %v", tc.name, b, err)
		}
		close(stop)
	}
}

// A kept-alive connection that waits longer than the header timeout between
// requests is not answered 408: the timeout counts from a request's first
// byte, and the next request on it is served.
func TestIdleConnectionIsNotAnswered408(t *testing.T) {
	const headerTimeout = time.Second
	c := newLimitedServer(t, Limits{HeaderTimeout: headerTimeout})
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	get := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", strings.TrimSuffix(c.url, "/")+"/dbs/db", nil)
		req.Header = c.signedHeaders("GET", "/dbs/db")
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := get(); r.StatusCode != http.StatusOK {
		t.Fatalf("first read: %d", r.StatusCode)
	}
	time.Sleep(2 * headerTimeout)
	if r := get(); r.StatusCode != http.StatusOK {
		t.Fatalf("read after %v idle: %d, want 200", 2*headerTimeout, r.StatusCode)
	}
	if strings.Contains(c.url, "https") {
		t.Fatal("plain HTTP expected")
	}
}
