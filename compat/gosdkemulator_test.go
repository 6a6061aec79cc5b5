package compat

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/orrerytest"
)

// emulatorOnlyTests are the tests of the Go SDK's emulator suite that need
// the emulator itself: its account document (a region endpoint of
// https://127.0.0.1:8081/ and Strong default consistency). Its compute
// gateway, on the emulator's second port, is the server's compute gateway
// (orrerytest.Options.ComputeGateway).
var emulatorOnlyTests = map[string]bool{
	"TestGlobalEndpointManagerEmulator": true,
}

// TestGoSDKEmulatorSuitePasses runs the azcosmos module's own emulator
// tests (its emulator_*_test.go files, which `EMULATOR=1 go test` runs
// against the emulator at https://localhost:8081/) against an in-process
// server: a copy of the module this repository builds with, its emulator
// endpoints pointed at the server, the server's certificate trusted. Every
// test passes but those in emulatorOnlyTests. It compiles the SDK's tests,
// which takes minutes: set ORRERY_GO_SDK_SUITE=1 to run it.
func TestGoSDKEmulatorSuitePasses(t *testing.T) {
	if os.Getenv("ORRERY_GO_SDK_SUITE") == "" {
		t.Skip("set ORRERY_GO_SDK_SUITE=1 to run the Go SDK's own emulator suite")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos").Output()
	if err != nil {
		t.Fatalf("locating the azcosmos module: %v", err)
	}
	src := strings.TrimSpace(string(out))
	dir := filepath.Join(t.TempDir(), "azcosmos")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	s := orrerytest.StartWith(t, orrerytest.Options{TLS: true, ComputeGateway: true})
	// By name, as the suite addresses the emulator: its tracing tests look
	// for spans named after the host.
	byName := func(endpoint string) string {
		return strings.Replace(strings.TrimSuffix(endpoint, "/")+"/", "://127.0.0.1:", "://localhost:", 1)
	}
	setup := filepath.Join(dir, "emulator_test.go")
	code, err := os.ReadFile(setup)
	if err != nil {
		t.Fatal(err)
	}
	for e, to := range map[string]string{
		"https://localhost:8081/": byName(s.Endpoint),
		"https://localhost:8903/": byName(s.ComputeGatewayEndpoint),
	} {
		if !bytes.Contains(code, []byte(e)) {
			t.Fatalf("the suite's setup no longer names %s", e)
		}
		code = bytes.ReplaceAll(code, []byte(e), []byte(to))
	}
	if err := os.Chmod(setup, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(setup, code, 0o644); err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(t.TempDir(), "orrery.pem")
	if err := os.WriteFile(certFile, s.CertificatePEM, 0o644); err != nil {
		t.Fatal(err)
	}

	// The suite's tests, by name, from its emulator files.
	files, _ := filepath.Glob(filepath.Join(dir, "emulator_*_test.go"))
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	if len(names) == 0 {
		t.Fatal("no emulator tests found")
	}
	cmd := exec.Command("go", "test", "-count=1", "-p", "1", "-v", "-run", "^("+strings.Join(names, "|")+")$", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EMULATOR=1", "SSL_CERT_FILE="+certFile, "GOWORK=off", "GOFLAGS=-mod=mod")
	log, _ := cmd.CombinedOutput()

	// Each test's result and what it printed.
	result, output := map[string]string{}, map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (Test\w+)`)
	current := ""
	for sc.Scan() {
		text := sc.Text()
		if name, ok := strings.CutPrefix(text, "=== RUN   "); ok && !strings.Contains(name, "/") {
			current = name
			output[current] = &strings.Builder{}
		}
		if m := line.FindStringSubmatch(text); m != nil {
			result[m[2]] = m[1]
		}
		if current != "" {
			output[current].WriteString(text + "\n")
		}
	}
	var passed, unexpected []string
	for _, n := range names {
		switch {
		case result[n] == "PASS":
			passed = append(passed, n)
		case !emulatorOnlyTests[n]:
			unexpected = append(unexpected, n+" "+orDefault(result[n], "did not run"))
			if o := output[n]; o != nil {
				t.Logf("%s:\n%s", n, o)
			}
		}
	}
	sort.Strings(unexpected)
	t.Logf("the Go SDK's emulator suite: %d of %d pass", len(passed), len(names))
	if len(unexpected) > 0 {
		t.Fatalf("failing beyond the emulator-only tests: %v\n%s", unexpected, tail(log, 2000))
	}
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tail is the end of b, at most n bytes.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
