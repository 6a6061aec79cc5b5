package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/pebble"
)

const itemsPath = "/dbs/db/colls/c/docs"

// signedHeaders returns the headers that sign method on path with the
// master key, for a create in partition "a".
func (c *rawClient) signedHeaders(method, path string) http.Header {
	c.t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	rtype, rlink := signingScope(splitPath(path))
	auth, err := Sign(c.key, method, rtype, rlink, date)
	if err != nil {
		c.t.Fatal(err)
	}
	h := http.Header{}
	h.Set("x-ms-date", date)
	h.Set("Authorization", auth)
	h.Set("x-ms-version", "2020-11-05")
	h.Set("x-ms-documentdb-partitionkey", `["a"]`)
	h.Set("Content-Type", "application/json")
	return h
}

// rawConn opens a TCP connection to the server and writes the head of a
// signed item create announcing contentLength body bytes, and no body.
func (c *rawClient) rawConn(contentLength int64) net.Conn {
	c.t.Helper()
	u, err := url.Parse(c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", itemsPath, u.Host, contentLength)
	c.signedHeaders("POST", itemsPath).Write(&head)
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		c.t.Fatal(err)
	}
	return conn
}

// wantCosmosError checks a response's status and Cosmos error body.
func wantCosmosError(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the %d response: %v", resp.StatusCode, err)
	}
	var e errorBody
	if resp.StatusCode != status || json.Unmarshal(body, &e) != nil || e.Code != code || e.Message == "" {
		t.Fatalf("got %d %s, want %d with a Cosmos error body of code %s", resp.StatusCode, body, status, code)
	}
}

// A client that sends its body at 1 byte/s is answered 408 and disconnected
// once the body timeout has passed, long before its body would be complete.
func TestSlowBodyIsCutOff(t *testing.T) {
	const bodyTimeout = 2 * time.Second
	const bodyLen = 600 // ten minutes at 1 byte/s
	c := newLimitedServer(t, Limits{BodyTimeout: bodyTimeout})
	conn := c.rawConn(bodyLen)
	start := time.Now()
	var sent atomic.Int64
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
			sent.Add(1)
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	// Generous against a loaded machine, far short of the body's 600 s.
	conn.SetReadDeadline(start.Add(bodyTimeout + 60*time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer %v after the body began (%d of %d bytes sent): %v", time.Since(start).Round(time.Millisecond), sent.Load(), bodyLen, err)
	}
	wantCosmosError(t, resp, http.StatusRequestTimeout, "RequestTimeout")
	if n := sent.Load(); n >= bodyLen {
		t.Fatalf("the whole body (%d bytes) was read before the answer", n)
	}
	// Closed: EOF, or a reset since the trickle kept writing to it.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if b, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection stayed open after the 408: read %q, %v", b, err)
	}
	t.Logf("cut after %v, %d of %d bytes sent", time.Since(start).Round(time.Millisecond), sent.Load(), bodyLen)
}

// A Content-Length past the limit is answered 413 in Cosmos's format
// without the server waiting for (or reading) any of the body: the client
// sends none.
func TestTooLargeContentLengthIsRefusedUnread(t *testing.T) {
	c := newTestServer(t)
	conn := c.rawConn(1 << 30)
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a 1 GiB Content-Length whose body never comes: %v", err)
	}
	wantCosmosError(t, resp, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge")
	if !resp.Close {
		t.Error("the 413 keeps the connection open: its unread body would be taken for the next request")
	}
}

// Chunked bodies (no Content-Length) are read within the same limit.
func TestChunkedBodies(t *testing.T) {
	c := newTestServer(t)
	post := func(body io.Reader) *http.Response {
		req, err := http.NewRequest("POST", c.url+itemsPath, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = c.signedHeaders("POST", itemsPath)
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if len(resp.TransferEncoding) > 0 {
			t.Logf("response transfer encoding %v", resp.TransferEncoding)
		}
		return resp
	}
	// A reader that hides its length makes the client send chunks.
	item := `{"id":"chunked","pk":"a","pad":"` + strings.Repeat("p", 300<<10) + `"}`
	if resp := post(io.MultiReader(strings.NewReader(item))); resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("chunked create: %d %s", resp.StatusCode, b)
	}
	c.must("GET", itemsPath+"/chunked", "", pk(`["a"]`), 200)
	huge := io.LimitReader(repeatReader('x'), maxRequestBytes+1)
	wantCosmosError(t, post(huge), http.StatusRequestEntityTooLarge, "RequestEntityTooLarge")
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// heapObjectBytes is the heap memory held by objects, live or not yet swept.
func heapObjectBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// 128 clients uploading 8 MiB bodies at once make the heap grow by the body
// memory cap and some slack, not by 1 GiB: the requests that find no room
// wait, then get 429 with substatus 3092 and a retry-after, while small
// writes go on.
func TestConcurrentLargeBodiesStayUnderTheMemoryCap(t *testing.T) {
	const uploads = 128
	const capBytes = 32 << 20
	// Slack: the bodies of answered requests are garbage until the collector
	// frees them (up to about the cap again, even collecting eagerly), and
	// buffers and goroutines of 128 connections.
	const slack = capBytes + 32<<20
	c := newLimitedServer(t, Limits{BodyMemory: capBytes})

	body := make([]byte, maxRequestBytes)
	copy(body, `{"id":"big","pk":"a","pad":"`)
	for i := 28; i < len(body)-2; i++ {
		body[i] = 'x'
	}
	copy(body[len(body)-2:], `"}`)

	// Collect garbage promptly, so the heap is close to what is live.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := heapObjectBytes()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h := heapObjectBytes(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	// Meanwhile small writes draw on their own share of the cap: the flood
	// of large uploads never makes them wait for room.
	smallDone := make(chan struct{})
	stopSmall := make(chan struct{})
	var smallWrites int
	go func() {
		defer close(smallDone)
		for i := 0; ; i++ {
			select {
			case <-stopSmall:
				return
			default:
			}
			if r := c.do("POST", itemsPath, fmt.Sprintf(`{"id":"small%d","pk":"a"}`, i), pk(`["a"]`)); r.status != http.StatusCreated {
				t.Errorf("a small write during the flood: %d %s", r.status, r.body)
				return
			}
			smallWrites++
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: uploads}}
	var mu sync.Mutex
	statuses := map[int]int{}
	var connErrs int
	var wg sync.WaitGroup
	for range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest("POST", c.url+itemsPath, bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header = c.signedHeaders("POST", itemsPath)
			resp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// A refused upload's connection closes while the client is
				// still sending; that is the hostile client's problem.
				connErrs++
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			statuses[resp.StatusCode]++
			switch resp.StatusCode {
			case http.StatusRequestEntityTooLarge: // read, then refused by the engine (items ≤ 2 MB)
			case http.StatusTooManyRequests:
				if resp.Header.Get("x-ms-substatus") != "3092" || resp.Header.Get("x-ms-retry-after-ms") == "" {
					t.Errorf("429 without substatus 3092 and a retry-after: %v %s", resp.Header, b)
				}
			default:
				t.Errorf("upload answered %d %s", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	close(stopSmall)
	<-smallDone
	close(stop)
	<-sampled
	growth := int64(peak.Load()) - int64(base)
	t.Logf("%d uploads of %d MiB: statuses %v, %d connection errors; heap grew by %d MiB (cap %d MiB); %d small writes meanwhile",
		uploads, len(body)>>20, statuses, connErrs, growth>>20, capBytes>>20, smallWrites)
	if statuses[http.StatusRequestEntityTooLarge] == 0 {
		t.Error("no upload was read at all")
	}
	if growth > capBytes+slack {
		t.Errorf("heap grew by %d MiB under %d concurrent 8 MiB uploads; the cap is %d MiB (+%d MiB slack)", growth>>20, uploads, capBytes>>20, slack>>20)
	}
}

// Once storage has failed (here: its directory removed), every request that
// needs it is answered 503 in Cosmos's format, not 500 and not a panic.
func TestFailedStorageAnswers503(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(ctx, store, engine.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Engine: eng, Keys: Keys{Master: EmulatorKey}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer()
	hs.Start()
	t.Cleanup(hs.Close) // the failed store and its engine are left as the binary leaves them
	c := &rawClient{t: t, url: hs.URL, key: EmulatorKey}
	c.must("POST", "/dbs", `{"id":"db"}`, nil, 201)
	c.must("POST", "/dbs/db/colls", `{"id":"c","partitionKey":{"paths":["/pk"]}}`, nil, 201)
	c.must("POST", itemsPath, `{"id":"1","pk":"a"}`, pk(`["a"]`), 201)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case <-store.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the store did not notice its directory was removed")
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", itemsPath, `{"id":"2","pk":"a"}`},
		{"GET", itemsPath + "/1", ""},
		{"POST", "/dbs", `{"id":"db2"}`},
	} {
		resp := c.do(r.method, r.path, r.body, pk(`["a"]`))
		var e errorBody
		if resp.status != http.StatusServiceUnavailable || json.Unmarshal(resp.body, &e) != nil || e.Code != "ServiceUnavailable" {
			t.Errorf("%s %s on failed storage: %d %s, want 503 ServiceUnavailable", r.method, r.path, resp.status, resp.body)
		}
	}
}
