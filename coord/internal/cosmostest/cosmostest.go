// Package cosmostest gives coord's tests a Cosmos DB endpoint to run against.
//
// coord is its own module so that a service importing it compiles and
// downloads nothing of the Orrery server; its tests therefore cannot import
// the server in-process. Instead they get an endpoint from the environment
// (COORD_TEST_ENDPOINT and COORD_TEST_KEY: Azure Cosmos DB, the official
// emulator, or a running Orrery) or, inside the Orrery repository, by building
// cmd/orrery once per test binary and starting it with --memory on a free
// loopback port. Outside the repository and without an endpoint the tests
// that need one are skipped, saying why.
package cosmostest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// EmulatorKey is the well-known key of the emulator, which Orrery uses by default.
const EmulatorKey = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// Server is an endpoint the tests may use.
type Server struct {
	Endpoint string
	Key      string
	// cmd is the started process when this package started one.
	cmd *exec.Cmd
}

// Client returns a new azcosmos client for the server.
func (s *Server) Client(t testing.TB) *azcosmos.Client {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(s.Key)
	if err != nil {
		t.Fatalf("cosmostest: %v", err)
	}
	c, err := azcosmos.NewClientWithKey(s.Endpoint, cred, nil)
	if err != nil {
		t.Fatalf("cosmostest: %v", err)
	}
	return c
}

// Kill stops a server this package started (SIGKILL); for tests of what a
// crash of the server does. It fails the test for an endpoint from the
// environment.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		t.Fatal("cosmostest: cannot kill an endpoint given by the environment")
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// ErrNoEndpoint means the tests have no server to run against: no
// COORD_TEST_ENDPOINT, and no Orrery repository above to build one from.
var ErrNoEndpoint = errors.New("no endpoint: set COORD_TEST_ENDPOINT (and COORD_TEST_KEY), or run inside the Orrery repository")

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Start returns a server for the test: the environment's endpoint when
// COORD_TEST_ENDPOINT is set, otherwise a fresh in-memory Orrery process that
// is stopped when the test ends. Every call without an environment endpoint
// starts a new process, so tests do not see each other's data.
func Start(t testing.TB) *Server {
	t.Helper()
	if ep := os.Getenv("COORD_TEST_ENDPOINT"); ep != "" {
		key := os.Getenv("COORD_TEST_KEY")
		if key == "" {
			key = EmulatorKey
		}
		return &Server{Endpoint: ep, Key: key}
	}
	bin, err := orreryBinary()
	if errors.Is(err, ErrNoEndpoint) {
		t.Skipf("cosmostest: %v", err)
	}
	if err != nil {
		t.Fatalf("cosmostest: %v", err)
	}
	s, err := startProcess(bin)
	if err != nil {
		t.Fatalf("cosmostest: %v", err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// orreryBinary builds cmd/orrery of the enclosing repository once per test
// binary.
func orreryBinary() (string, error) {
	buildOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			buildErr = fmt.Errorf("%w (%v)", ErrNoEndpoint, err)
			return
		}
		dir, err := os.MkdirTemp("", "coord-orrery-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "orrery")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/orrery")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building cmd/orrery: %v\n%s", err, out)
		}
	})
	return binary, buildErr
}

// repoRoot walks up from the working directory to the Orrery module's root.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/orrery-db/orrery\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the Orrery repository is not above this directory")
		}
		dir = parent
	}
}

var readyLine = regexp.MustCompile(`orrery ready.* addr=(\S+)`)

func startProcess(bin string) (*Server, error) {
	cmd := exec.Command(bin, "serve", "--memory", "--addr", "127.0.0.1:0", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case a := <-addr:
		return &Server{Endpoint: "http://" + a + "/", Key: EmulatorKey, cmd: cmd}, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("the orrery process did not report ready within 30 s")
	}
}
