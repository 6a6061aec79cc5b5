package script

import (
	"context"
	"runtime"
	"time"
)

// Limits bound every run of a script. Zero fields take the defaults.
type Limits struct {
	// Timeout is the time budget of one run, engine calls included
	// (default 5 s). A run still going at the end is stopped with 408.
	Timeout time.Duration
	// AcceptFraction is the part of Timeout after which collection calls
	// are no longer accepted (they return false and are not queued), so that
	// a script can stop and hand back a continuation (default 0.85).
	AcceptFraction float64
	// MaxMemory is how far the heap may grow during a run (default 128 MiB).
	// It also bounds the array and string sizes that single built-in calls
	// may produce (MaxMemory/16 elements, MaxMemory/2 characters).
	MaxMemory int64
	// MaxTotalMemory is how far the heap may grow while scripts run, all the
	// runs in progress together (default: MaxMemory). Past it, the runs in
	// progress longest stop with the memory-limit error, one after another
	// until the heap is back within it (see memoryBudget).
	MaxTotalMemory int64
	// MaxCallDepth is the deepest JavaScript call stack allowed (default 1000).
	MaxCallDepth int
	// MaxResponseBytes bounds the serialized response body of a stored
	// procedure (default 2 MiB); beyond it the script gets 413.
	MaxResponseBytes int
	// PoolSize is how many idle runtimes are kept for reuse
	// (default 2 × GOMAXPROCS).
	PoolSize int
	// ProgramCacheSize is how many compiled scripts are kept (default 1024).
	ProgramCacheSize int
}

// DefaultLimits are the limits used for zero fields.
var DefaultLimits = Limits{
	Timeout:          5 * time.Second,
	AcceptFraction:   0.85,
	MaxMemory:        128 << 20,
	MaxCallDepth:     1000,
	MaxResponseBytes: 2 << 20,
	ProgramCacheSize: 1024,
}

// memoryPollInterval is how often a running script's heap growth is checked.
const memoryPollInterval = 2 * time.Millisecond

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.AcceptFraction <= 0 || l.AcceptFraction > 1 {
		l.AcceptFraction = d.AcceptFraction
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = d.MaxMemory
	}
	if l.MaxTotalMemory <= 0 {
		l.MaxTotalMemory = l.MaxMemory
	}
	if l.MaxCallDepth <= 0 {
		l.MaxCallDepth = d.MaxCallDepth
	}
	if l.MaxResponseBytes <= 0 {
		l.MaxResponseBytes = d.MaxResponseBytes
	}
	if l.PoolSize <= 0 {
		l.PoolSize = 2 * runtime.GOMAXPROCS(0)
	}
	if l.ProgramCacheSize <= 0 {
		l.ProgramCacheSize = d.ProgramCacheSize
	}
	return l
}

func (l Limits) maxArrayLength() int64  { return l.MaxMemory / 16 }
func (l Limits) maxStringLength() int64 { return l.MaxMemory / 2 }

type quantumKey struct{}

// WithQuantum returns a context under which a script run is stopped with 429
// once it has run for d (less than its time budget): the engine runs
// scripts in a slot kept for short ones this way.
func WithQuantum(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, quantumKey{}, d)
}
