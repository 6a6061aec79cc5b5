package compat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/orrerytest"
)

// pythonSDKScript drives the Python SDK through CRUD, conditions, queries,
// the change feed and a stored procedure; it prints one line a step.
const pythonSDKScript = "python/crud.py"

// pythonSDKWant is what Cosmos DB answers to each step of pythonSDKScript.
var pythonSDKWant = []string{
	"database pydb conflict 409",
	"container c ['/pk'] -1",
	"created a 1 again 409",
	"same id, other partition 10",
	"stale etag 412",
	"by _self 2",
	"query [2, 5]",
	"change feed [('a', 'p'), ('a', 'q'), ('b', 'p')]",
	"sproc 10",
	"sproc error 404",
	"deleted 404",
	"database gone 404",
}

// pythonWithSDK returns a python3 on PATH that can import the Python SDK:
// the system's, where a version manager's comes first on PATH. Without one
// the test is skipped, unless ORRERY_REQUIRE_PYTHON_SDK is set (.ci/run
// installs the SDK and sets it), when it fails.
func pythonWithSDK(t *testing.T) string {
	t.Helper()
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "python3")
		if seen[p] {
			continue
		}
		seen[p] = true
		if exec.Command(p, "-c", "import azure.cosmos.cosmos_client").Run() == nil {
			return p
		}
	}
	const missing = "no python3 on PATH imports azure.cosmos: install Debian's python3-azure-cosmos (.ci/run does)"
	if os.Getenv("ORRERY_REQUIRE_PYTHON_SDK") != "" {
		t.Fatal(missing)
	}
	t.Skip(missing)
	return ""
}

// TestPythonSDK runs the unmodified Python SDK (azure-cosmos 3.1, the line
// Debian packages; PyPI's 4.x cannot be installed here) against an
// in-process server. Its RID links are signed by the RID alone, and its
// change feed header is spelled "Incremental feed": both are exercised.
func TestPythonSDK(t *testing.T) {
	python := pythonWithSDK(t)
	srv := orrerytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, pythonSDKScript)
	cmd.Env = append(os.Environ(), "ORRERY_ENDPOINT="+srv.Endpoint, "ORRERY_KEY="+srv.Key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python SDK script failed: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if strings.Join(got, "\n") != strings.Join(pythonSDKWant, "\n") {
		t.Fatalf("the Python SDK printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(pythonSDKWant, "\n"))
	}
}
