package instance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/memory"
)

// rawClient sends requests of fixed bytes over one TLS connection and reads
// their responses into one buffer: the client's own work allocates nothing,
// so a benchmark's allocations per request are the server's.
type rawClient struct {
	c   *tls.Conn
	buf []byte
}

// do sends req and reads its response, returning the status code.
func (c *rawClient) do(b testing.TB, req []byte) int {
	st, err := c.try(req)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// try sends req and reads its response, returning the status code.
func (c *rawClient) try(req []byte) (int, error) {
	if _, err := c.c.Write(req); err != nil {
		return 0, err
	}
	n := 0
	for {
		m, err := c.c.Read(c.buf[n:])
		if err != nil {
			return 0, err
		}
		n += m
		end := bytes.Index(c.buf[:n], []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		head := c.buf[:end]
		cl := 0
		if i := bytes.Index(head, []byte("\r\nContent-Length: ")); i >= 0 {
			v := head[i+len("\r\nContent-Length: "):]
			if j := bytes.IndexByte(v, '\r'); j >= 0 {
				v = v[:j]
			}
			for _, d := range v {
				cl = cl*10 + int(d-'0')
			}
		}
		if n >= end+4+cl {
			if n != end+4+cl {
				return 0, fmt.Errorf("%d bytes past the response", n-end-4-cl)
			}
			status := 0
			for _, d := range c.buf[len("HTTP/1.1 ") : len("HTTP/1.1 ")+3] {
				status = status*10 + int(d-'0')
			}
			return status, nil
		}
	}
}

// sdkRequest is the request the Go SDK (azcosmos v1.5.0) writes, header for
// header in its order on the wire, signed with the emulator's key.
func sdkRequest(host, method, rtype, link, path string, extra []string, body []byte) []byte {
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, _ := server.Sign(server.EmulatorKey, method, rtype, link, date)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: azsdk-go-azcosmos/v1.5.0 (go1.26.8; linux)\r\n", method, path, host)
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	fmt.Fprintf(&b, "Authorization: %s\r\n", auth)
	if body != nil {
		b.WriteString("Content-Type: application/json\r\nPrefer: return=minimal\r\n")
	}
	for i := 0; i < len(extra); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", extra[i], extra[i+1])
	}
	fmt.Fprintf(&b, "X-Ms-Activity-Id: 79fd0bda-b0c0-484e-765d-0c0e095080a2\r\nX-Ms-Cosmos-Sdk-Supportedcapabilities: 1\r\n"+
		"X-Ms-Date: %s\r\nX-Ms-Documentdb-Partitionkey: [\"p\"]\r\nX-Ms-Version: 2020-11-05\r\nAccept-Encoding: gzip\r\n\r\n", date)
	b.Write(body)
	return b.Bytes()
}

// BenchmarkTLSRequest is one request of each kind the server benchmark
// measures, as the Go SDK sends it, over one kept-alive HTTPS connection
// to a server wired as orrery serve wires it (the dual listener, net/http,
// the observer's metrics and access log, the engine on memory). Its
// allocations per request are the whole server's, net/http's and TLS's
// included, and exact; its time and CPU (cpu-µs/op, the process's) include
// the client's TLS and system calls.
func BenchmarkTLSRequest(b *testing.B) {
	inst, kinds := startTLSBench(b)
	c := dialRaw(b, inst.Addr().String())
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) { k.measure(b, c) })
	}
}

// tlsBenchKind is one request of BenchmarkTLSRequest and the status it
// gets.
type tlsBenchKind struct {
	name string
	req  []byte
	want int
}

// measure sends k's request b.N times on c and reports the allocations and
// the process's CPU per request.
func (k tlsBenchKind) measure(b *testing.B, c *rawClient) {
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if st := c.do(b, k.req); st != k.want {
			b.Fatalf("%s: status %d", k.name, st)
		}
	}
	// The process's CPU, server and client: less moved by other
	// processes on a shared machine than the time per request.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// measureParallel sends k's request b.N times in all, from each of
// clients at once (one goroutine each), and reports what measure does.
func (k tlsBenchKind) measureParallel(b *testing.B, clients []*rawClient) {
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	var next atomic.Int64
	errs := make(chan error, len(clients))
	for _, c := range clients {
		go func() {
			for next.Add(1) <= int64(b.N) {
				if st, err := c.try(k.req); err != nil || st != k.want {
					errs <- fmt.Errorf("%s: status %d, %v", k.name, st, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// startTLSBench starts the instance BenchmarkTLSRequest measures, with its
// item in place, and returns the requests of each kind.
func startTLSBench(b *testing.B) (*Instance, []tlsBenchKind) {
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		b.Fatal(err)
	}
	inst, err := Start(b.Context(), Config{Store: memory.New(), Certificate: &cert, Metrics: prometheus.NewRegistry(),
		AccessLog: slog.New(server.NewTextLogHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { inst.Close() })
	ctx := context.Background()
	inst.Engine.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	inst.Engine.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil)
	c := dialRaw(b, inst.Addr().String())
	host := inst.Addr().String()
	item := []byte(`{"id":"r","pk":"p","payload":"` + string(bytes.Repeat([]byte("x"), 200)) + `","n":0}`)
	upsert := sdkRequest(host, "POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", []string{"X-Ms-Documentdb-Is-Upsert", "true"}, item)
	if st := c.do(b, upsert); st != 201 {
		b.Fatalf("upsert: %d", st)
	}
	return inst, []tlsBenchKind{
		{"upsert", upsert, 200},
		{"read", sdkRequest(host, "GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil, nil), 200},
		{"replace", sdkRequest(host, "PUT", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil, item), 200},
		{"patch", sdkRequest(host, "PATCH", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil,
			[]byte(`{"operations":[{"op":"incr","path":"/n","value":1}]}`)), 200},
	}
}

// dialRaw opens a kept-alive HTTPS connection to addr for a rawClient.
func dialRaw(b *testing.B, addr string) *rawClient {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &rawClient{c: conn, buf: make([]byte, 64<<10)}
}

// BenchmarkNetHTTPPrice is a price, not a server: what net/http's HTTP/1.1
// server costs per request over a minimal keep-alive loop, the upper
// bound of what replacing it on the API port could save. Each kind of
// BenchmarkTLSRequest is sent, the same bytes over kept-alive HTTPS
// connections, to
//
//   - net-http: the instance as orrery serve wires it (BenchmarkTLSRequest);
//   - lean: the same handler (the instance's, with its metrics and access
//     log) behind the same listener stack (the dual listener's TLS, the
//     server's Listener), served by priceLoop: http.ReadRequest on a
//     bufio.Reader, the handler, the unread body drained, and the status
//     line, headers and a Content-Length body in one write;
//   - lean-deadlines: lean with a read deadline set before each request
//     and a write deadline before each answer, as any server with timeouts
//     does;
//   - lean-checked: lean-deadlines with the per-request checks and
//     bookkeeping a faithful replacement could not skip (priceOptions.checked);
//
// each over one connection (conns=1) and over 16 at once (conns=16, as
// BenchmarkServer's clients). As in BenchmarkTLSRequest the client
// allocates nothing, so allocs/op are the server's, exact; cpu-µs/op is
// the process's, the client's included (the same for all).
//
// The lean loops keep none of what makes net/http faithful beyond that
// (lean-checked pays for some of it but does not do it: no 100-continue,
// no answers to bad requests, no watcher for a departed client, no
// hijacking, no graceful shutdown): lean's figures are what net/http's
// work is worth at most, lean-checked's nearer what a replacement would
// save.
//
// Each kind measures the servers in turn, in the reverse order with
// ORRERY_BENCH_ORDER=reverse. go test's -count repeats each measurement
// in a row rather than the round, so alternate whole runs instead, half
// of them reversed, e.g.
//
//	go test -c -o price.test ./instance
//	for i in 1 2 3; do
//		./price.test -test.run '^$' -test.bench BenchmarkNetHTTPPrice -test.benchtime 20000x
//		ORRERY_BENCH_ORDER=reverse ./price.test -test.run '^$' -test.bench BenchmarkNetHTTPPrice -test.benchtime 20000x
//	done
func BenchmarkNetHTTPPrice(b *testing.B) {
	inst, kinds := startTLSBench(b)
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		b.Fatal(err)
	}
	// As instance.Start wires its own listener.
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	lean := inst.Server.Listener(server.NewDualListener(mustListen(b), cfg))
	leanDeadlines := inst.Server.Listener(server.NewDualListener(mustListen(b), cfg))
	leanChecked := inst.Server.Listener(server.NewDualListener(mustListen(b), cfg))
	handler := inst.guard(inst.handler)
	limits := inst.Server.HTTPServer()
	go servePrice(lean, handler, priceOptions{})
	go servePrice(leanDeadlines, handler, priceOptions{readTimeout: limits.ReadTimeout, writeTimeout: limits.WriteTimeout})
	go servePrice(leanChecked, handler, priceOptions{readTimeout: limits.ReadTimeout, writeTimeout: limits.WriteTimeout, checked: true})
	b.Cleanup(func() { lean.Close(); leanDeadlines.Close(); leanChecked.Close() })
	servers := []struct {
		name string
		addr string
	}{
		{"net-http", inst.Addr().String()},
		{"lean", lean.Addr().String()},
		{"lean-deadlines", leanDeadlines.Addr().String()},
		{"lean-checked", leanChecked.Addr().String()},
	}
	if os.Getenv("ORRERY_BENCH_ORDER") == "reverse" {
		// The store grows over a run and the machine drifts, which
		// favours the servers measured first; a run in each order
		// cancels that (as BenchmarkServer's runs).
		slices.Reverse(servers)
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			for _, s := range servers {
				for _, conns := range []int{1, priceConns} {
					b.Run(s.name+"/conns="+strconv.Itoa(conns), func(b *testing.B) {
						// Connections of their own, made and warmed here:
						// lean-deadlines closes one idle past its read
						// deadline while the others are measured.
						clients := make([]*rawClient, conns)
						for i := range clients {
							clients[i] = dialRaw(b, s.addr)
							clients[i].do(b, k.req)
						}
						defer func() {
							for _, c := range clients {
								c.c.Close()
							}
						}()
						k.measureParallel(b, clients)
					})
				}
			}
		})
	}
}

// priceConns is how many connections BenchmarkNetHTTPPrice also sends
// its requests on at once, as BenchmarkServer's clients do.
const priceConns = 16

func mustListen(b *testing.B) net.Listener {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

// priceOptions are what priceLoop does beyond the minimum.
type priceOptions struct {
	// readTimeout and writeTimeout, when set, are a read deadline set
	// before each request and a write deadline before each answer.
	readTimeout, writeTimeout time.Duration
	// checked adds the per-request work a faithful replacement could not
	// skip (see checkedConn): a header size limit under the bufio.Reader,
	// the Host checks, a look for Expect, a cancellable context on the
	// request (and the request's copy WithContext makes), a per-connection
	// timer armed and stopped (where a watcher for a departed client would
	// start, for requests still running when it fires: here it does
	// nothing), the connection's state stored when it turns active and
	// idle, and the handler's Connection: close honoured.
	checked bool
}

// servePrice serves ln's connections with priceLoop until ln is closed.
func servePrice(ln net.Listener, h http.Handler, opts priceOptions) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go priceLoop(c, h, opts)
	}
}

// checkedConn counts the bytes read under priceLoop's bufio.Reader while
// a request's headers are read (its header size limit).
type checkedConn struct {
	net.Conn
	remain int64
}

func (c *checkedConn) Read(p []byte) (int, error) {
	if c.remain <= 0 {
		return 0, errors.New("request headers too large")
	}
	if int64(len(p)) > c.remain {
		p = p[:c.remain]
	}
	n, err := c.Conn.Read(p)
	c.remain -= int64(n)
	return n, err
}

// priceLoop is BenchmarkNetHTTPPrice's minimal HTTP/1.1 keep-alive loop
// (see there): not a server, it trusts its client.
func priceLoop(c net.Conn, h http.Handler, opts priceOptions) {
	defer c.Close()
	var state *tls.ConnectionState
	if tc, ok := c.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return
		}
		st := tc.ConnectionState()
		state = &st
	}
	cc := &checkedConn{Conn: c, remain: 1 << 62}
	br := bufio.NewReaderSize(cc, 4<<10)
	w := &priceWriter{h: make(http.Header, 8), out: make([]byte, 0, 4<<10)}
	remote := c.RemoteAddr().String()
	connCtx, cancelConn := context.WithCancel(context.Background())
	defer cancelConn()
	watch := time.AfterFunc(time.Hour, func() {})
	watch.Stop()
	var active atomic.Bool
	var idleSince atomic.Int64
	for {
		if opts.readTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(opts.readTimeout))
		}
		if opts.checked {
			cc.remain = http.DefaultMaxHeaderBytes + 4096
		}
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		r.RemoteAddr, r.TLS = remote, state
		w.reset()
		if opts.checked {
			cc.remain = 1 << 62
			active.Store(true)
			// http.ReadRequest refuses two Host headers and takes Host
			// out of the header map itself.
			if r.ProtoAtLeast(1, 1) && r.Host == "" || strings.ContainsAny(r.Host, " \t\r\n/\\") {
				return
			}
			if len(r.Header["Expect"]) > 0 {
				return
			}
			ctx, cancel := context.WithCancel(connCtx)
			watch.Reset(10 * time.Millisecond)
			h.ServeHTTP(w, r.WithContext(ctx))
			watch.Stop()
			cancel()
		} else {
			h.ServeHTTP(w, r)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if opts.writeTimeout > 0 {
			c.SetWriteDeadline(time.Now().Add(opts.writeTimeout))
		}
		closing := r.Close || opts.checked && slices.Contains(w.h["Connection"], "close")
		if _, err := c.Write(w.finish()); err != nil || closing {
			return
		}
		if opts.checked {
			active.Store(false)
			idleSince.Store(time.Now().Unix())
		}
	}
}

// priceWriter is priceLoop's ResponseWriter: it keeps the answer and
// writes it whole, with a Content-Length, in one write.
type priceWriter struct {
	h      http.Header
	status int
	body   []byte
	out    []byte
	// date is the Date header's value for the second dateSec.
	date    []byte
	dateSec int64
}

func (w *priceWriter) reset() {
	clear(w.h)
	w.status, w.body = 0, w.body[:0]
}

func (w *priceWriter) Header() http.Header { return w.h }

func (w *priceWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *priceWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

// finish is the answer: status line, headers (a value's CR and LF turned
// into spaces, as net/http does), Date and Content-Length where the
// handler set none, and the body.
func (w *priceWriter) finish() []byte {
	w.WriteHeader(http.StatusOK)
	out := append(w.out[:0], "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(w.status), 10)
	out = append(out, ' ')
	out = append(out, http.StatusText(w.status)...)
	out = append(out, "\r\n"...)
	for k, vs := range w.h {
		for _, v := range vs {
			out = append(out, k...)
			out = append(out, ": "...)
			start := len(out)
			out = append(out, v...)
			for i := start; i < len(out); i++ {
				if out[i] == '\r' || out[i] == '\n' {
					out[i] = ' '
				}
			}
			out = append(out, "\r\n"...)
		}
	}
	if _, ok := w.h["Date"]; !ok {
		now := time.Now()
		if now.Unix() != w.dateSec {
			w.date, w.dateSec = now.UTC().AppendFormat(w.date[:0], http.TimeFormat), now.Unix()
		}
		out = append(append(append(out, "Date: "...), w.date...), "\r\n"...)
	}
	if _, ok := w.h["Content-Length"]; !ok {
		out = strconv.AppendInt(append(out, "Content-Length: "...), int64(len(w.body)), 10)
		out = append(out, "\r\n"...)
	}
	out = append(out, "\r\n"...)
	out = append(out, w.body...)
	w.out = out
	return out
}
