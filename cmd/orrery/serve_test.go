package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
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
