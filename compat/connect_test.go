package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/instance"
	"github.com/orrery-db/orrery/orrerytest/onpostgres"
	"github.com/orrery-db/orrery/server"
	"github.com/orrery-db/orrery/storage/memory"
)

// connectDir holds the README's connection snippets as programs.
const connectDir = "../examples/connect"

// connectSnippets are the README's Connecting snippets: the fence's
// language, and the file of examples/connect it must equal.
var connectSnippets = []struct{ lang, file string }{
	{"go", "main.go"},
	{"js", "connect.mjs"},
	{"python", "connect.py"},
}

var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")

// readmeSnippets returns the code blocks of the README's Connecting section
// by language; each language must have one.
func readmeSnippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "\n## Connecting\n")
	if start < 0 {
		t.Fatal("README.md has no Connecting section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	out := map[string]string{}
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		for _, s := range connectSnippets {
			if m[1] == s.lang {
				if _, dup := out[s.lang]; dup {
					t.Fatalf("README.md's Connecting section has two %s snippets", s.lang)
				}
				out[s.lang] = m[2]
			}
		}
	}
	for _, s := range connectSnippets {
		if out[s.lang] == "" {
			t.Fatalf("README.md's Connecting section has no %s snippet", s.lang)
		}
	}
	return out
}

// TestREADMESnippetsAreTheExamples: examples/connect holds the README's
// connection code as it is printed, for people to run from the repository.
func TestREADMESnippetsAreTheExamples(t *testing.T) {
	snippets := readmeSnippets(t)
	for _, s := range connectSnippets {
		b, err := os.ReadFile(filepath.Join(connectDir, s.file))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != snippets[s.lang] {
			t.Errorf("README.md's %s snippet is not examples/connect/%s as it is: copy one onto the other", s.lang, s.file)
		}
	}
}

const wantConnectOutput = `{"id":"1","customer":"alice","total":12.5}`

// snippetRunner runs one README snippet against an endpoint.
type snippetRunner struct {
	name string
	run  func(t *testing.T, endpoint string) (stdout, stderr string, err error)
}

// TestREADMESnippetsRunAsPrintedTwiceInAnyOrder takes the Go, JavaScript
// and Python snippets out of the README and runs each as printed against
// one server over HTTPS, trusting the certificate `orrery cert` prints:
// each twice in a row, then all of them again in the reverse order, so
// that every one meets what the others made. Each must print the item and,
// for Python, no warning. The JavaScript one runs over plain HTTP too, and
// the Python one against another name than localhost, for which the SDK
// checks the certificate against the file.
func TestREADMESnippetsRunAsPrintedTwiceInAnyOrder(t *testing.T) {
	if onpostgres.Selected() {
		t.Skip("runs in the memory pass: it starts a server of its own")
	}
	snippets := readmeSnippets(t)
	dir := t.TempDir()

	ln, err := instance.Listen("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := server.LoadOrCreateCertificate("")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := instance.Start(t.Context(), instance.Config{Store: memory.New(), Listener: ln, Certificate: &cert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	port := fmt.Sprint(inst.Addr().(*net.TCPAddr).Port)
	endpoint := "https://localhost:" + port + "/"
	pemFile := filepath.Join(dir, "orrery.pem")
	if err := os.WriteFile(pemFile, inst.CertificatePEM, 0o644); err != nil {
		t.Fatal(err)
	}

	// Go: the printed program, built once from the README's text in this
	// module (for its go.sum).
	goDir := filepath.Join(dir, "go")
	os.Mkdir(goDir, 0o755)
	if err := os.WriteFile(filepath.Join(goDir, "main.go"), []byte(snippets["go"]), 0o644); err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(goDir, "connect")
	if out, err := exec.Command("go", "build", "-o", goBin, filepath.Join(goDir, "main.go")).CombinedOutput(); err != nil {
		t.Fatalf("go build of the README's Go snippet: %v\n%s", err, out)
	}
	runGo := snippetRunner{"go", func(t *testing.T, endpoint string) (string, string, error) {
		return runSnippet(exec.Command(goBin), "COSMOS_ENDPOINT="+endpoint, "COSMOS_CA="+pemFile)
	}}

	// JavaScript: node resolves @azure/cosmos from the script's folder, so
	// the README's text runs from inside the JavaScript suite's project.
	runJS := snippetRunner{"js", func(t *testing.T, endpoint string) (string, string, error) {
		if _, err := os.Stat(filepath.Join(jsSuiteDir, "node_modules", "@azure", "cosmos")); err != nil {
			t.Fatalf("the JavaScript SDK is not installed (%v): run `npm ci --prefix compat/js` first", err)
		}
		script, err := os.CreateTemp(jsSuiteDir, ".connect-snippet-*.mjs")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(script.Name())
		script.WriteString(snippets["js"])
		script.Close()
		cmd := exec.Command("node", filepath.Base(script.Name()))
		cmd.Dir = jsSuiteDir
		return runSnippet(cmd, "COSMOS_ENDPOINT="+endpoint, "NODE_EXTRA_CA_CERTS="+pemFile)
	}}

	pyFile := filepath.Join(dir, "connect.py")
	if err := os.WriteFile(pyFile, []byte(snippets["python"]), 0o644); err != nil {
		t.Fatal(err)
	}
	runPython := snippetRunner{"python", func(t *testing.T, endpoint string) (string, string, error) {
		py, pythonPath := pythonSDK(t)
		cmd := exec.Command(py, pyFile)
		cmd.Env = withPythonPath(pythonPath)
		return runSnippet(cmd, "COSMOS_ENDPOINT="+endpoint, "COSMOS_CA="+pemFile)
	}}

	check := func(r snippetRunner, endpoint string) {
		t.Helper()
		stdout, stderr, err := r.run(t, endpoint)
		if err != nil {
			t.Fatalf("the README's %s snippet against %s: %v\n%s%s", r.name, endpoint, err, stdout, stderr)
		}
		var compact bytes.Buffer // Python's json.dumps spaces its separators
		if err := json.Compact(&compact, bytes.TrimSpace([]byte(stdout))); err != nil || compact.String() != wantConnectOutput {
			t.Fatalf("the README's %s snippet against %s printed %q; want %s", r.name, endpoint, stdout, wantConnectOutput)
		}
		if strings.Contains(stderr, "Warning") {
			t.Fatalf("the README's %s snippet against %s warned:\n%s", r.name, endpoint, stderr)
		}
	}
	steps := []snippetRunner{runGo, runGo, runJS, runJS, runPython, runPython, runPython, runJS, runGo}
	for i, r := range steps {
		t.Run(fmt.Sprintf("%d_%s", i+1, r.name), func(t *testing.T) { check(r, endpoint) })
	}
	t.Run("js_over_http", func(t *testing.T) { check(runJS, inst.HTTPEndpoint()) })
	t.Run("python_by_another_name", func(t *testing.T) {
		other := anotherLoopbackName()
		if other == "" {
			t.Skip("no name but localhost reaches this machine's loopback here (neither the host name nor ::1)")
		}
		check(runPython, "https://"+net.JoinHostPort(other, port)+"/")
	})
}

// anotherLoopbackName is a name other than localhost and 127.0.0.1 (which
// the Python SDK exempts from certificate checks) under which this
// machine's loopback answers and that a generated certificate covers: the
// host name when it resolves to a loopback address, else ::1.
func anotherLoopbackName() string {
	if h, err := os.Hostname(); err == nil && h != "localhost" {
		if addrs, err := net.LookupHost(h); err == nil && len(addrs) > 0 {
			all := true
			for _, a := range addrs {
				if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
					all = false
				}
			}
			if all {
				return h
			}
		}
	}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		return "::1"
	}
	return ""
}

// runSnippet runs cmd with env added, returning its standard output and
// error apart.
func runSnippet(cmd *exec.Cmd, env ...string) (string, string, error) {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}
