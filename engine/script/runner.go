package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// Runner runs scripts: it owns the compiled-program cache and the pool of
// runtimes. It is safe for concurrent use; each run takes a runtime of its own.
type Runner struct {
	limits   Limits
	programs *programCache
	pool     *pool
	memory   *memoryBudget
}

// NewRunner returns a Runner with the given limits (zero fields take the
// defaults of DefaultLimits).
func NewRunner(l Limits) *Runner {
	l = l.withDefaults()
	rn := &Runner{limits: l, programs: newProgramCache(l.ProgramCacheSize), pool: newPool(l), memory: newMemoryBudget()}
	rn.pool.refill() // so that the first run need not wait for a runtime
	return rn
}

// Limits returns the limits the runner applies.
func (rn *Runner) Limits() Limits { return rn.limits }

// ExecuteOptions are the options of a stored procedure execution.
type ExecuteOptions struct {
	// EnableLogging keeps the console.log output (the request header
	// x-ms-documentdb-script-enable-logging).
	EnableLogging bool
}

// Result is what a stored procedure execution returns.
type Result struct {
	// Body is the JSON of what the script set with getResponse().setBody,
	// or nil when it set nothing (or undefined).
	Body json.RawMessage
	// Log is the console.log output, one line per call, when logging was
	// enabled.
	Log string
}

// Request is the item write a trigger runs for.
type Request struct {
	// OperationType is "Create", "Replace", "Upsert" or "Delete".
	OperationType string
	// Body is the document being written (JSON).
	Body json.RawMessage
	// Headers are the request properties getValue reads and setValue may
	// change (it may not add new ones). Changes are not reported back.
	Headers map[string]string
}

// Execute runs a stored procedure with the given arguments in coll. On error
// (an *Error with the status to answer) the caller must discard every write
// the script made.
func (rn *Runner) Execute(ctx context.Context, sp StoredProcedure, args []json.RawMessage, coll Collection, opts ExecuteOptions) (Result, error) {
	r := &run{kind: kindStoredProcedure, coll: coll, logging: opts.EnableLogging}
	r.req = message{raw: joinDocuments(args), props: map[string]string{}, exists: true}
	r.resp = message{props: map[string]string{}, exists: true}
	var res Result
	err := rn.do(ctx, sp, r, args, func(v *vm, _ goja.Value) error {
		body, err := rn.serialize(v, r.resp.val)
		res.Body = body
		return err
	})
	if r.logging {
		res.Log = strings.TrimSuffix(r.logText.String(), "\n")
	}
	if err != nil {
		return res, err
	}
	return res, nil
}

// RunPreTrigger runs a pre-trigger for req and returns the request body the
// write must use: req.Body unless the trigger called getRequest().setBody.
// coll may be nil when the trigger is not to reach the collection.
func (rn *Runner) RunPreTrigger(ctx context.Context, trig Trigger, req Request, coll Collection) (json.RawMessage, error) {
	r := &run{kind: kindPreTrigger, coll: coll, opType: req.OperationType}
	r.req = message{raw: req.Body, props: copyProps(req.Headers), exists: true}
	body := req.Body
	err := rn.do(ctx, trig, r, nil, func(v *vm, _ goja.Value) error {
		if !r.req.set {
			return nil
		}
		b, err := rn.serialize(v, r.req.val)
		if err != nil {
			return err
		}
		if b == nil {
			return failure(StatusBadRequest, "The pre-trigger set the request body to undefined.")
		}
		body = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return body, nil
}

// RunPostTrigger runs a post-trigger after the write of req answered with
// responseBody, in the write's transaction, and returns the response body
// (changed if the trigger called getResponse().setBody). On error the caller
// must discard the write.
func (rn *Runner) RunPostTrigger(ctx context.Context, trig Trigger, req Request, responseBody json.RawMessage, coll Collection) (json.RawMessage, error) {
	r := &run{kind: kindPostTrigger, coll: coll, opType: req.OperationType}
	r.req = message{raw: req.Body, props: copyProps(req.Headers), exists: true}
	r.resp = message{raw: responseBody, props: map[string]string{}, exists: true}
	body := responseBody
	err := rn.do(ctx, trig, r, nil, func(v *vm, _ goja.Value) error {
		if !r.resp.set {
			return nil
		}
		b, err := rn.serialize(v, r.resp.val)
		body = b
		return err
	})
	if err != nil {
		return nil, err
	}
	return body, nil
}

// CallUDF calls a user-defined function with JSON arguments and returns its
// result as JSON, or nil when it returned undefined. To call UDFs once per
// row of a query, use a UDFSession.
func (rn *Runner) CallUDF(ctx context.Context, udf UDF, args []json.RawMessage) (json.RawMessage, error) {
	s, err := rn.NewUDFSession(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Call(udf, args)
}

// serialize turns a body value into JSON within the response size limit.
func (rn *Runner) serialize(v *vm, val goja.Value) (json.RawMessage, error) {
	text, ok, err := v.toJSON(val)
	if err != nil || !ok {
		return nil, err
	}
	if len(text) > rn.limits.MaxResponseBytes {
		return nil, failure(StatusRequestEntityTooLarge, responseTooLarge)
	}
	return json.RawMessage(text), nil
}

// do runs script s as run r: it calls the entry function with args, drains
// the queued operations, and calls finish while the limits still apply.
func (rn *Runner) do(ctx context.Context, s Script, r *run, args []json.RawMessage, finish func(*vm, goja.Value) error) (out error) {
	prog, err := rn.programs.get(s)
	if err != nil {
		return err
	}
	v, err := rn.acquire(ctx, r)
	if err != nil {
		return err
	}
	clean := false
	defer func() {
		if p := recover(); p != nil {
			out, clean = panicFailure(p), false
			// An interrupt that escaped as a panic is still the limit
			// that caused it, never a runtime failure.
			if ie, ok := p.(*goja.InterruptedError); ok {
				out = r.failureOf(v, ie)
			}
		}
		rn.release(v, r, clean)
	}()
	if err := rn.call(v, r, prog, args, finish); err != nil {
		clean = recoverable(err)
		return r.failureOf(v, err)
	}
	clean = true
	return nil
}

// acquire takes a runtime for run r and starts r's limits.
func (rn *Runner) acquire(ctx context.Context, r *run) (*vm, error) {
	v, err := rn.pool.get()
	if err != nil {
		return nil, failure(StatusInternalServerError, "The script runtime could not be created: "+err.Error())
	}
	r.ctx, r.limits, r.budget = ctx, &rn.limits, rn.memory
	v.begin(r)
	r.arm(v)
	return v, nil
}

// release ends run r and returns its runtime to the pool when clean (the run
// ended normally or with a plain script exception) and nothing else argues
// against reuse.
func (rn *Runner) release(v *vm, r *run, clean bool) {
	r.disarm()
	// A long run may have left large values in the runtime's stack slots;
	// making a new runtime costs less than keeping them alive.
	clean = clean && r.stopped == nil && !v.tainted && time.Since(r.start) < retireAfter
	v.end()
	if clean {
		rn.pool.put(v)
	} else {
		rn.pool.refill()
	}
}

// recoverable reports whether an error leaves the runtime sound: plain
// script exceptions do; interrupts and stack overflows retire it.
func recoverable(err error) bool {
	var se *Error
	var ex *goja.Exception
	var th *thrown
	return errors.As(err, &se) || errors.As(err, &ex) || errors.As(err, &th)
}

func panicFailure(p any) *Error {
	return failure(StatusInternalServerError, fmt.Sprintf("The script runtime failed: %v", p))
}

func (rn *Runner) call(v *vm, r *run, prog *goja.Program, args []json.RawMessage, finish func(*vm, goja.Value) error) error {
	fv, err := v.rt.RunProgram(prog)
	if err != nil {
		return err
	}
	fn, ok := goja.AssertFunction(fv)
	if !ok {
		return failure(StatusBadRequest, "The script body must be a JavaScript function.")
	}
	jsArgs := make([]goja.Value, len(args))
	for i, a := range args {
		if jsArgs[i], err = v.parseJSON(a); err != nil {
			return failure(StatusBadRequest, fmt.Sprintf("Argument %d is not valid JSON.", i))
		}
	}
	ret, err := fn(goja.Undefined(), jsArgs...)
	if err != nil {
		return err
	}
	if err := r.drain(v); err != nil {
		return err
	}
	if err := rejection(ret); err != nil {
		return err
	}
	return finish(v, ret)
}

// rejection reports an async entry function whose promise was rejected as
// the exception it was rejected with.
func rejection(ret goja.Value) error {
	if o, ok := ret.(*goja.Object); ok {
		if p, ok := o.Export().(*goja.Promise); ok && p.State() == goja.PromiseStateRejected {
			return &thrown{p.Result()}
		}
	}
	return nil
}

func copyProps(h map[string]string) map[string]string {
	m := make(map[string]string, len(h))
	for k, v := range h {
		m[k] = v
	}
	return m
}

// retireAfter is the run duration beyond which the runtime is not reused.
const retireAfter = 100 * time.Millisecond
