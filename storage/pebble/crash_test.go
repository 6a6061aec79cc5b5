package pebble

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// crashChildEnv names the directory a re-executed test binary commits into
// before its parent kills it.
const crashChildEnv = "ORRERY_PEBBLE_CRASH_CHILD_DIR"

// crashParts is how many keys each batch of the crash test writes.
const crashParts = 4

// TestCrashDurability kills a committing process with SIGKILL and checks,
// after reopening, that every acknowledged batch is there and that no batch is
// there in part. The second round's process commits with a least interval
// between syncs (Options.WALMinSyncInterval).
func TestCrashDurability(t *testing.T) {
	ctx := t.Context()
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(ctx, dir, os.Getenv(crashChildEnv+"_ROUND"))
		return
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	dir := t.TempDir()
	for round := range 3 {
		acked := runCrashChild(t, dir, fmt.Sprint(round))
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("round %d: reopening after the kill: %v", round, err)
		}
		for _, id := range acked {
			for p := range crashParts {
				if _, err := s.Get(ctx, crashKey(id, p)); err != nil {
					t.Errorf("round %d: acknowledged key %s: %v", round, crashKey(id, p), err)
				}
			}
		}
		parts := map[string]int{}
		it, err := s.NewIterator(ctx, []byte("b/"), storage.PrefixEnd([]byte("b/")), false)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			id, _, _ := strings.Cut(strings.TrimPrefix(string(it.Key()), "b/"), "/")
			if string(it.Value()) != id {
				t.Errorf("key %q holds %q", it.Key(), it.Value())
			}
			parts[id]++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		for id, n := range parts {
			if n != crashParts {
				t.Errorf("round %d: batch %s is there in part: %d of %d keys", round, id, n, crashParts)
			}
		}
		t.Logf("round %d: %d batches acknowledged before SIGKILL, %d found after reopening", round, len(acked), len(parts))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func crashKey(id string, part int) []byte {
	return fmt.Appendf(nil, "b/%s/%d", id, part)
}

// runCrashChild starts a child that commits into dir, kills it once it has
// acknowledged some batches, and returns the ids it acknowledged.
func runCrashChild(t *testing.T, dir, round string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashChildEnv+"_ROUND="+round)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	killed := false
	deadline := time.AfterFunc(5*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for lines.Scan() {
		id, ok := strings.CutPrefix(lines.Text(), "ack ")
		if !ok {
			continue
		}
		acked = append(acked, id)
		if len(acked) == 500 && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.Wait()
	if !killed {
		t.Fatalf("round %s: the child acknowledged only %d batches before it stopped; stderr:\n%s", round, len(acked), stderr.String())
	}
	return acked
}

// crashChild commits batches from several goroutines and prints the id of
// each one after its Commit returns, until it is killed (or gives up after
// ten seconds, should its parent be gone).
func crashChild(ctx context.Context, dir, round string) {
	var opts Options
	if round == "1" {
		opts.WALMinSyncInterval = 2 * time.Millisecond
	}
	s, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var out sync.Mutex
	stop := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				id := fmt.Sprintf("%s-%d-%d", round, w, i)
				b := s.NewBatch()
				for p := range crashParts {
					if err := b.Set(crashKey(id, p), []byte(id)); err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
				}
				if err := b.Commit(ctx); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				b.Close()
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", id)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(2)
}
