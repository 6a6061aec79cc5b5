package main

import (
	"io"
	"sync"
	"time"
)

// logBatchDelay is how long a log line may wait for others to share its
// write; logBatchLimit how many bytes may wait at most (a writer past it
// writes them itself, waiting for the output as it would unbatched).
const (
	logBatchDelay = 2 * time.Millisecond
	logBatchLimit = 256 << 10
)

// batchWriter gathers the lines written to it and writes them to out in
// batches: the access log writes a line per request, and a write system
// call per line cost more than formatting it. A line waits at most
// logBatchDelay (on top of the write before it); the order of lines is
// kept. Close writes what is waiting.
type batchWriter struct {
	out io.Writer
	// outMu is held while a batch is taken and written, so that batches
	// reach out in the order they were taken.
	outMu sync.Mutex

	mu      sync.Mutex
	pending []byte
	spare   []byte
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

func newBatchWriter(out io.Writer) *batchWriter {
	w := &batchWriter{out: out, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// Write queues p (a whole line, as slog handlers write them).
func (w *batchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.outMu.Lock()
		defer w.outMu.Unlock()
		w.writeWaiting()
		return w.out.Write(p)
	}
	first := len(w.pending) == 0
	w.pending = append(w.pending, p...)
	full := len(w.pending) >= logBatchLimit
	if first && !full {
		// The flusher sleeps until a line comes; the batch's later
		// lines need not wake it.
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	if full {
		w.flush()
	}
	return len(p), nil
}

func (w *batchWriter) run() {
	defer close(w.done)
	for range w.wake {
		time.Sleep(logBatchDelay)
		w.flush()
	}
}

// flush writes the lines waiting.
func (w *batchWriter) flush() {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.writeWaiting()
}

// writeWaiting writes the lines waiting; the caller holds outMu.
func (w *batchWriter) writeWaiting() {
	w.mu.Lock()
	batch := w.pending
	w.pending, w.spare = w.spare[:0], nil
	w.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// A log that cannot be written has nowhere to report it.
	_, _ = w.out.Write(batch)
	w.mu.Lock()
	if w.spare == nil && cap(batch) <= 4*logBatchLimit {
		w.spare = batch[:0]
	}
	w.mu.Unlock()
}

// Close writes the lines waiting; later lines are written at once.
func (w *batchWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.wake)
	w.mu.Unlock()
	<-w.done
	w.flush()
	return nil
}
