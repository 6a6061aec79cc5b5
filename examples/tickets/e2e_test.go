package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// e2eDir is the npm project of the browser tests.
const e2eDir = "e2e"

// e2eTimeout bounds one run of the browser suite.
const e2eTimeout = 8 * time.Minute

// chromiumPath finds Debian's Chromium (or the one CHROMIUM names).
func chromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium is not installed (apt-get install chromium)")
}

// viewports are the windows the browser suite runs in: a desktop and a
// phone (the suite's layout test also tries 360 and 414 px on the phone).
var viewports = []struct{ name, size string }{{"desktop", "1280x900"}, {"phone", "390x844"}}

// TestBrowser clicks through every scenario of the site in headless
// Chromium with Playwright (e2e/*.test.mjs) and asserts what the pages
// show, once in a desktop window and once in a phone's, each against a
// fresh app. Screenshots are kept in e2e/screenshots/<width>. It installs
// the suite's npm packages if they are missing. Without Chromium (or
// Node.js, or when the packages cannot be installed) it skips, except in CI
// (CI=true), where it fails: CI must not skip it silently.
func TestBrowser(t *testing.T) {
	need := func(err error, what string) {
		if err == nil {
			return
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v", what, err)
		}
		t.Skipf("%s: %v", what, err)
	}
	chromium, err := chromiumPath()
	need(err, "the browser tests need Chromium")
	node, err := exec.LookPath("node")
	need(err, "the browser tests need Node.js")
	need(installE2E(t), "the browser tests need their npm packages (`npm ci --prefix examples/tickets/e2e`)")
	tests := e2eFiles(t)
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) { runE2E(t, node, chromium, tests, vp.size) })
	}
}

// runE2E runs the browser suite in a window of size ("WIDTHxHEIGHT")
// against a fresh app.
func runE2E(t *testing.T, node, chromium string, tests []string, size string) {
	width, _, _ := strings.Cut(size, "x")
	shots, err := filepath.Abs(filepath.Join(e2eDir, "screenshots", width))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// Chromium's profiles; removed at the end, ignoring a crash-reporter process
	// of the browser that may still be writing there.
	profile, err := os.MkdirTemp("", "tickets-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	ta := startApp(t)

	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	args := append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, tests...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = e2eDir
	cmd.Env = append(os.Environ(),
		"TICKETS_URL="+ta.url,
		"CHROMIUM="+chromium,
		"SCREENSHOTS="+shots,
		"PROFILE_DIR="+profile,
		"VIEWPORT="+size,
		"NO_COLOR=1",
	)
	out := &lineLog{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	out.flush()
	t.Logf("screenshots: %s", shots)
	if ctx.Err() != nil {
		t.Fatalf("the browser suite did not finish within %v", e2eTimeout)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("the browser suite failed (node exit code %d); see its output above", exit.ExitCode())
	case err != nil:
		t.Fatalf("running node: %v", err)
	}
}

// installE2E runs `npm ci` in the suite's directory when its packages are
// missing (.ci/run installs them beforehand).
func installE2E(t *testing.T) error {
	if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", "playwright-core", "package.json")); err == nil {
		if _, err := os.Stat(filepath.Join(e2eDir, "node_modules", "axe-core", "package.json")); err == nil {
			return nil
		}
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = e2eDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm ci: %v: %s", err, out)
	}
	t.Logf("installed the browser suite's npm packages")
	return nil
}

// e2eFiles returns the suite's test files, reading every module and the
// lock file so that go test's cache notices a change to any of them.
func e2eFiles(t *testing.T) []string {
	t.Helper()
	modules, err := filepath.Glob(filepath.Join(e2eDir, "*.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, f := range append(modules, filepath.Join(e2eDir, "package-lock.json")) {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatalf("reading the browser suite: %v", err)
		}
		if strings.HasSuffix(f, ".test.mjs") {
			tests = append(tests, filepath.Base(f))
		}
	}
	if len(tests) == 0 {
		t.Fatalf("no *.test.mjs files in %s", e2eDir)
	}
	return tests
}

// lineLog is an io.Writer that logs each complete line through t.Log.
type lineLog struct {
	t       *testing.T
	mu      sync.Mutex
	partial []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
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

func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.t.Log(string(l.partial))
		l.partial = nil
	}
}
