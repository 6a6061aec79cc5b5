package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/storage/memory"
)

// serveWith starts a server for cfg (its Engine filled in) and returns its
// URL.
func serveWith(t *testing.T, cfg Config) string {
	t.Helper()
	store := memory.New()
	eng, err := engine.Open(t.Context(), store, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine, cfg.Keys, cfg.Logger = eng, Keys{Master: EmulatorKey}, slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); eng.Close(); store.Close() })
	return hs.URL
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The certificate is served without authentication where the official
// emulator serves its own, byte for byte as configured; a server without
// one answers 404 in Cosmos's error format, and a write is 405.
func TestTheCertificateIsServedAtTheEmulatorsPath(t *testing.T) {
	_, pemBytes, err := LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	url := serveWith(t, Config{CertificatePEM: pemBytes})
	resp, body := get(t, url+CertificatePath, nil)
	if resp.StatusCode != 200 || body != string(pemBytes) {
		t.Fatalf("GET %s: %d %q; want 200 and the certificate", CertificatePath, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-pem-file" {
		t.Errorf("Content-Type %q", ct)
	}
	post, err := http.Post(url+CertificatePath, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != 405 {
		t.Errorf("POST %s: %d, want 405", CertificatePath, post.StatusCode)
	}

	plain := serveWith(t, Config{})
	resp, body = get(t, plain+CertificatePath, nil)
	var e struct{ Code, Message string }
	if resp.StatusCode != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Code != "NotFound" {
		t.Fatalf("GET %s without a certificate: %d %s; want a Cosmos 404", CertificatePath, resp.StatusCode, body)
	}
}

// An unsigned GET of the account is a person looking: a browser is sent to
// the data explorer, anything else gets the service's 401 with a message
// that names the explorer's path. A signed one is the account, as before.
func TestAnUnsignedRootPointsAtTheExplorer(t *testing.T) {
	url := serveWith(t, Config{})
	resp, _ := get(t, url+"/", map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/_explorer/" {
		t.Fatalf("a browser's GET /: %d to %q; want 302 to /_explorer/", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := get(t, url+"/", nil)
	var e struct{ Code, Message string }
	if resp.StatusCode != 401 || json.Unmarshal([]byte(body), &e) != nil || e.Code != "Unauthorized" ||
		!strings.Contains(e.Message, "/_explorer/") {
		t.Fatalf("curl's GET /: %d %s; want a Cosmos 401 naming /_explorer/", resp.StatusCode, body)
	}
	c := &rawClient{t: t, url: url, key: EmulatorKey}
	if r := c.do("GET", "/", "", nil); r.status != 200 || !strings.Contains(string(r.body), `"writableLocations"`) {
		t.Fatalf("a signed GET /: %d %s; want the account", r.status, r.body)
	}
}
