package compat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/orrerytest"
)

// pythonSuiteDir holds the Python SDK suite, sdk4.py, and fetch-sdk.sh,
// which makes azure-cosmos 4.x importable from a cache folder.
const pythonSuiteDir = "python"

// pythonSuiteMinTests is how many tests sdk4.py holds at least: a run of
// fewer means a class failed to load, not that the SDK passed.
const pythonSuiteMinTests = 32

// pythonSDK finds a python3 that imports azure-cosmos 4.x and the PYTHONPATH
// it needs: the folder ORRERY_PYTHON_SDK names (.ci/run sets it to what
// compat/python/fetch-sdk.sh printed), else fetch-sdk.sh's default cache
// folder, else whatever the python3 on PATH imports. Without one the test is
// skipped, unless ORRERY_REQUIRE_PYTHON_SDK is set, when it fails.
func pythonSDK(t *testing.T) (python, pythonPath string) {
	t.Helper()
	var paths []string
	if p := os.Getenv("ORRERY_PYTHON_SDK"); p != "" {
		paths = append(paths, p)
	} else if dir, err := os.UserCacheDir(); err == nil {
		paths = append(paths, filepath.Join(dir, "orrery-python-sdk", "src"))
	}
	paths = append(paths, "")
	const probe = "import sys, requests, azure.cosmos as c; sys.exit(0 if int(c.__version__.split('.')[0]) >= 4 else 3)"
	var found []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "python3")
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := os.Stat(p); err != nil {
			continue
		}
		for _, pp := range paths {
			cmd := exec.Command(p, "-c", probe)
			cmd.Env = withPythonPath(pp)
			err := cmd.Run()
			if err == nil {
				return p, pp
			}
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
				found = append(found, p+" imports azure-cosmos 3.x, whose API no user starts with now")
			}
		}
	}
	missing := "no python3 on PATH imports azure-cosmos 4.x with requests: run compat/python/fetch-sdk.sh (and install python3-requests and python3-typing-extensions), as .ci/run does"
	if len(found) > 0 {
		missing += " (" + strings.Join(found, "; ") + ")"
	}
	if os.Getenv("ORRERY_REQUIRE_PYTHON_SDK") != "" {
		t.Fatal(missing)
	}
	t.Skip(missing)
	return "", ""
}

// withPythonPath is the environment with dir first on PYTHONPATH.
func withPythonPath(dir string) []string {
	env := os.Environ()
	if dir == "" {
		return env
	}
	pp := dir
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp += string(os.PathListSeparator) + old
	}
	return append(env, "PYTHONPATH="+pp)
}

var pythonRan = regexp.MustCompile(`(?m)^Ran (\d+) tests? in `)

// TestPythonSDK runs the unmodified Python SDK, azure-cosmos 4.x (the line
// users install today), through sdk4.py's unittest suite against an
// in-process server: CRUD and its 404/409/412, partition keys (hierarchical
// too), patch, batch, queries with parameters and across partitions, the
// change feed (all versions and deletes too, and by feed range), stored
// procedures, triggers and UDFs, TTL, unique keys, throughput, resource
// tokens, and the answers to what Orrery does not support.
func TestPythonSDK(t *testing.T) {
	python, pythonPath := pythonSDK(t)
	srv := orrerytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "sdk4")
	cmd.Dir = pythonSuiteDir
	cmd.Env = append(withPythonPath(pythonPath), "ORRERY_ENDPOINT="+srv.Endpoint, "ORRERY_KEY="+srv.Key, "PYTHONWARNINGS=ignore::ResourceWarning")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python SDK suite failed: %v\n%s", err, out)
	}
	m := pythonRan.FindSubmatch(out)
	if m == nil {
		t.Fatalf("the Python SDK suite printed no summary:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < pythonSuiteMinTests {
		t.Fatalf("the Python SDK suite ran %d tests, want at least %d:\n%s", n, pythonSuiteMinTests, out)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("the Python SDK suite skipped tests:\n%s", out)
	}
	t.Logf("%s", out)
}
