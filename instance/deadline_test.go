package instance

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/faults"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/memory"
)

// deadlineCounter counts the deadline changes its connections receive.
type deadlineCounter struct {
	net.Listener
	changes atomic.Int64
}

func (l *deadlineCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *deadlineCounter
}

func (c *countingConn) SetDeadline(t time.Time) error {
	c.l.changes.Add(2)
	return c.Conn.SetDeadline(t)
}

func (c *countingConn) SetReadDeadline(t time.Time) error {
	c.l.changes.Add(1)
	return c.Conn.SetReadDeadline(t)
}

func (c *countingConn) SetWriteDeadline(t time.Time) error {
	c.l.changes.Add(1)
	return c.Conn.SetWriteDeadline(t)
}

// startHTTPS serves memory storage over HTTPS on ln, the access log and
// metrics on, as orrery serve does, and returns a Go SDK client of it on one
// connection.
func startHTTPS(t *testing.T, ln net.Listener, limits server.Limits) (*Instance, *azcosmos.ContainerClient) {
	t.Helper()
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := Start(t.Context(), Config{Store: memory.New(), Listener: ln, Certificate: &cert, Limits: limits,
		Metrics: prometheus.NewRegistry(), AccessLog: slog.New(server.NewTextLogHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	transport.MaxConnsPerHost = 1
	t.Cleanup(transport.CloseIdleConnections)
	cred, err := azcosmos.NewKeyCredential(server.EmulatorKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(inst.Endpoint(), cred,
		&azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: transport}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := client.NewDatabase("db")
	if _, err := db.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "c",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := db.NewContainer("c")
	return inst, c
}

// TestARequestChangesItsConnectionsDeadlinesAtMostFourTimes: net/http asks
// for eight deadline changes per request on a kept-alive connection (each a
// runtime timer's); the HTTPS listener gives the connection only those a
// read or write runs under: one read deadline for the background read, one
// to abort it, one for the wait for the next request, one write deadline.
func TestARequestChangesItsConnectionsDeadlinesAtMostFourTimes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counter := &deadlineCounter{Listener: ln}
	_, c := startHTTPS(t, counter, server.Limits{})
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.UpsertItem(ctx, pk, []byte(`{"id":"a","pk":"p","n":0}`), nil); err != nil {
		t.Fatal(err)
	}
	const n = 200
	before := counter.changes.Load()
	for i := range n {
		if i%2 == 0 {
			_, err = c.ReadItem(ctx, pk, "a", nil)
		} else {
			_, err = c.UpsertItem(ctx, pk, []byte(`{"id":"a","pk":"p","n":1}`), nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	per := float64(counter.changes.Load()-before) / n
	t.Logf("%.2f deadline changes per request", per)
	if per > 4 {
		t.Fatalf("%.2f deadline changes per request, want at most 4", per)
	}
}

// TestAnIdleHTTPSConnectionIsClosedAtItsIdleTimeout: the deadlines the
// listener gives lazily still end a kept-alive connection that sends
// nothing more once Limits.IdleTimeout has passed, after answering its
// requests.
func TestAnIdleHTTPSConnectionIsClosedAtItsIdleTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inst, c := startHTTPS(t, ln, server.Limits{IdleTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	pk := azcosmos.NewPartitionKeyString("p")
	if _, err := c.UpsertItem(ctx, pk, []byte(`{"id":"a","pk":"p"}`), nil); err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", inst.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for range 3 {
		if _, err := io.WriteString(conn, "GET /_health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	// The server closes the connection; the generous limit only keeps a
	// broken server from hanging the test.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the idle connection was not closed by the server: %v", err)
	}
	// The SDK's own connection was closed too; it reconnects.
	if _, err := c.ReadItem(ctx, pk, "a", nil); err != nil {
		t.Fatal(err)
	}
}

// TestALostReplyResetsItsHTTPSConnection: a fault whose reply is lost
// with a reset ends an HTTPS connection with a TCP reset, as it ends a plain
// one, not with an orderly close: the client's read fails with
// ECONNRESET, as from a failing network or server.
func TestALostReplyResetsItsHTTPSConnection(t *testing.T) {
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	lostReplyResetsItsConnection(t, &cert, func(addr string) (net.Conn, error) {
		return tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	})
}

// TestALostReplyResetsItsPlainConnection: the same on a plain HTTP
// connection, which the instance's listener wraps to time its headers.
func TestALostReplyResetsItsPlainConnection(t *testing.T) {
	lostReplyResetsItsConnection(t, nil, func(addr string) (net.Conn, error) {
		return net.Dial("tcp", addr)
	})
}

// lostReplyResetsItsConnection reads an item that a "lost reply: reset"
// fault answers, over a connection dial opens to an instance serving cert
// (nil: the instance's default), and wants the read to end in ECONNRESET.
func lostReplyResetsItsConnection(t *testing.T, cert *tls.Certificate, dial func(addr string) (net.Conn, error)) {
	t.Helper()
	rules, err := faults.ParseRules([]byte(`{"id":"lost","condition":{"operations":["ReadItem"]},"result":{"type":"AppliedThenLost","lost":"reset"}}`))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := Start(t.Context(), Config{Store: memory.New(), Certificate: cert, Faults: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	ctx := context.Background()
	inst.Engine.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil)
	inst.Engine.CreateContainer(ctx, "db", []byte(`{"id":"c","partitionKey":{"paths":["/pk"]}}`), nil)
	conn, err := dial(inst.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := sdkRequest(inst.Addr().String(), "GET", "docs", "dbs/db/colls/c/docs/r", "/dbs/db/colls/c/docs/r", nil, nil)
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := conn.Read(make([]byte, 4096))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the lost reply: %d bytes, %v; want a connection reset", n, err)
	}
}
