package script

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// kind is what a run executes.
type kind int

const (
	kindStoredProcedure kind = iota
	kindPreTrigger
	kindPostTrigger
	kindUDF
)

// message is a request or response: its body, parsed on first use, and its
// properties (getValue/setValue).
type message struct {
	raw    json.RawMessage
	val    goja.Value // nil until parsed or set
	set    bool       // setBody or appendBody was called
	props  map[string]string
	exists bool
}

// run is the state of one execution on one vm.
type run struct {
	kind     kind
	ctx      context.Context
	coll     Collection
	limits   *Limits
	start    time.Time
	acceptBy time.Time // collection calls after this are refused
	queue    []func() error
	logging  bool
	logText  strings.Builder
	req      message
	resp     message
	opType   string

	mu      sync.Mutex
	done    bool
	stopped *limitError // why the run was interrupted
	timer   *time.Timer
	quantum *time.Timer // nil unless the context set one (WithQuantum)
	poller  *time.Timer
	unwatch func() bool

	memMu     sync.Mutex // over mem: the tick and the natives check it
	mem       memoryWatch
	budget    *memoryBudget // shared by the runs in progress
	madeChars int64         // string characters made by the natives since their last check
}

// arm starts the time budget, the memory watchdog and the cancellation hook.
func (r *run) arm(v *vm) {
	r.start = time.Now()
	r.acceptBy = r.start.Add(time.Duration(float64(r.limits.Timeout) * r.limits.AcceptFraction))
	budget := r.limits.Timeout
	r.timer = time.AfterFunc(budget, func() { r.stop(v, newTimeoutError(budget)) })
	if q, ok := r.ctx.Value(quantumKey{}).(time.Duration); ok && q > 0 && q < budget {
		r.quantum = time.AfterFunc(q, func() { r.stop(v, newQuantumError(q)) })
	}
	// Assign the poller before it can first fire: it re-arms itself.
	r.poller = time.AfterFunc(time.Hour, func() { r.pollMemory(v) })
	r.poller.Reset(memoryPollInterval)
	if r.ctx.Done() != nil {
		r.unwatch = context.AfterFunc(r.ctx, func() { r.stop(v, r.contextEnded()) })
	}
}

// contextEnded is the limit reached when the run's context ends. A deadline
// is the time budget counted from admission (the wait for a slot included);
// anything else is the caller leaving.
func (r *run) contextEnded() *limitError {
	cause := StopCancelled
	if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
		cause = StopTimeout
	}
	return &limitError{StatusRequestTimeout, "The request was cancelled: " + context.Cause(r.ctx).Error(), cause}
}

// disarm ends the run's watchers; after it returns no interrupt can reach v.
func (r *run) disarm() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.timer.Stop()
	if r.quantum != nil {
		r.quantum.Stop()
	}
	r.poller.Stop()
	if r.unwatch != nil {
		r.unwatch()
	}
	r.memMu.Lock()
	r.mem.ended = true
	r.budget.leave(r)
	r.memMu.Unlock()
}

// stop interrupts the script for reason, once.
func (r *run) stop(v *vm, reason *limitError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || r.stopped != nil {
		return
	}
	r.stopped = reason
	v.rt.Interrupt(reason)
}

// stoppedBy returns why the run was interrupted, or nil.
func (r *run) stoppedBy() *limitError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

func (r *run) isDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done || r.stopped != nil
}

// accepting reports whether a collection call may still be queued.
func (r *run) accepting() bool {
	return time.Now().Before(r.acceptBy)
}

// overBudget reports whether the time budget is spent (checked between queued
// operations, where the runtime is not running and cannot see Interrupt).
func (r *run) overBudget() bool {
	return time.Since(r.start) >= r.limits.Timeout
}

// drain runs queued operations and their callbacks, in order, until none is
// left; callbacks may queue more.
func (r *run) drain(v *vm) error {
	for i := 0; i < len(r.queue); i++ {
		if r.overBudget() {
			reason := newTimeoutError(r.limits.Timeout)
			r.stop(v, reason)
			return reason
		}
		if reason := r.stoppedBy(); reason != nil {
			return reason
		}
		job := r.queue[i]
		r.queue[i] = nil
		if err := job(); err != nil {
			return err
		}
	}
	r.queue = r.queue[:0]
	return nil
}

// thrown is an exception raised from an operation queued without a callback.
type thrown struct{ val goja.Value }

func (t *thrown) Error() string { return "uncaught exception from a collection operation" }

// failureOf maps what ended a run to the error the engine returns.
func (r *run) failureOf(v *vm, err error) *Error {
	r.mu.Lock()
	stopped := r.stopped
	r.mu.Unlock()
	if stopped != nil {
		return stopped.failure()
	}
	// The context can end before its watcher has stopped the script: a
	// storage call under it fails at once, and the script may end on that
	// failure first. The context's end is the answer then too, not the
	// failure it caused.
	if r.ctx.Err() != nil {
		return r.contextEnded().failure()
	}
	var se *Error
	var ex *goja.Exception
	var th *thrown
	var so *goja.StackOverflowError
	var ie *goja.InterruptedError
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &th):
		return r.exceptionFailure(v, th.val)
	case errors.As(err, &ex):
		return r.exceptionFailure(v, ex.Value())
	case errors.As(err, &so):
		return scriptFailure(StatusBadRequest, "RangeError: Maximum call stack size exceeded")
	case errors.As(err, &ie):
		return failure(StatusRequestTimeout, "The script was interrupted.")
	}
	return failure(StatusInternalServerError, "The script runtime failed: "+err.Error())
}

// exceptionFailure maps an exception value: a known HTTP status in its number
// is kept, anything else answers 400. Describing it runs JavaScript, which a
// limit reached meanwhile interrupts: that limit is then the answer.
func (r *run) exceptionFailure(v *vm, val goja.Value) *Error {
	status, text := StatusBadRequest, "an exception"
	res, err := v.describe(goja.Undefined(), val)
	if err != nil {
		r.mu.Lock()
		stopped := r.stopped
		r.mu.Unlock()
		if stopped != nil {
			return stopped.failure()
		}
	} else if arr, ok := res.(*goja.Object); ok {
		if n := int(arr.Get("0").ToInteger()); knownStatuses[n] {
			status = n
		}
		text = arr.Get("1").String()
	}
	return scriptFailure(status, text)
}
