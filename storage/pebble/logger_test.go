package pebble

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestSlogLoggerLevels(t *testing.T) {
	tests := []struct {
		name      string
		log       func(l slogLogger)
		wantLevel string
		wantPanic bool
	}{
		{"Infof logs at debug", func(l slogLogger) { l.Infof("flushed %d", 1) }, "level=DEBUG", false},
		{"Errorf logs at error", func(l slogLogger) { l.Errorf("disk %s", "slow") }, "level=ERROR", false},
		{"Fatalf logs at error and panics", func(l slogLogger) { l.Fatalf("broken %s", "wal") }, "level=ERROR", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slogLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				tt.log(l)
				return false
			}()
			if panicked != tt.wantPanic {
				t.Errorf("panicked = %v, want %v", panicked, tt.wantPanic)
			}
			out := buf.String()
			if !strings.Contains(out, tt.wantLevel) || !strings.Contains(out, "component=pebble") {
				t.Errorf("logged %q, want %s and component=pebble", out, tt.wantLevel)
			}
		})
	}
}

// TestRoutineMessagesAtDebug checks that Pebble's routine messages reach the
// store's logger at debug level only, so that a server logging at info is
// quiet.
func TestRoutineMessagesAtDebug(t *testing.T) {
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
			if err := b.Commit(); err != nil {
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
