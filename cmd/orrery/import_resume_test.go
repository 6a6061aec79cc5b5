package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orrery-db/orrery/orrerytest"
	"github.com/orrery-db/orrery/transfer"
)

var summaryLine = regexp.MustCompile(`import: (\d+) written, (\d+) skipped, (\d+) failed`)

// TestImportResumedAfterSIGINTOrSIGKILLIsExact runs `orrery import --mode
// create --resume` as a process, interrupts it at random moments with
// SIGINT (it finishes its writes in flight and records where it stopped)
// or SIGKILL (it records nothing more), and runs it again until it
// finishes: no run reports a failure (a 409 on the import's own writes),
// the last one counts over all the runs exactly the file's records
// written, and the container holds exactly the file's items.
func TestImportResumedAfterSIGINTOrSIGKILLIsExact(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 4_000
	}
	bin := buildBinary(t)
	s := orrerytest.Start(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	lines := make([]string, n)
	for i := range lines {
		switch {
		case i%97 == 0: // no partition key property: the undefined key
			lines[i] = fmt.Sprintf(`{"id":"item-%d","n":%d}`, i, i)
		default:
			lines[i] = fmt.Sprintf(`{"id":"item-%d","pk":"p%d","n":%d,"pad":%q}`, i, r.IntN(40), i, strings.Repeat("x", r.IntN(300)))
		}
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	// An import run whole gives the span the interruptions fall in.
	calibrate := filepath.Join(dir, "calibrate.jsonl")
	if err := os.WriteFile(calibrate, data, 0o644); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if out, err := exec.Command(bin, "import", "--endpoint", s.Endpoint, "--database", "db", "--container", "calibrate",
		"--partition-key", "/pk", "--mode", "create", "--concurrency", "8", "-q", calibrate).CombinedOutput(); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	span := time.Since(begin)
	t.Logf("a whole import takes %s", span)
	for round, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL, syscall.SIGINT, syscall.SIGKILL, syscall.SIGKILL, syscall.SIGINT} {
		in := filepath.Join(dir, fmt.Sprintf("round%d.jsonl", round))
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("round%d", round)
		args := []string{"import", "--endpoint", s.Endpoint, "--database", "db", "--container", name, "--partition-key", "/pk",
			"--mode", "create", "--resume", "--concurrency", "8", "-q", in}
		// finished: a run's output says the import is done, every record
		// written. The counts over all the runs are on a line of their own
		// when an earlier run finished anything.
		finished := func(out string) bool {
			total := fmt.Sprintf("with the earlier runs: %d written, 0 skipped, 0 failed", n)
			return strings.Contains(out, total) ||
				strings.Contains(out, fmt.Sprintf("import: %d written, 0 skipped, 0 failed", n)) && !strings.Contains(out, "earlier runs")
		}
		var final string
		interrupted := 0
		for run := 0; ; run++ {
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if run < 3 {
				delay := time.Duration(r.Int64N(int64(span)))
				timer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(sig) })
				defer timer.Stop()
			}
			err := cmd.Wait()
			out := stderr.String()
			for _, m := range summaryLine.FindAllStringSubmatch(out, -1) {
				if m[3] != "0" {
					t.Fatalf("round %d run %d (%s): failures reported:\n%s", round, run, sig, out)
				}
			}
			if err == nil {
				final = out
				break
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			killed := ee.ProcessState.Sys().(syscall.WaitStatus).Signaled()
			if _, err := os.Stat(in + ".import-state"); killed && os.IsNotExist(err) && finished(out) {
				// Killed in the moment after it finished: its summary
				// printed and its state file removed, the process not
				// yet gone. The import is done, as if it had exited; run
				// again, it would start over and find every record there.
				final = out
				break
			}
			if !killed && !strings.Contains(out, "run the same command again to resume") {
				t.Fatalf("round %d run %d: %v\n%s", round, run, err, out)
			}
			interrupted++
			t.Logf("round %d run %d: %s after %s", round, run, sig, strings.TrimSpace(out))
		}
		if !finished(final) {
			t.Fatalf("round %d: the last run says\n%s\nwant %d written over the runs, none failed", round, final, n)
		}
		t.Logf("round %d: %d interruptions, then %s", round, interrupted, strings.TrimSpace(final))
		if _, err := os.Stat(in + ".import-state"); !os.IsNotExist(err) {
			t.Fatalf("round %d: the finished import left its state file (%v)", round, err)
		}
		c, _ := s.Client.NewContainer("db", name)
		var buf bytes.Buffer
		if _, err := transfer.Export(context.Background(), c, &buf, transfer.ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(got) != n {
			t.Fatalf("round %d: the container holds %d items, want %d", round, len(got), n)
		}
		for _, g := range got {
			var item map[string]any
			if err := json.Unmarshal([]byte(g), &item); err != nil {
				t.Fatal(err)
			}
			var i int
			fmt.Sscanf(item["id"].(string), "item-%d", &i)
			var want map[string]any
			_ = json.Unmarshal([]byte(lines[i]), &want)
			if !reflect.DeepEqual(item, want) {
				t.Fatalf("round %d: the container holds %s, the file %s", round, g, lines[i])
			}
		}
	}
}

// TestAnImportInterruptedBeforeItsFirstWriteSaysRunAgain interrupts
// `orrery import --partition-key` while it is still making the database
// ready (the endpoint accepts the connection and never answers): the import
// exits on its own, not by the signal, and says to run the same command
// again, the words of any other interruption, not a canceled request.
func TestAnImportInterruptedBeforeItsFirstWriteSaysRunAgain(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"id":"a","pk":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		resume bool
		want   string
	}{
		{true, "interrupted before this run wrote any record: run the same command again to resume (" + in + ".import-state)"},
		{false, "interrupted before this run wrote any record: run the same command again to import the file"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan net.Conn, 16)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					close(accepted)
					return
				}
				accepted <- c // held open, never answered
			}
		}()
		args := []string{"import", "--endpoint", "https://" + ln.Addr().String() + "/", "--database", "db", "--container", "c",
			"--partition-key", "/pk", "-q"}
		if tc.resume {
			args = append(args, "--resume")
		}
		cmd := exec.Command(bin, append(args, in)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		conn := <-accepted // the import is waiting on its first request
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		ln.Close()
		conn.Close()
		for c := range accepted {
			c.Close()
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			t.Fatalf("resume %v: the import ended with %v, want an exit of its own\n%s", tc.resume, err, stderr.String())
		}
		if out := stderr.String(); !strings.Contains(out, tc.want) || strings.Contains(out, "context canceled") {
			t.Errorf("resume %v: the import says\n%s\nwant %q", tc.resume, out, tc.want)
		}
		if _, err := os.Stat(in + ".import-state"); !os.IsNotExist(err) {
			t.Errorf("resume %v: an import that wrote nothing left a state file (%v)", tc.resume, err)
		}
	}
}
