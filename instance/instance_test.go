package instance

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage"
	"github.com/orrery-db/orrery/storage/memory"
)

// countingStore counts its Close calls.
type countingStore struct {
	storage.Store
	closed atomic.Int32
}

func (s *countingStore) Close() error {
	s.closed.Add(1)
	return s.Store.Close()
}

func getBody(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With a certificate, one port answers HTTPS (for clients that trust the
// certificate the instance gives) and plain HTTP, and serves the
// certificate at the emulator's path; Close closes the store once, however
// often it is called.
func TestAnInstanceServesHTTPSAndHTTPOnOnePortAndClosesItsStore(t *testing.T) {
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: memory.New()}
	inst, err := Start(t.Context(), Config{Store: store, Certificate: &cert})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inst.Endpoint(), "https://127.0.0.1:") || !strings.HasPrefix(inst.HTTPEndpoint(), "http://127.0.0.1:") {
		t.Fatalf("endpoints %s and %s", inst.Endpoint(), inst.HTTPEndpoint())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(inst.CertificatePEM)
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if code, body := getBody(t, https, inst.Endpoint()+"_health"); code != 200 || !strings.Contains(body, "ready") {
		t.Fatalf("https /_health: %d %s", code, body)
	}
	if code, _ := getBody(t, http.DefaultClient, inst.HTTPEndpoint()+"_health"); code != 200 {
		t.Fatalf("http /_health: %d", code)
	}
	if code, body := getBody(t, https, inst.Endpoint()+"_explorer/emulator.pem"); code != 200 || body != string(inst.CertificatePEM) {
		t.Fatalf("the certificate at the emulator's path: %d %q", code, body)
	}
	inst.Close()
	inst.Close()
	if n := store.closed.Load(); n != 1 {
		t.Fatalf("the store was closed %d times, want once", n)
	}
	if err := <-inst.Served(); err != nil {
		t.Fatalf("served: %v", err)
	}
	if _, err := http.Get(inst.HTTPEndpoint() + "_health"); err == nil {
		t.Fatal("a closed instance still answers")
	}
}

// A Start that fails (here: the address is taken) closes the store it was
// given, so the caller has nothing to clean up.
func TestAFailedStartClosesTheStore(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	store := &countingStore{Store: memory.New()}
	if _, err := Start(t.Context(), Config{Store: store, Addr: taken.Addr().String()}); err == nil {
		t.Fatal("Start on a taken address succeeded")
	}
	if n := store.closed.Load(); n != 1 {
		t.Fatalf("the store was closed %d times, want once", n)
	}
	store = &countingStore{Store: memory.New()}
	if _, err := Start(t.Context(), Config{Store: store, Metrics: prometheus.NewRegistry(), MetricsAddr: taken.Addr().String()}); err == nil ||
		!strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("Start with a taken metrics address: %v", err)
	}
	if n := store.closed.Load(); n != 1 {
		t.Fatalf("the store was closed %d times, want once", n)
	}
}

// localhost is the loopback interface of both IP versions: a client that
// resolves it to ::1 connects as well as one that resolves it to
// 127.0.0.1.
func TestLocalhostListensOnBothLoopbackAddresses(t *testing.T) {
	ln, err := Listen("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := Start(t.Context(), Config{Store: memory.New(), Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	port := inst.Addr().(*net.TCPAddr).Port
	if host := inst.Addr().(*net.TCPAddr).IP; !host.IsLoopback() {
		t.Fatalf("localhost listened on %v", host)
	}
	for _, host := range []string{"127.0.0.1", "::1"} {
		if host == "::1" {
			if c, err := net.Listen("tcp6", "[::1]:0"); err != nil {
				t.Logf("no IPv6 loopback here: %v", err)
				continue
			} else {
				c.Close()
			}
		}
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/_health"
		if code, _ := getBody(t, http.DefaultClient, url); code != 200 {
			t.Errorf("%s: %d", url, code)
		}
	}
}

// With a compute gateway address, a second port serves the same account
// over HTTPS and HTTP with the same certificate, and Close stops it too.
func TestTheComputeGatewayPortServesTheAccountUntilClose(t *testing.T) {
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := Start(t.Context(), Config{Store: memory.New(), Certificate: &cert, ComputeGatewayAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cgw := inst.ComputeGatewayEndpoint()
	if !strings.HasPrefix(cgw, "https://127.0.0.1:") || cgw == inst.Endpoint() {
		t.Fatalf("compute gateway %q, main endpoint %q", cgw, inst.Endpoint())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(inst.CertificatePEM)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	for _, u := range []string{cgw + "_health", "http://" + strings.TrimPrefix(cgw, "https://") + "_health"} {
		if status, body := getBody(t, client, u); status != 200 || !strings.Contains(body, "ready") {
			t.Fatalf("GET %s: %d %s", u, status, body)
		}
	}
	host := strings.TrimSuffix(strings.TrimPrefix(cgw, "https://"), "/")
	inst.Close()
	if conn, err := net.Dial("tcp", host); err == nil {
		conn.Close()
		t.Fatalf("the compute gateway port %s still accepts after Close", host)
	}
	if none, err := Start(t.Context(), Config{Store: memory.New()}); err != nil {
		t.Fatal(err)
	} else {
		defer none.Close()
		if e := none.ComputeGatewayEndpoint(); e != "" {
			t.Fatalf("an instance without a compute gateway names %q", e)
		}
	}
}
