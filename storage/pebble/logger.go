package pebble

import (
	"fmt"
	"log/slog"
	"strings"
)

// slogLogger passes Pebble's log messages to a slog.Logger: informational
// ones at debug level, so that a store is quiet unless asked, errors at error
// level.
type slogLogger struct {
	l *slog.Logger
	// fail marks the store failed and reports whether it was open; Fatalf
	// calls it before it parks.
	fail func(error) bool
}

// Infof logs an informational message at debug level.
func (s slogLogger) Infof(format string, args ...any) {
	s.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

// Errorf logs an error.
func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by Pebble on an error it cannot recover from (a
// write-ahead log it cannot create or sync, a broken invariant). Pebble
// expects it never to return, and it must not panic either: Pebble calls it
// with its mutex released for I/O, so unwinding through Pebble's deferred
// unlocks dies with "sync: unlock of unlocked mutex", a fatal error no
// recover catches. So Fatalf logs, marks the store failed (every operation
// then fails with storage.ErrUnavailable and Failed is closed, so the owner
// can stop the process) and parks the calling goroutine for good. Within
// Open, where parking would hang the caller, it panics.
func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Error(msg, "component", "pebble", "fatal", true)
	// The failure names the first line; the log has the details and stack.
	first, _, _ := strings.Cut(msg, "\n")
	if !s.fail(fmt.Errorf("pebble: %s", first)) {
		// Within Open: parking would hang it; nobody holds the store yet.
		panic("storage/pebble: fatal: " + msg)
	}
	select {}
}
