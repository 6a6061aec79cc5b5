package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
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
