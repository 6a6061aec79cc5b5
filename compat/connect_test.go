package compat

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/memory"
)

// connectDir holds the README's connection snippets as programs.
const connectDir = "../examples/connect"

// startTLS serves a fresh server over HTTPS with a generated certificate,
// as `orrery serve` does, and returns its endpoint on localhost and the
// certificate's PEM file.
func startTLS(t *testing.T) (endpoint, pemFile string) {
	ctx := t.Context()
	t.Helper()
	store := memory.New()
	eng, err := engine.Open(ctx, store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Engine: eng, Keys: server.Keys{Master: server.EmulatorKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cert, pemBytes, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	pemFile = filepath.Join(t.TempDir(), "orrery.pem")
	if err := os.WriteFile(pemFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(hs.URL, "127.0.0.1", "localhost", 1) + "/", pemFile
}

// snippet returns the part of a snippet file the README shows: between
// README:begin and README:end markers when it has them, else all of it
// after its leading comment.
func snippet(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(connectDir, file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if i := strings.Index(s, "README:begin\n"); i >= 0 {
		s = s[i+len("README:begin\n") : strings.Index(s, "README:end")]
		s = s[:strings.LastIndex(s, "\n")+1]
		// The README shows it without the function's indentation.
		lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		return strings.Join(lines, "\n") + "\n"
	}
	// Drop the leading comment lines, which speak to the test's reader.
	lines := strings.Split(s, "\n")
	for len(lines) > 0 && (strings.HasPrefix(lines[0], "//") || strings.HasPrefix(lines[0], "#")) {
		lines = lines[1:]
	}
	return strings.Join(lines, "\n")
}

// TestREADMEShowsTheTestedSnippets: the README's connection code is the
// code the tests below run.
func TestREADMEShowsTheTestedSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.go", "connect.mjs", "connect.py"} {
		if s := snippet(t, f); !strings.Contains(string(readme), s) {
			t.Errorf("README.md does not show examples/connect/%s as it is:\n%s", f, s)
		}
	}
}

const wantConnectOutput = `{"id":"1","customer":"alice","total":12.5}`

// TestGoSnippetConnectsOverHTTPS runs the Go snippet against a server over
// HTTPS, trusting its certificate through a RootCAs transport.
func TestGoSnippetConnectsOverHTTPS(t *testing.T) {
	endpoint, pemFile := startTLS(t)
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = connectDir
	cmd.Env = append(os.Environ(), "COSMOS_ENDPOINT="+endpoint, "COSMOS_CA="+pemFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run examples/connect: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"id":"1","customer":"alice","total":12.5`) {
		t.Fatalf("the Go snippet printed %s", out)
	}
}

// TestJSSnippetConnectsOverHTTPSAndHTTP runs the JavaScript snippet with
// NODE_EXTRA_CA_CERTS over HTTPS, and over plain HTTP with no certificate.
func TestJSSnippetConnectsOverHTTPSAndHTTP(t *testing.T) {
	if _, err := os.Stat(filepath.Join(jsSuiteDir, "node_modules", "@azure", "cosmos")); err != nil {
		t.Fatalf("the JavaScript SDK is not installed (%v): run `npm ci --prefix compat/js` first", err)
	}
	src, err := os.ReadFile(filepath.Join(connectDir, "connect.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// node resolves @azure/cosmos from the script's folder: run a copy
	// inside the JavaScript suite's project.
	script := filepath.Join(jsSuiteDir, ".connect-snippet.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(script)

	httpsEndpoint, pemFile := startTLS(t)
	plain := orrerytest.Start(t).Endpoint
	for _, run := range []struct {
		name string
		env  []string
	}{
		{"https", []string{"COSMOS_ENDPOINT=" + httpsEndpoint, "NODE_EXTRA_CA_CERTS=" + pemFile}},
		{"http", []string{"COSMOS_ENDPOINT=" + plain}},
	} {
		cmd := exec.Command("node", filepath.Base(script))
		cmd.Dir = jsSuiteDir
		cmd.Env = append(os.Environ(), run.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: node connect.mjs: %v\n%s", run.name, err, out)
		}
		if strings.TrimSpace(string(out)) != wantConnectOutput {
			t.Fatalf("%s: the JavaScript snippet printed %s", run.name, out)
		}
	}
}

// TestPythonSnippetConnectsOverHTTPS runs the Python snippet (azure-cosmos
// 4.x) with connection_verify naming the certificate.
func TestPythonSnippetConnectsOverHTTPS(t *testing.T) {
	py, pythonPath := pythonSDK(t)
	endpoint, pemFile := startTLS(t)
	cmd := exec.Command(py, filepath.Join(connectDir, "connect.py"))
	cmd.Env = append(withPythonPath(pythonPath), "COSMOS_ENDPOINT="+endpoint, "COSMOS_CA="+pemFile)
	// stdout only: for localhost the SDK does not verify the certificate,
	// and urllib3 warns about it on stderr.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 connect.py: %v\n%s%s", err, out, stderr.String())
	}
	// Python's json.dumps puts a space after each separator.
	var compact bytes.Buffer
	if err := json.Compact(&compact, bytes.TrimSpace(out)); err != nil || compact.String() != wantConnectOutput {
		t.Fatalf("the Python snippet printed %s", out)
	}
}
