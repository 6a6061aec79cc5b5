package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFaultsCommandManagesARunningServersRules: serve --faults installs the
// file's rules; orrery faults list shows them with their hits, add installs
// one from flags, clear removes one or all; a bad rule is refused with why.
func TestFaultsCommandManagesARunningServersRules(t *testing.T) {
	bin := buildBinary(t)
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`[{"id":"storm","condition":{"operations":["CreateItem","UPSERT_ITEM"],"container":"orders"},"result":{"type":"TooManyRequests","retryAfter":"500ms"},"probability":0.5}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startChild(t, bin, "--memory", "--faults", file)
	defer srv.kill()
	run := func(sub string, args ...string) (string, error) {
		out, err := exec.Command(bin, append([]string{"faults", sub, "--endpoint", srv.endpoint}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("list")
	if err != nil || !strings.Contains(out, "storm") || !strings.Contains(out, "TooManyRequests retry after 500ms on CreateItem|UpsertItem, container orders") {
		t.Fatalf("faults list after serve --faults: %v\n%s", err, out)
	}
	if out, err = run("add", "--id", "cut", "--type", "AppliedThenLost", "--lost", "503", "--operations", "ReplaceItem,PatchItem", "--times", "3"); err != nil || !strings.Contains(out, "added cut: AppliedThenLost (lost as ServiceUnavailable) on ReplaceItem|PatchItem, 3 times") {
		t.Fatalf("faults add: %v\n%s", err, out)
	}
	if out, err = run("add", "--type", "Explode"); err == nil || !strings.Contains(out, "unknown fault type") {
		t.Fatalf("a bad rule: %v\n%s", err, out)
	}
	if out, err = run("clear", "storm"); err != nil || !strings.Contains(out, "removed storm") {
		t.Fatalf("faults clear storm: %v\n%s", err, out)
	}
	if out, err = run("list", "--json"); err != nil || strings.Contains(out, "storm") || !strings.Contains(out, `"id":"cut"`) {
		t.Fatalf("faults list --json: %v\n%s", err, out)
	}
	if out, err = run("clear"); err != nil || !strings.Contains(out, "removed 1 rule(s)") {
		t.Fatalf("faults clear: %v\n%s", err, out)
	}
	raw, err := exec.Command(bin, "faults", "list", "--endpoint", srv.endpoint, "--key", "bm90IHRoZSBrZXk=").CombinedOutput()
	if out = string(raw); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("faults list with a wrong key: %v\n%s", err, out)
	}
}
