package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/server"
)

// TestSecondServerOnADataDirectoryNamesTheFirst: a second server on a data
// directory in use says which process holds it, not an errno.
func TestSecondServerOnADataDirectoryNamesTheFirst(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	first := startChild(t, bin, "--data", dir)
	defer first.kill()
	out, err := exec.Command(bin, "serve", "--data", dir, "--addr", "127.0.0.1:0").CombinedOutput()
	if err == nil {
		t.Fatal("a second server on the same data directory started")
	}
	want := fmt.Sprintf("in use by PID %d", first.cmd.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Fatalf("the second server said %q; want it to name the first (%s)", out, want)
	}
}

// TestCertPrintsWhatTheServerServesAndCreatesNothing: `orrery cert` asks
// the running server, --memory included, for the certificate it serves, and
// leaves no file behind when none answers.
func TestCertPrintsWhatTheServerServesAndCreatesNothing(t *testing.T) {
	bin := buildBinary(t)
	srv := startChild(t, bin, "--memory", "--tls-san", "orrery.internal", "--tls-san", "10.1.2.3")
	defer srv.kill()
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.endpoint, "http://"), "/")
	out, err := exec.Command(bin, "cert", "--endpoint", addr).Output()
	if err != nil {
		t.Fatalf("orrery cert: %v", err)
	}
	block, _ := pem.Decode(out)
	if block == nil {
		t.Fatalf("orrery cert printed no PEM: %q", out)
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "orrery.internal", "10.1.2.3", "127.0.0.1"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("the served certificate does not cover %s: %v", name, err)
		}
	}
	// The printed certificate is the one to trust: a TLS client trusting it
	// alone connects.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(out)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("a client trusting the printed certificate: %v", err)
	}
	conn.Close()

	empty := t.TempDir()
	cmd := exec.Command(bin, "cert", "--endpoint", "127.0.0.1:1", "--data", filepath.Join(empty, "data"))
	if err := cmd.Run(); err == nil {
		t.Fatal("orrery cert succeeded with no server and no data directory")
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("orrery cert created %v", entries)
	}
}

// TestServeUsesTheGivenCertificate: --tls-cert and --tls-key replace the
// generated certificate.
func TestServeUsesTheGivenCertificate(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	_, certPEM, err := server.LoadOrCreateCertificate(dir, "given.example")
	if err != nil {
		t.Fatal(err)
	}
	srv := startChild(t, bin, "--memory", "--tls-cert", filepath.Join(dir, server.CertFile), "--tls-key", filepath.Join(dir, server.KeyFile))
	defer srv.kill()
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.endpoint, "http://"), "/")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "given.example"})
	if err != nil {
		t.Fatalf("the server does not serve the given certificate: %v", err)
	}
	conn.Close()
}

// TestCertRefusesAServerThatIsNotOrrery: a TLS server that does not serve
// its certificate at /_explorer/emulator.pem (here: one answering 404 to
// everything) is not taken for Orrery; cert prints nothing and says why.
func TestCertRefusesAServerThatIsNotOrrery(t *testing.T) {
	bin := buildBinary(t)
	other := httptest.NewTLSServer(http.NotFoundHandler())
	defer other.Close()
	cmd := exec.Command(bin, "cert", "--endpoint", other.URL, "--data", t.TempDir())
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("orrery cert took the certificate of a server that is not Orrery")
	}
	if stdout.Len() != 0 {
		t.Fatalf("orrery cert printed %q", stdout.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "404") || !strings.Contains(msg, "/_explorer/emulator.pem") || !strings.Contains(msg, "refusing") {
		t.Fatalf("orrery cert said %q; want the refusal with its cause", msg)
	}
}

// TestCertSaysWhatItPrintedAndFromWhere: on standard error, cert names the
// server it asked, the certificate's subject, names and fingerprint; the
// same certificate is at /_explorer/emulator.pem.
func TestCertSaysWhatItPrintedAndFromWhere(t *testing.T) {
	bin := buildBinary(t)
	srv := startChild(t, bin, "--memory")
	defer srv.kill()
	endpoint := strings.Replace(srv.endpoint, "http://", "https://", 1)
	cmd := exec.Command(bin, "cert")
	cmd.Env = append(os.Environ(), "ORRERY_ENDPOINT="+endpoint)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orrery cert: %v\n%s", err, stderr.String())
	}
	hostport := strings.TrimSuffix(strings.TrimPrefix(endpoint, "https://"), "/")
	for _, want := range []string{"served by https://" + hostport + "/", "CN=Orrery local server", "localhost", "SHA-256 fingerprint"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("orrery cert said %q; want it to say %q", stderr.String(), want)
		}
	}
	resp, err := http.Get(srv.endpoint + "_explorer/emulator.pem")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, _ := io.ReadAll(resp.Body)
	if string(served) != stdout.String() {
		t.Fatalf("cert printed %q, the server serves %q", stdout.String(), served)
	}
}

// TestServeSaysWhatItIsDoing: the start names where the data lives, the
// endpoint, the explorer, the certificate and the key; that it listens on
// loopback only; and that the well-known key and unverified Entra ID
// tokens are accepted. By default it listens on localhost, not on every
// interface.
func TestServeSaysWhatItIsDoing(t *testing.T) {
	bin := buildBinary(t)
	data := t.TempDir()
	cmd := exec.Command(bin, "serve", "--addr", "localhost:0", "--data", data)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "unverified") || strings.Contains(sc.Text(), "without verifying") {
			break
		}
	}
	out := strings.Join(lines, "\n")
	m := readyLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ready line in:\n%s", out)
	}
	port := m[1][strings.LastIndex(m[1], ":")+1:]
	for _, want := range []string{
		`msg="opening storage" data=` + data + ` new=false`,
		"created a self-signed TLS certificate",
		`endpoint="https://localhost:` + port + `/`,
		"explorer=https://localhost:" + port + "/_explorer/",
		"certificate=https://localhost:" + port + "/_explorer/emulator.pem",
		server.EmulatorKey,
		"storage=pebble data=" + data,
		"loopback interface only",
		"well-known key",
		"Entra ID (AAD) tokens are accepted without verifying",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the start does not say %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(m[1], "127.0.0.1:") {
		t.Errorf("localhost listened on %s", m[1])
	}
}
