package main

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/transfer"
)

// TestTransferProgressIsLoggedAtMostOncePerPeriod: the progress callback
// logs the counts, and never twice within its period.
func TestTransferProgressIsLoggedAtMostOncePerPeriod(t *testing.T) {
	var out bytes.Buffer
	every := &progressLog{log: slog.New(slog.NewTextHandler(&out, nil)), msg: "import progress", size: 1000}
	every.report(transfer.Progress{Written: 1, BytesRead: 10})
	every.report(transfer.Progress{Written: 2, Failed: 1, BytesRead: 20})
	if got := strings.Count(out.String(), `msg="import progress"`); got != 2 {
		t.Fatalf("with no period, %d lines for 2 reports:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `written=2 skipped=0 failed=1 "bytes read"=20 of=1000`) {
		t.Errorf("the second line lacks its counts:\n%s", out.String())
	}
	out.Reset()
	hourly := &progressLog{log: slog.New(slog.NewTextHandler(&out, nil)), msg: "import progress", every: time.Hour}
	for i := range 100 {
		hourly.report(transfer.Progress{Written: int64(i)})
	}
	if out.Len() != 0 {
		t.Errorf("within its period the log got:\n%s", out.String())
	}
}

// TestImportToAPipeLogsNoProgressBar: an import whose standard error is a
// pipe (a log collector) gets lines, not a bar's carriage returns.
func TestImportToAPipeLogsNoProgressBar(t *testing.T) {
	bin := buildBinary(t)
	srv := startChild(t, bin, "--memory", "--access-log=false")
	defer srv.kill()
	in := filepath.Join(t.TempDir(), "items.jsonl")
	if err := os.WriteFile(in, []byte(`{"id":"a","pk":"x"}`+"\n"+`{"id":"b","pk":"y"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "import", "--endpoint", srv.endpoint, "--database", "db", "--container", "c", "--partition-key", "/pk", in)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("import: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "\r") || !strings.Contains(stderr.String(), "import: 2 written") {
		t.Errorf("import to a pipe wrote %q; want the summary and no bar", stderr.String())
	}
}
