package compat

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// manyConnectionsResult is what readOverManyConnections saw.
type manyConnectionsResult struct {
	reads    int64
	failures map[string]int // failed reads by error
}

// readOverManyConnections opens conns clients of s at once, each with its
// own transport and so its own TLS connection, and has each read item id of
// partition pk reads times through the SDK, which retries as retry says
// (its defaults when zero). Every client starts at the same moment, so the
// server meets conns handshakes at once.
func readOverManyConnections(t testing.TB, s *orrerytest.Server, conns, reads int, retry policy.RetryOptions, pk, id string) manyConnectionsResult {
	t.Helper()
	// Both ends of every connection are this process's files (Go raises
	// the soft limit to the hard one at start).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*conns+256) {
		t.Skipf("%d connections need %d open files, and the limit is %d", conns, 2*conns+256, lim.Cur)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CertificatePEM) {
		t.Fatal("no certificate to trust")
	}
	cred, err := azcosmos.NewKeyCredential(server.EmulatorKey)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	res := manyConnectionsResult{failures: map[string]int{}}
	var ok atomic.Int64
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for range conns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			tr.MaxConnsPerHost = 1
			defer tr.CloseIdleConnections()
			client, err := azcosmos.NewClientWithKey(s.Endpoint, cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
				Transport: &http.Client{Transport: tr},
				Retry:     retry,
			}})
			var c *azcosmos.ContainerClient
			if err == nil {
				c, err = client.NewContainer("db", "items")
			}
			ready.Done()
			if err != nil {
				t.Error(err)
				return
			}
			<-start
			key := azcosmos.NewPartitionKeyString(pk)
			for range reads {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				_, err := c.ReadItem(ctx, key, id, nil)
				cancel()
				if err == nil {
					ok.Add(1)
					continue
				}
				msg := err.Error()
				var re *azcore.ResponseError
				if errors.As(err, &re) {
					msg = http.StatusText(re.StatusCode) + " " + re.ErrorCode
				}
				mu.Lock()
				res.failures[msg]++
				mu.Unlock()
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	res.reads = ok.Load()
	return res
}

// startForManyConnections starts a TLS server holding item r of partition p
// in db/items.
func startForManyConnections(t testing.TB) *orrerytest.Server {
	s := orrerytest.StartWith(t, orrerytest.Options{TLS: true})
	ctx := context.Background()
	if _, err := s.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := s.Client.NewDatabase("db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "items",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	c, err := d.NewContainer("items")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("p"), []byte(`{"id":"r","pk":"p"}`), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEveryConnectionOfAThousandAtOnceIsServed opens 1,000 TLS connections
// at once, each an SDK client of its own with the SDK's default retries, and
// reads an item three times over each: every read must be answered (the SDK
// retries a 429 or 503 itself; what it gives up on, a connection refused or
// a handshake timed out included, fails the test).
func TestEveryConnectionOfAThousandAtOnceIsServed(t *testing.T) {
	const conns, reads = 1000, 3
	s := startForManyConnections(t)
	res := readOverManyConnections(t, s, conns, reads, policy.RetryOptions{}, "p", "r")
	t.Logf("%d connections at once, %d reads each: %d answered, failures %v", conns, reads, res.reads, res.failures)
	if res.reads != conns*reads {
		t.Errorf("%d of %d reads failed over %d connections opened at once: %v", conns*reads-int(res.reads), conns*reads, conns, res.failures)
	}
}

// BenchmarkTwoThousandTLSConnectionsAtOnce opens 2,000 TLS connections at
// once, each an SDK client of its own with retries off, and reads an item
// three times over each; it reports the reads that failed (a client's
// handshake timing out, typically, when the cores are short) and the time a
// round took. Client and server share the process and its cores, as a load
// generator on the server's machine would.
func BenchmarkTwoThousandTLSConnectionsAtOnce(b *testing.B) {
	const conns, reads = 2000, 3
	s := startForManyConnections(b)
	failed := 0
	for b.Loop() {
		res := readOverManyConnections(b, s, conns, reads, policy.RetryOptions{MaxRetries: -1}, "p", "r")
		failed += conns*reads - int(res.reads)
		if len(res.failures) > 0 {
			b.Logf("failures: %v", res.failures)
		}
	}
	b.ReportMetric(float64(failed)/float64(b.N), "failed-reads/op")
}

// TestAServerAtItsOpenFileLimitServesEveryClientInTurn runs `orrery serve`
// in a process of its own allowed 160 open files (ulimit -n), far fewer
// than the 400 SDK clients that then connect over TLS at once, three point
// reads each, with the SDK's default retries. Past its limit the server's
// accept fails with EMFILE; the clients it cannot take yet wait in the
// kernel's accept queue (or time out their handshake and retry) and are
// taken as others hang up. Every read must be answered and the server must
// still answer a new client afterwards: a server that stopped accepting at
// the first EMFILE stays up but serves no new connection ever again.
func TestAServerAtItsOpenFileLimitServesEveryClientInTurn(t *testing.T) {
	if os.Getenv(orrerytest.StorageEnv) == "postgres" {
		t.Skip("the listener under a file limit does not depend on the storage: run once, on memory")
	}
	if testing.Short() {
		t.Skip("builds and starts cmd/orrery")
	}
	const fileLimit, conns, reads = 160, 400, 3
	bin := filepath.Join(t.TempDir(), "orrery")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/orrery").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/orrery: %v\n%s", err, out)
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	cmd := exec.Command("sh", "-c", `ulimit -n `+strconv.Itoa(fileLimit)+` && exec "$0" serve -memory -addr "$1" -log-level error`, bin, addr)
	var serverLog bytes.Buffer
	cmd.Stdout, cmd.Stderr = &serverLog, &serverLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	// The server's certificate, over plain HTTP on the same port.
	var pem []byte
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + server.CertificatePath)
		if err == nil {
			pem, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("orrery serve exited: %v\n%s", err, serverLog.String())
		case <-time.After(100 * time.Millisecond):
		}
		if i == 600 {
			t.Fatalf("orrery serve did not answer at %s: %v\n%s", addr, err, serverLog.String())
		}
	}
	s := &orrerytest.Server{Endpoint: "https://" + addr + "/", Key: server.EmulatorKey, CertificatePEM: pem}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cred, err := azcosmos.NewKeyCredential(server.EmulatorKey)
	if err != nil {
		t.Fatal(err)
	}
	setup, err := azcosmos.NewClientWithKey(s.Endpoint, cred, &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := setup.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatal(err)
	}
	d, _ := setup.NewDatabase("db")
	if _, err := d.CreateContainer(ctx, azcosmos.ContainerProperties{ID: "items",
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/pk"}}}, nil); err != nil {
		t.Fatal(err)
	}
	c, _ := d.NewContainer("items")
	if _, err := c.CreateItem(ctx, azcosmos.NewPartitionKeyString("p"), []byte(`{"id":"r","pk":"p"}`), nil); err != nil {
		t.Fatal(err)
	}

	res := readOverManyConnections(t, s, conns, reads, policy.RetryOptions{}, "p", "r")
	t.Logf("%d TLS clients at once against a server allowed %d files: %d of %d reads answered, failures %v",
		conns, fileLimit, res.reads, conns*reads, res.failures)
	if res.reads != conns*reads {
		t.Errorf("%d of %d reads failed: %v", conns*reads-int(res.reads), conns*reads, res.failures)
	}
	// Still serving: a new client after the crowd has gone.
	after := readOverManyConnections(t, s, 1, 1, policy.RetryOptions{}, "p", "r")
	if after.reads != 1 {
		t.Errorf("a new client after the crowd was not served: %v", after.failures)
	}
	select {
	case err := <-exited:
		t.Fatalf("orrery serve exited: %v\n%s", err, serverLog.String())
	default:
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				t.Logf("server's peak resident memory: %s", strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
			}
		}
	}
}
