package pebble

import (
	"fmt"
	"log/slog"
)

// slogLogger passes Pebble's log messages to a slog.Logger: informational
// ones at debug level, so that a store is quiet unless asked, errors at error
// level.
type slogLogger struct {
	l *slog.Logger
}

// Infof logs an informational message at debug level.
func (s slogLogger) Infof(format string, args ...any) {
	s.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

// Errorf logs an error.
func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf logs an error Pebble cannot recover from (a failed write-ahead log
// sync, a broken invariant) and panics: continuing could acknowledge writes
// that are not durable.
func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Error(msg, "component", "pebble", "fatal", true)
	panic("storage/pebble: fatal: " + msg)
}
