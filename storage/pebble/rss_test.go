package pebble

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssChildEnv tells a re-executed test binary to report its resident memory,
// with an opened store when it names a directory, without one when it is "-".
const rssChildEnv = "ORRERY_PEBBLE_RSS_CHILD_DIR"

// idleStoreRSSLimit bounds what an opened, idle store may add to a process's
// resident memory: the whole server must idle under 40 MB.
const idleStoreRSSLimit = 8 << 20

// TestIdleRSS measures, in fresh processes, the resident memory an opened
// empty store adds to a process.
func TestIdleRSS(t *testing.T) {
	ctx := t.Context()
	if dir := os.Getenv(rssChildEnv); dir != "" {
		rssChild(ctx, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	base := childRSS(t, "-")
	opened := childRSS(t, t.TempDir())
	t.Logf("idle RSS: %d KiB without a store, %d KiB with an opened empty store (+%d KiB)",
		base>>10, opened>>10, (opened-base)>>10)
	if opened-base > idleStoreRSSLimit {
		t.Errorf("an idle store adds %d KiB of resident memory, want at most %d KiB", (opened-base)>>10, idleStoreRSSLimit>>10)
	}
}

// childRSS runs the test binary in rss mode and returns the RSS it reports.
func childRSS(t *testing.T, dir string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleRSS$", "-test.count=1")
	cmd.Env = append(os.Environ(), rssChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rss child: %v\n%s", err, stderr.String())
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rss "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("rss child printed %q", line)
			}
			return n
		}
	}
	t.Fatalf("rss child printed no figure:\n%s\n%s", out, stderr.String())
	return 0
}

// rssChild opens a store in dir (unless dir is "-"), commits one batch, lets
// the process settle and prints its resident set size in bytes.
func rssChild(ctx context.Context, dir string) {
	if dir != "-" {
		s, err := Open(dir, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer s.Close()
		b := s.NewBatch()
		if err := b.Set([]byte("k"), []byte("v")); err == nil {
			err = b.Commit(ctx)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b.Close()
	}
	time.Sleep(300 * time.Millisecond)
	runtime.GC()
	rss, err := residentBytes()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("rss %d\n", rss)
}

// residentBytes reads VmRSS from /proc/self/status.
func residentBytes() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}
