package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// TestSeedImportExportThroughTheBinary: `serve --seed` has the seed's items
// before it reports ready, and `import` then `export` move a file's items
// into a new container and out again.
func TestSeedImportExportThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.json")
	if err := os.WriteFile(seed, []byte(`{"databases":[{"id":"shop","containers":[
		{"id":"orders","partitionKey":{"paths":["/customerId"],"kind":"Hash"},
		 "items":[{"id":"1","customerId":"alice"},{"id":"2","customerId":"bob"}]}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startChild(t, bin, "--memory", "--seed", seed)
	defer srv.kill()
	ctx := context.Background()
	orders, _ := newClient(t, srv.endpoint).NewContainer("shop", "orders")
	if _, err := orders.ReadItem(ctx, azcosmos.NewPartitionKeyString("bob"), "2", nil); err != nil {
		t.Fatalf("a seeded item is missing once the server is ready: %v", err)
	}

	in := filepath.Join(dir, "people.jsonl")
	lines := []string{`{"id":"a","team":"red","n":1}`, `{"id":"b","team":"blue","tags":["x","y"]}`, `{"id":"c","team":"red","nested":{"k":null}}`}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		out, err := cmd.Output()
		if err != nil {
			msg := ""
			if ee, ok := err.(*exec.ExitError); ok {
				msg = string(ee.Stderr)
			}
			t.Fatalf("orrery %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
		return string(out)
	}
	common := []string{"--endpoint", srv.endpoint, "--database", "people", "--container", "all", "--quiet"}
	run(append(append([]string{"import"}, common...), "--partition-key", "/team", "--resume", in)...)
	if _, err := os.Stat(in + ".import-state"); !os.IsNotExist(err) {
		t.Fatalf("a finished import left its state file (%v)", err)
	}
	got := strings.Split(strings.TrimSpace(run(append([]string{"export"}, common...)...)), "\n")
	slices.Sort(got)
	want := slices.Clone(lines)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("export gave\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
