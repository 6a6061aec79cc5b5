package engine

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/orrery-db/orrery/engine/script"
)

// The engine's counters that Stats reads: script runs by kind and outcome
// (scriptexec.go counts them), and each container's change-feed read
// position (feed.go notes it).

// Kinds of script runs in ScriptRunCount.
const (
	ScriptKindProcedure = "sproc"
	ScriptKindTrigger   = "trigger"
	ScriptKindUDF       = "udf"
)

// Outcomes of script runs in ScriptRunCount.
const (
	ScriptOutcomeOK        = "ok"        // returned
	ScriptOutcomeError     = "error"     // threw, or an operation it made failed it
	ScriptOutcomeTimeout   = "timeout"   // stopped at its time budget
	ScriptOutcomeMemory    = "memory"    // stopped at its memory limit or the scripts' total
	ScriptOutcomeQuantum   = "quantum"   // stopped for outrunning a short slot (429, retried)
	ScriptOutcomeCancelled = "cancelled" // the request went away
	ScriptOutcomeRejected  = "rejected"  // no slot freed up within its budget (429); never ran
)

var (
	scriptKinds    = [...]string{ScriptKindProcedure, ScriptKindTrigger, ScriptKindUDF}
	scriptOutcomes = [...]string{ScriptOutcomeOK, ScriptOutcomeError, ScriptOutcomeTimeout,
		ScriptOutcomeMemory, ScriptOutcomeQuantum, ScriptOutcomeCancelled, ScriptOutcomeRejected}
)

const (
	kindProcedure = iota
	kindTrigger
	kindUDF
)

// scriptCounters count script runs by kind and outcome.
type scriptCounters [len(scriptKinds)][len(scriptOutcomes)]atomic.Uint64

// count records a run of kind that ended with err, as the script package
// returned it (before scriptError).
func (s *scriptCounters) count(kind int, err error) {
	s[kind][outcomeOf(err)].Add(1)
}

// refused records a run of kind that scriptHost.admit turned away with err: no
// slot freed up (429), or the request went away while it waited.
func (s *scriptCounters) refused(kind int, err error) {
	switch StatusOf(err) {
	case 429:
		s[kind][6].Add(1)
	case 408:
		s[kind][5].Add(1)
	}
}

// refusedOutcome names the outcome of a run scriptHost.admit refused with err.
func refusedOutcome(err error) string {
	if StatusOf(err) == 408 {
		return ScriptOutcomeCancelled
	}
	return ScriptOutcomeRejected
}

// outcomeOf classifies how a run ended, as an index into scriptOutcomes.
func outcomeOf(err error) int {
	if err == nil {
		return 0
	}
	var se *script.Error
	if errors.As(err, &se) {
		switch se.Stopped {
		case script.StopTimeout:
			return 2
		case script.StopMemory:
			return 3
		case script.StopQuantum:
			return 4
		case script.StopCancelled:
			return 5
		}
	}
	return 1
}

// feedReads holds, by container RID, the furthest position a change-feed
// read of the container answered, for its lag in Stats.
type feedReads struct{ sync.Map }

// note records that a change-feed read of c was answered up to position.
func (f *feedReads) note(c *Container, position uint64) {
	p := f.position(c)
	for {
		old := p.Load()
		if old >= position || p.CompareAndSwap(old, position) {
			return
		}
	}
}

// position returns c's change-feed read position, kept by RID so that it
// outlives a replace of the container.
func (f *feedReads) position(c *Container) *atomic.Uint64 {
	if p := c.feedRead.Load(); p != nil {
		return p
	}
	v, _ := f.LoadOrStore(string(c.rid), new(atomic.Uint64))
	p := v.(*atomic.Uint64)
	c.feedRead.Store(p)
	return p
}
