package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/orrery-db/orrery/orrerytest"
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

// TestTransferCommandsSayWhatToDo: importing into a missing container
// suggests --partition-key, exporting one names it and leaves no file, -q
// is --quiet, repeated ids are named, a bad line is placed, and a seed with
// a misspelt key keeps the server from starting, naming the key.
func TestTransferCommandsSayWhatToDo(t *testing.T) {
	bin := buildBinary(t)
	s := orrerytest.Start(t)
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"id":"a","pk":"x"}`+"\n"+`{"id":"a","pk":"x","again":true}`+"\n"+`{"id":"b","pk":"x",}`+"\n"+`{"id":"c"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := []string{"--endpoint", s.Endpoint, "--database", "shop", "--container", "orders", "-q"}
	out, err := run(append(append([]string{"import"}, at...), in)...)
	if err == nil || !strings.Contains(out, "database shop does not exist") || !strings.Contains(out, "--partition-key") || strings.Contains(out, "RESPONSE") {
		t.Errorf("import into a missing database: %v\n%s", err, out)
	}
	if _, err := s.Client.CreateDatabase(context.Background(), azcosmos.DatabaseProperties{ID: "shop"}, nil); err != nil {
		t.Fatal(err)
	}
	out, err = run(append(append([]string{"import"}, at...), in)...)
	if err == nil || !strings.Contains(out, "container orders does not exist in database shop") || !strings.Contains(out, "--partition-key") {
		t.Errorf("import into a missing container: %v\n%s", err, out)
	}
	exported := filepath.Join(dir, "out.jsonl")
	out, err = run(append(append([]string{"export"}, at...), "-o", exported)...)
	if err == nil || !strings.Contains(out, "container orders does not exist") {
		t.Errorf("export of a missing container: %v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the failed export left files: %v", entries)
	}

	errs := filepath.Join(dir, "errors.jsonl")
	out, err = run(append(append([]string{"import", "--partition-key", "/pk", "--errors", errs}, at...), in)...)
	for _, want := range []string{
		"import: 2 written, 0 skipped, 2 failed",
		`1 records repeat the id and partition key of an earlier record: "a" ["x"] (records 1 and 2)`,
		"line 3, column 20: invalid character '}' looking for beginning of object key string",
		"orrery: 2 records failed (each in " + errs + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("import with a repeat and a bad line: %v\n%s\nlacks %q", err, out, want)
		}
	}
	out, err = run(append(append([]string{"import", "--duplicates", "last"}, at...), in)...)
	if !strings.Contains(out, "import: 3 written, 0 skipped, 1 failed") {
		t.Errorf("import keeping the last repeat: %v\n%s", err, out)
	}

	seed := filepath.Join(dir, "seed.json")
	if err := os.WriteFile(seed, []byte("{\"databases\": [{\"id\": \"shop\",\n  \"contaners\": []}]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--memory", "--addr", "127.0.0.1:0", "--seed", seed)
	done := make(chan []byte, 1)
	go func() { b, _ := cmd.CombinedOutput(); done <- b }()
	select {
	case b := <-done:
		if !strings.Contains(string(b), `line 2, column 3: databases[0] has an unknown key "contaners"; the keys it takes are containers, id, throughput`) {
			t.Errorf("serve with a misspelt seed:\n%s", b)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve with a misspelt seed did not stop")
	}
}

// TestTheImportBarCountsItems: the bar shows items, their count and rate,
// against the file's count of records once known.
func TestTheImportBarCountsItems(t *testing.T) {
	var out bytes.Buffer
	bar := itemBar(&out, -1, "importing")
	// The bar draws at most every 100 ms, what it was given the time before.
	for _, n := range []int64{40, 41, -300, 150, 151} {
		time.Sleep(120 * time.Millisecond)
		if n < 0 {
			bar.ChangeMax64(-n)
		} else {
			_ = bar.Set64(n)
		}
	}
	_ = bar.Finish()
	// Which of two counts set 120 ms apart a draw shows depends on the
	// spinner's ticker, which also draws (every 100 ms, throttled): on a
	// loaded machine the draw of 40 can be skipped. Any draw after a count
	// shows it or the next, and the second count is always drawn when the
	// first was not.
	for _, want := range []string{`importing \((40|41)/-, `, `\| \((150|151)/300, `, ` items/s\)`, `\(300/300, `} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("the bar drew %q, without %s", out.String(), want)
		}
	}
}
