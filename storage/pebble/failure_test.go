package pebble

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// wantUnavailable checks that err says the store has failed.
func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("%s on a failed store: %v, want storage.ErrUnavailable", what, err)
	}
}

// checkFailed checks that a failed store refuses everything at once and
// that Close returns instead of waiting for the writer Pebble parked.
func checkFailed(t *testing.T, s *Store) {
	ctx := t.Context()
	t.Helper()
	wantUnavailable(t, "Err", s.Err())
	_, err := s.Get(ctx, []byte("k"))
	wantUnavailable(t, "Get", err)
	_, err = s.NewIterator(ctx, nil, nil, false)
	wantUnavailable(t, "NewIterator", err)
	b := s.NewBatch()
	wantUnavailable(t, "Batch.Set", b.Set([]byte("k"), []byte("v")))
	wantUnavailable(t, "Batch.Commit", b.Commit(ctx))
	b.Close()
	wantUnavailable(t, "Close", s.Close())
}

// Removing the data directory under a store that keeps writing once ended
// in "fatal error: sync: unlock of unlocked mutex": Pebble cannot create its
// next write-ahead log, calls Fatalf with its mutex released, and the panic
// unwound through Pebble's deferred unlock. Now the store fails cleanly.
func TestRemovedDirectoryFailsTheStoreAtTheNextLog(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	// No directory check: this is the path through Pebble's Fatalf.
	s, err := Open(dir, Options{MemTableSize: 1 << 20, dirCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// Write until a memtable fills and Pebble needs a new log. Pebble's
	// goroutine that meets the failure is parked by Fatalf; the writer's
	// Commit returns the failure all the same.
	stopped := make(chan error, 1)
	go func() {
		value := []byte(strings.Repeat("v", 64<<10))
		for i := 0; ; i++ {
			b := s.NewBatch()
			if err := b.Set(fmt.Appendf(nil, "k%06d", i), value); err != nil {
				stopped <- err
				return
			}
			if err := b.Commit(ctx); err != nil {
				stopped <- err
				return
			}
			b.Close()
		}
	}()
	select {
	case err := <-stopped:
		wantUnavailable(t, "the writer's Commit", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the writer neither failed nor stopped after the directory was removed")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "pebble") {
		t.Errorf("failure %v, want Pebble's fatal error", err)
	}
	t.Logf("failed with: %v", s.Err())
	checkFailed(t, s)
}

// The directory check notices a removed directory before Pebble needs a new
// file: writes would otherwise go on into files nobody can reach.
func TestRemovedDirectoryIsNoticed(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{dirCheck: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the store did not notice its directory was removed")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("failure %v, want the removed directory named", err)
	}
	checkFailed(t, s)
}
