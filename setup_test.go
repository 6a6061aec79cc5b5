package orrery

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestGoInstallWorks: `go install github.com/orrery-db/orrery/cmd/orrery@latest`
// refuses a module whose go.mod has replace directives, and cannot resolve
// a requirement of a module that lives only in this workspace. The
// server's module has neither: coord and the reference app are modules of
// their own, which the server does not require.
func TestGoInstallWorks(t *testing.T) {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "replace" || f[0] == "exclude") {
			t.Errorf("go.mod:%d: %s: go install …@latest refuses a module with replace or exclude directives", i+1, line)
		}
		if strings.Contains(line, module+"/") {
			t.Errorf("go.mod:%d: %s: a module of this repository, which go install cannot resolve", i+1, line)
		}
	}
}

// dockerBuild is the Dockerfile's go build command, with its output path
// and version argument.
var dockerBuild = regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 .*go build .*) -o (\S+) (\./cmd/orrery)$`)

// TestDockerfileBuildsAStaticBinaryThatServes builds the binary with the
// Dockerfile's own command (no Docker engine needed) and checks what the
// image counts on: a static executable (the image is empty: no libc), that
// listens on every interface with the image's environment and says so, and
// whose health check passes.
func TestDockerfileBuildsAStaticBinaryThatServes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a full static build takes minutes on two cores")
	}
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := dockerBuild.FindStringSubmatch(string(df))
	if m == nil {
		t.Fatal("the Dockerfile has no RUN CGO_ENABLED=0 … go build … -o … ./cmd/orrery line")
	}
	env := regexp.MustCompile(`(?m)^ENV (.*)$`).FindStringSubmatch(string(df))
	if env == nil || !strings.Contains(env[1], "ORRERY_ADDR=:8081") {
		t.Fatalf("the Dockerfile's ENV %q does not listen on every interface", env)
	}
	bin := filepath.Join(t.TempDir(), "orrery")
	build := exec.Command("sh", "-c", m[1]+" -o "+bin+" "+m[3])
	build.Env = append(os.Environ(), "VERSION=docker-check")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader (PT_INTERP): it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v", libs)
	}
	f.Close()
	if out, err := exec.Command(bin, "version").Output(); err != nil || strings.TrimSpace(string(out)) != "orrery docker-check" {
		t.Errorf("orrery version: %q, %v", out, err)
	}

	// The image's environment, on a free port of every interface.
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "ORRERY_ADDR=:0", "ORRERY_DATA="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ready := regexp.MustCompile(`msg="orrery ready" addr=\S+:(\d+) `)
	var port string
	var said strings.Builder
	lines := bufio.NewScanner(stderr)
	deadline := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for lines.Scan() {
		said.WriteString(lines.Text() + "\n")
		if m := ready.FindStringSubmatch(lines.Text()); m != nil {
			port = m[1]
		}
		if port != "" && strings.Contains(lines.Text(), "listening on") {
			break
		}
	}
	if port == "" || !strings.Contains(said.String(), "listening on every interface") {
		t.Fatalf("the server with the image's environment said:\n%s", said.String())
	}
	health := exec.Command(bin, "health", "--endpoint", "localhost:"+port)
	if out, err := health.CombinedOutput(); err != nil {
		t.Fatalf("orrery health (the image's HEALTHCHECK): %v\n%s", err, out)
	}
}
