package instance

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	if _, err := c.c.Write(req); err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		m, err := c.c.Read(c.buf[n:])
		if err != nil {
			b.Fatal(err)
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
				b.Fatalf("%d bytes past the response", n-end-4-cl)
			}
			status := 0
			for _, d := range c.buf[len("HTTP/1.1 ") : len("HTTP/1.1 ")+3] {
				status = status*10 + int(d-'0')
			}
			return status
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
	conn, err := tls.Dial("tcp", inst.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	c := &rawClient{c: conn, buf: make([]byte, 64<<10)}
	host := inst.Addr().String()
	item := []byte(`{"id":"r","pk":"p","payload":"` + string(bytes.Repeat([]byte("x"), 200)) + `","n":0}`)
	upsert := sdkRequest(host, "POST", "docs", "dbs/db/colls/c", "/dbs/db/colls/c/docs", []string{"X-Ms-Documentdb-Is-Upsert", "true"}, item)
	if st := c.do(b, upsert); st != 201 {
		b.Fatalf("upsert: %d", st)
	}
	kinds := []struct {
		name string
		req  []byte
		want int
	}{
		{"upsert", upsert, 200},
		{"read", sdkRequest(host, "GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil, nil), 200},
		{"replace", sdkRequest(host, "PUT", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil, item), 200},
		{"patch", sdkRequest(host, "PATCH", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil,
			[]byte(`{"operations":[{"op":"incr","path":"/n","value":1}]}`)), 200},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
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
		})
	}
}
