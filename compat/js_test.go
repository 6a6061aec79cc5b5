package compat

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/engine"
	"github.com/orrery-db/orrery/engine/script"
	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/server"
)

// jsSuiteDir is the npm project holding the JavaScript SDK tests.
const jsSuiteDir = "js"

// jsSuiteTimeout bounds one run of the whole JavaScript suite.
const jsSuiteTimeout = 3 * time.Minute

// TestJSSDK runs the node:test suite in compat/js against an in-process
// server. The suite uses the unmodified @azure/cosmos package pinned in
// compat/js/package-lock.json; it reads the endpoint and key from
// ORRERY_ENDPOINT and ORRERY_KEY.
func TestJSSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: the JavaScript SDK tests need Node.js 20 or later: %v", err)
	}
	sdk := filepath.Join(jsSuiteDir, "node_modules", "@azure", "cosmos", "package.json")
	if _, err := os.Stat(sdk); err != nil {
		t.Fatalf("the JavaScript SDK is not installed (%v): run `npm ci --prefix compat/js` from the repository root first", err)
	}
	tests := jsSuiteFiles(t)

	// Scripts get 30 s rather than the service's 5 s on the suite's main
	// server: the wait for a slot counts against the budget, and on a
	// loaded two-core machine 20 runs queued on one partition ("seed 003")
	// wait longer than 5 s for their turn. The budget itself is tested on
	// servers of their own (metrics.test.mjs here, scripts_*_test.go).
	srv := orrerytest.StartWith(t, orrerytest.Options{Engine: engine.Options{ScriptLimits: script.Limits{Timeout: 30 * time.Second}}})
	// metrics.test.mjs counts on a server of its own.
	metricsSrv := orrerytest.StartWith(t, orrerytest.Options{Metrics: true, Engine: engine.Options{SweepInterval: -1, ScriptLimits: script.Limits{Timeout: 2 * time.Second}}})
	// Entra ID tests (aad.test.mjs): a TLS server that verifies tokens of
	// an issuer whose key the suite signs with; the SDK sends bearer
	// tokens over https only.
	issuer, err := orrerytest.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	aadSrv := orrerytest.StartWith(t, orrerytest.Options{TLS: true, AAD: server.AAD{
		Mode: server.AADVerify, Keys: issuer.Keys(), Issuers: []string{issuer.Name},
		Roles: []server.RoleAssignment{
			{PrincipalID: "js-writer", RoleDefinitionID: server.DataContributorRole, Scope: "/"},
			{PrincipalID: "js-reader", RoleDefinitionID: server.DataReaderRole, Scope: "/"},
		},
	}})
	caFile := filepath.Join(t.TempDir(), "orrerytest.pem")
	if err := os.WriteFile(caFile, aadSrv.CertificatePEM, 0o600); err != nil {
		t.Fatal(err)
	}

	// node defaults to one file at a time on a two-core machine; the files
	// mostly wait on the server, so run them all at once.
	ctx, cancel := context.WithTimeout(context.Background(), jsSuiteTimeout)
	defer cancel()
	args := append([]string{"--test", "--test-reporter=spec", "--test-concurrency=" + strconv.Itoa(len(tests))}, tests...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = jsSuiteDir
	cmd.Env = append(os.Environ(),
		"ORRERY_ENDPOINT="+srv.Endpoint,
		"ORRERY_KEY="+srv.Key,
		"ORRERY_METRICS_ENDPOINT="+metricsSrv.Endpoint,
		"NO_COLOR=1",
		"ORRERY_AAD_ENDPOINT="+aadSrv.Endpoint,
		"ORRERY_AAD_SIGNING_KEY="+string(issuer.PrivateKeyPEM()),
		"ORRERY_AAD_KID="+issuer.KeyID,
		"ORRERY_AAD_ISSUER="+issuer.Name,
		"NODE_EXTRA_CA_CERTS="+caFile,
	)
	// Stream node's output into the test log line by line as it arrives. If
	// node is killed on timeout, WaitDelay stops waiting for the per-file
	// processes it started to release the output.
	out := &lineLogger{t: t}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	out.flush()
	if ctx.Err() != nil {
		t.Fatalf("the JavaScript suite did not finish within %v", jsSuiteTimeout)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("the JavaScript suite failed (node exit code %d); see the node output above", exit.ExitCode())
	case err != nil:
		t.Fatalf("running node: %v", err)
	}
}

// jsSuiteFiles returns the names of the suite's test files. It reads every
// module of the suite and the lock file so that go test's result cache, which
// tracks the files a test opens, is invalidated when any of them changes.
func jsSuiteFiles(t *testing.T) []string {
	t.Helper()
	modules, err := filepath.Glob(filepath.Join(jsSuiteDir, "*.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, f := range append(modules, filepath.Join(jsSuiteDir, "package-lock.json")) {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatalf("reading the JavaScript suite: %v", err)
		}
		if strings.HasSuffix(f, ".test.mjs") {
			tests = append(tests, filepath.Base(f))
		}
	}
	if len(tests) == 0 {
		t.Fatalf("no *.test.mjs files in compat/%s", jsSuiteDir)
	}
	return tests
}

// lineLogger is an io.Writer that logs each complete line through t.Log.
type lineLogger struct {
	t       *testing.T
	mu      sync.Mutex
	partial []byte
}

// Write logs every complete line in p and keeps the rest for later.
func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

// flush logs a last line that had no newline.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.t.Log(string(l.partial))
		l.partial = nil
	}
}
