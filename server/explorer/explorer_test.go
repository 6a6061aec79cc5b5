package explorer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// e2eDir is the npm project holding the browser tests.
const e2eDir = "e2e"

// e2eTimeout bounds one run of the browser suite on a loaded machine.
const e2eTimeout = 8 * time.Minute

// readOnlyKey is the read-only key of the server the browser tests use.
const readOnlyKey = "cmVhZC1vbmx5IGtleSBvZiB0aGUgZXhwbG9yZXIgdGVzdHMgLS0gbm90IGEgc2VjcmV0IQ=="

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// send sends a request, signed or not, and returns the response and its body.
func send(t *testing.T, method, url string, headers map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// signed returns the headers of a master-key request over the resource.
func signed(t *testing.T, key, verb, rtype, rlink string) map[string]string {
	t.Helper()
	date := time.Now().UTC().Format(http.TimeFormat)
	auth, err := server.Sign(key, verb, rtype, rlink, date)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"Authorization": auth, "x-ms-date": date, "x-ms-version": "2020-07-15"}
}

// TestExplorerServesOnlyStaticFiles checks the explorer's prefix on a real
// server: it serves its page and assets with a strict content security
// policy, to anyone, and nothing else: no data, no directory listing, no
// way through to the REST API, whatever the method, path or credential.
func TestExplorerServesOnlyStaticFiles(t *testing.T) {
	srv := orrerytest.Start(t)
	base := strings.TrimSuffix(srv.Endpoint, "/")
	ctx := context.Background()
	if _, err := srv.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "secretdb"}, nil); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/_explorer/", "/_explorer/app.js", "/_explorer/cosmos.js", "/_explorer/metrics.js", "/_explorer/format.js", "/_explorer/style.css"} {
		res, body := send(t, "GET", base+path, nil, "")
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d, want 200", path, res.StatusCode)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if strings.Contains(body, "secretdb") {
			t.Errorf("GET %s reveals data", path)
		}
		if strings.Contains(body, "//cdn") || strings.Contains(body, "https://") {
			t.Errorf("GET %s loads something from another origin", path)
		}
	}
	if res, _ := send(t, "GET", base+"/_explorer/", nil, ""); !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the page is served as %q", res.Header.Get("Content-Type"))
	}
	if res, _ := send(t, "GET", base+"/_explorer", nil, ""); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/_explorer/" {
		t.Errorf("GET /_explorer: %d to %q, want a redirect to /_explorer/", res.StatusCode, res.Header.Get("Location"))
	}

	// Paths that try to reach the REST API or the file system through the
	// prefix, signed with the master key over what they name: none of them
	// may answer with data.
	key := srv.Key
	for _, tc := range []struct {
		method, path, rtype, rlink string
	}{
		{"GET", "/_explorer/../dbs", "dbs", ""},
		{"GET", "/_explorer/%2e%2e/dbs", "dbs", ""},
		{"GET", "/_explorer/dbs", "dbs", ""},
		{"GET", "/_explorer/dbs/secretdb", "dbs", "dbs/secretdb"},
		{"GET", "/_explorer//dbs", "dbs", ""},
		{"GET", "/_explorer/assets/index.html", "", ""},
		{"GET", "/_explorer/../../etc/passwd", "", ""},
		{"POST", "/_explorer/dbs", "dbs", ""},
		{"DELETE", "/_explorer/dbs/secretdb", "dbs", "dbs/secretdb"},
		{"PUT", "/_explorer/index.html", "", ""},
	} {
		res, body := send(t, tc.method, base+tc.path, signed(t, key, tc.method, tc.rtype, tc.rlink), `{"id":"made"}`)
		if res.StatusCode == 200 || res.StatusCode == 201 || strings.Contains(body, "secretdb") || strings.Contains(body, "_rid") {
			t.Errorf("%s %s: %d %q: the explorer's prefix answered with data", tc.method, tc.path, res.StatusCode, body)
		}
	}
	made, _ := srv.Client.NewDatabase("made")
	if _, err := made.Read(ctx, nil); err == nil {
		t.Errorf("a POST under /_explorer/ created a database")
	}
	secret, _ := srv.Client.NewDatabase("secretdb")
	if _, err := secret.Read(ctx, nil); err != nil {
		t.Errorf("a DELETE under /_explorer/ touched a database: %v", err)
	}

	// The REST API itself still refuses the unauthenticated and the wrong key.
	if res, _ := send(t, "GET", base+"/dbs", nil, ""); res.StatusCode != 401 {
		t.Errorf("GET /dbs without a key: %d, want 401", res.StatusCode)
	}
	wrong := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
	if res, _ := send(t, "GET", base+"/dbs", signed(t, wrong, "GET", "dbs", ""), ""); res.StatusCode != 401 {
		t.Errorf("GET /dbs with a wrong key: %d, want 401", res.StatusCode)
	}
}

// TestExplorerConditionalAndRangeErrorsAreCosmosErrorBodies: the errors the
// file server decides from a request's headers (a failed If-Match, a range
// outside the file) reach the client in Cosmos's error body, as every other
// error of the server does, and conditions that hold still serve the file.
func TestExplorerConditionalAndRangeErrorsAreCosmosErrorBodies(t *testing.T) {
	srv := orrerytest.Start(t)
	base := strings.TrimSuffix(srv.Endpoint, "/")
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
		code    string
	}{
		{"If-Match of a tag", map[string]string{"If-Match": `"0"`}, 412, "PreconditionFailed"},
		{"If-Match not a tag", map[string]string{"If-Match": "0"}, 412, "PreconditionFailed"},
		{"a range past the end", map[string]string{"Range": "bytes=99999999-"}, 416, "RequestedRangeNotSatisfiable"},
	} {
		for _, path := range []string{"/_explorer/", "/_explorer/app.js"} {
			res, body := send(t, "GET", base+path, tc.headers, "")
			var e struct{ Code, Message string }
			if res.StatusCode != tc.status || json.Unmarshal([]byte(body), &e) != nil || e.Code != tc.code || e.Message == "" {
				t.Errorf("%s, GET %s: %d %q, want %d with a Cosmos error body of code %s", tc.name, path, res.StatusCode, body, tc.status, tc.code)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s, GET %s: Content-Type %q", tc.name, path, ct)
			}
		}
	}
	for _, h := range []map[string]string{{"If-Match": "*"}, {"Range": "bytes=0-9"}} {
		res, body := send(t, "GET", base+"/_explorer/app.js", h, "")
		if res.StatusCode != 200 && res.StatusCode != 206 || body == "" || strings.Contains(body, `"code"`) {
			t.Errorf("GET /_explorer/app.js with %v: %d %q, want the file", h, res.StatusCode, body)
		}
	}
}

// TestExplorerInBrowser drives the explorer in headless Chromium through
// Playwright: the node:test suite in e2e clicks through every feature
// against an in-process server. It needs Debian's chromium and
// `npm ci --prefix server/explorer/e2e`; without chromium it skips, except
// in CI (CI=true), where it fails.
func TestExplorerInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is not installed at %s (apt-get install chromium): %v", chromiumPath, err)
		}
		t.Skipf("chromium is not installed at %s: install Debian's chromium package to run the browser tests", chromiumPath)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: the browser tests need Node.js 20 or later: %v", err)
	}
	for _, pkg := range []string{"playwright-core", "axe-core", "@azure/cosmos"} {
		if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("%s is not installed (%v): run `npm ci --prefix server/explorer/e2e` from the repository root first", pkg, err)
		}
	}
	files := e2eFiles(t)

	srv := orrerytest.Start(t)
	token := seed(t, srv)
	// The browser talks to a second server over the same engine that also
	// has a read-only key (orrerytest's has the master key only).
	api, err := server.New(server.Config{Engine: srv.Engine,
		Keys:   server.Keys{Master: srv.Key, ReadOnly: readOnlyKey},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)

	shots, err := filepath.Abs(filepath.Join(e2eDir, "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", shots)

	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	args := append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = e2eDir
	cmd.Env = append(os.Environ(),
		"ORRERY_ENDPOINT="+hs.URL+"/",
		"ORRERY_KEY="+srv.Key,
		"ORRERY_READONLY_KEY="+readOnlyKey,
		"ORRERY_TOKEN="+token,
		"ORRERY_SCREENSHOTS="+shots,
		"CHROMIUM="+chromiumPath,
		"NO_COLOR=1",
	)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.WaitDelay = 10 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Log(sc.Text())
		}
	}()
	err = cmd.Run()
	pw.Close()
	<-done
	if ctx.Err() != nil {
		t.Fatalf("the browser suite did not finish within %v", e2eTimeout)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("the browser suite failed (node exit code %d); see the output above", exit.ExitCode())
	case err != nil:
		t.Fatalf("running node: %v", err)
	}
}

// e2eFiles lists the suite's test files and reads them and the page's
// assets, so that go test's cache notices when any of them changes.
func e2eFiles(t *testing.T) []string {
	t.Helper()
	tests, err := filepath.Glob(filepath.Join(e2eDir, "*.test.mjs"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no browser tests in %s (%v)", e2eDir, err)
	}
	assets, _ := filepath.Glob(filepath.Join("assets", "*"))
	helpers, _ := filepath.Glob(filepath.Join(e2eDir, "*.mjs"))
	for _, f := range append(append(append([]string{filepath.Join(e2eDir, "package-lock.json")}, helpers...), tests...), assets...) {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, len(tests))
	for i, f := range tests {
		names[i] = filepath.Base(f)
	}
	return names
}

// seed writes what the browser suite starts from, through the Go SDK: a
// database "shop" with a container "orders" (partition key /customer) of 30
// items, and a container "private" reachable with a resource token, which it
// returns.
func seed(t *testing.T, srv *orrerytest.Server) string {
	t.Helper()
	ctx := context.Background()
	if _, err := srv.Client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil {
		t.Fatal(err)
	}
	shop, _ := srv.Client.NewDatabase("shop")
	for _, name := range []string{"orders", "private"} {
		if _, err := shop.CreateContainer(ctx, azcosmos.ContainerProperties{ID: name,
			PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/customer"}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	orders, _ := shop.NewContainer("orders")
	for i := 1; i <= 30; i++ {
		customer := []string{"alice", "bob", "carol"}[i%3]
		item := fmt.Sprintf(`{"id":"order-%02d","customer":%q,"total":%d,"status":"open"}`, i, customer, i*10)
		if _, err := orders.CreateItem(ctx, azcosmos.NewPartitionKeyString(customer), []byte(item), nil); err != nil {
			t.Fatal(err)
		}
	}
	private, _ := shop.NewContainer("private")
	if _, err := private.CreateItem(ctx, azcosmos.NewPartitionKeyString("dave"), []byte(`{"id":"note-1","customer":"dave","text":"for token holders"}`), nil); err != nil {
		t.Fatal(err)
	}

	// Users and permissions over raw HTTP: the Go SDK has no API for them.
	base := strings.TrimSuffix(srv.Endpoint, "/")
	post := func(path, rtype, rlink, body string) map[string]any {
		res, out := send(t, "POST", base+path, signed(t, srv.Key, "POST", rtype, rlink), body)
		if res.StatusCode != 201 {
			t.Fatalf("POST %s: %d %s", path, res.StatusCode, out)
		}
		var m map[string]any
		if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	post("/dbs/shop/users", "users", "dbs/shop", `{"id":"reader"}`)
	perm := post("/dbs/shop/users/reader/permissions", "permissions", "dbs/shop/users/reader",
		`{"id":"private-read","permissionMode":"Read","resource":"dbs/shop/colls/private"}`)
	token, _ := perm["_token"].(string)
	if token == "" {
		t.Fatalf("the permission has no _token: %v", perm)
	}
	return token
}
