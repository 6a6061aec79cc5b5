package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/orrery-db/orrery/server"
)

// TestServePprofAnswersOnlyTheMasterKey: serve --pprof serves the runtime
// profiles on the main port to the master key as a bearer token; a client
// without it gets Cosmos's 401, and without the flag there are none.
func TestServePprofAnswersOnlyTheMasterKey(t *testing.T) {
	bin := buildBinary(t)
	get := func(endpoint, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", endpoint+"debug/pprof/goroutine?debug=1", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	on := startChild(t, bin, "--memory", "--pprof")
	defer on.kill()
	for _, auth := range []string{"", "Bearer wrong", server.EmulatorKey} {
		if status, body := get(on.endpoint, auth); status != 401 || !strings.Contains(body, `"code":"Unauthorized"`) {
			t.Errorf("--pprof, Authorization %q: %d %.200s, want Cosmos's 401", auth, status, body)
		}
	}
	if status, body := get(on.endpoint, "Bearer "+server.EmulatorKey); status != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("--pprof with the master key: %d %.200s", status, body)
	}
	off := startChild(t, bin, "--memory")
	defer off.kill()
	if status, body := get(off.endpoint, "Bearer "+server.EmulatorKey); status == 200 || strings.Contains(body, "goroutine profile") {
		t.Errorf("without --pprof: %d %.200s, want no profile", status, body)
	}
}
