package pebble

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSlogLoggerLevels(t *testing.T) {
	tests := []struct {
		name      string
		log       func(l slogLogger)
		wantLevel string
	}{
		{"Infof logs at debug", func(l slogLogger) { l.Infof("flushed %d", 1) }, "level=DEBUG"},
		{"Errorf logs at error", func(l slogLogger) { l.Errorf("disk %s", "slow") }, "level=ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slogLogger{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			tt.log(l)
			out := buf.String()
			if !strings.Contains(out, tt.wantLevel) || !strings.Contains(out, "component=pebble") {
				t.Errorf("logged %q, want %s and component=pebble", out, tt.wantLevel)
			}
		})
	}
}

// Fatalf must neither return into Pebble nor panic through it (Pebble calls
// it with its mutex released): it logs, fails the store and parks.
func TestFatalfFailsTheStoreAndNeverReturns(t *testing.T) {
	var buf safeBuffer
	failed := make(chan error, 1)
	l := slogLogger{l: slog.New(slog.NewTextHandler(&buf, nil)), fail: func(err error) bool { failed <- err; return true }}
	returned := make(chan any, 1)
	go func() {
		defer func() { returned <- recover() }()
		l.Fatalf("broken %s", "wal")
	}()
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "broken wal") {
			t.Errorf("failed with %v", err)
		}
	case p := <-returned:
		t.Fatalf("Fatalf returned (recovered %v) without failing the store", p)
	}
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "broken wal") {
		t.Errorf("logged %q", out)
	}
	select {
	case p := <-returned:
		t.Fatalf("Fatalf returned into Pebble (recovered %v)", p)
	case <-time.After(100 * time.Millisecond):
	}
}

// Within Open nobody can be told the store failed, and parking would hang
// Open: Fatalf panics there.
func TestFatalfWithinOpenPanics(t *testing.T) {
	l := slogLogger{l: slog.New(slog.DiscardHandler), fail: func(error) bool { return false }}
	defer func() {
		if recover() == nil {
			t.Error("Fatalf returned")
		}
	}()
	l.Fatalf("broken %s", "manifest")
}

// safeBuffer is a bytes.Buffer for a logger on another goroutine.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRoutineMessagesAtDebug checks that Pebble's routine messages reach the
// store's logger at debug level only, so that a server logging at info is
// quiet.
func TestRoutineMessagesAtDebug(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		level     slog.Level
		wantHeard bool
	}{
		{slog.LevelDebug, true},
		{slog.LevelInfo, false},
	}
	for _, tt := range tests {
		t.Run(tt.level.String(), func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tt.level}))
			s, err := Open(t.TempDir(), Options{Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			b := s.NewBatch()
			if err := b.Set([]byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if heard := buf.Len() > 0; heard != tt.wantHeard {
				t.Errorf("logger at %v heard %q, want heard = %v", tt.level, buf.String(), tt.wantHeard)
			}
		})
	}
}
