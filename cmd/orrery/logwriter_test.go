package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is an output that counts the writes it gets.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestBatchedLogKeepsEveryLineInOrder: lines written by many goroutines all
// reach the output, each writer's in its order, whole, in fewer writes than
// lines, and Close writes what waits.
func TestBatchedLogKeepsEveryLineInOrder(t *testing.T) {
	out := &lockedBuffer{}
	w := newBatchWriter(out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(w, "w=%d i=%d %s\n", g, i, strings.Repeat("x", i%200))
			}
		}()
	}
	wg.Wait()
	w.Close()
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines out, %d written", len(got), writers*lines)
	}
	next := make([]int, writers)
	for _, l := range got {
		var g, i int
		var rest string
		if _, err := fmt.Sscanf(l, "w=%d i=%d %s", &g, &i, &rest); err != nil && i%200 != 0 {
			t.Fatalf("line %q is not one written: %v", l, err)
		}
		if i != next[g] || len(strings.TrimPrefix(l, fmt.Sprintf("w=%d i=%d ", g, i))) != i%200 {
			t.Fatalf("writer %d: line %q, want i=%d whole", g, l, next[g])
		}
		next[g]++
	}
	if out.writes >= writers*lines {
		t.Errorf("%d writes for %d lines: nothing batched", out.writes, writers*lines)
	}
	fmt.Fprintln(w, "after close")
	if !strings.HasSuffix(out.String(), "after close\n") {
		t.Errorf("a line written after Close did not reach the output")
	}
}

// TestBatchedLogLineIsWrittenWithoutMoreLines: a lone line reaches the output
// without Close and without other lines to push it.
func TestBatchedLogLineIsWrittenWithoutMoreLines(t *testing.T) {
	out := &lockedBuffer{}
	w := newBatchWriter(out)
	defer w.Close()
	fmt.Fprintln(w, "orrery ready")
	for deadline := time.Now().Add(10 * time.Second); out.String() == ""; {
		if time.Now().After(deadline) {
			t.Fatal("a lone line was not written within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if out.String() != "orrery ready\n" {
		t.Errorf("output %q", out.String())
	}
}
