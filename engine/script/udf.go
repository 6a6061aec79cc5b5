package script

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dop251/goja"
)

// UDFSession calls user-defined functions for one query: it holds one
// runtime, with each function compiled and instantiated once, and one time
// budget for all its calls, so that calling a UDF per row costs little more
// than the call itself. A session is used by one goroutine; Close returns
// its runtime.
type UDFSession struct {
	rn     *Runner
	v      *vm
	r      *run
	fns    map[programKey]udfEntry
	broken *Error // set when the runtime can no longer run anything
	closed bool
}

type udfEntry struct {
	body string
	fn   goja.Callable
}

// NewUDFSession starts a session whose calls share the runner's time budget
// and memory ceiling, counted from now.
func (rn *Runner) NewUDFSession(ctx context.Context) (*UDFSession, error) {
	r := &run{kind: kindUDF}
	v, err := rn.acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	return &UDFSession{rn: rn, v: v, r: r, fns: make(map[programKey]udfEntry)}, nil
}

// Call calls udf with JSON arguments and returns its result as JSON, or nil
// when it returned undefined. After an interrupt (time budget, memory,
// cancellation) or a stack overflow every later call returns the same error.
func (s *UDFSession) Call(udf UDF, args []json.RawMessage) (out json.RawMessage, err error) {
	if s.closed {
		return nil, failure(StatusInternalServerError, "The UDF session is closed.")
	}
	if s.broken != nil {
		return nil, s.broken
	}
	defer func() {
		if p := recover(); p != nil {
			s.broken = panicFailure(p)
			out, err = nil, s.broken
		}
	}()
	fn, err := s.function(udf)
	if err != nil {
		return nil, err
	}
	out, err = s.call(fn, args)
	if err != nil {
		f := s.r.failureOf(s.v, err)
		if !recoverable(err) || s.r.isDone() {
			s.broken = f
		}
		return nil, f
	}
	return out, nil
}

// function returns the instantiated entry function of udf.
func (s *UDFSession) function(udf UDF) (goja.Callable, error) {
	key := programKey{udf.ID, udf.ETag}
	if e, ok := s.fns[key]; ok && e.body == udf.Body {
		return e.fn, nil
	}
	prog, err := s.rn.programs.get(udf)
	if err != nil {
		return nil, err
	}
	fv, err := s.v.rt.RunProgram(prog)
	if err != nil {
		return nil, s.r.failureOf(s.v, err)
	}
	fn, ok := goja.AssertFunction(fv)
	if !ok {
		return nil, failure(StatusBadRequest, "The script body must be a JavaScript function.")
	}
	s.fns[key] = udfEntry{body: udf.Body, fn: fn}
	return fn, nil
}

func (s *UDFSession) call(fn goja.Callable, args []json.RawMessage) (json.RawMessage, error) {
	var buf [4]goja.Value
	jsArgs := buf[:0]
	for i, a := range args {
		val, err := s.v.parseJSON(a)
		if err != nil {
			return nil, failure(StatusBadRequest, fmt.Sprintf("Argument %d is not valid JSON.", i))
		}
		jsArgs = append(jsArgs, val)
	}
	ret, err := fn(goja.Undefined(), jsArgs...)
	if err != nil {
		return nil, err
	}
	if err := rejection(ret); err != nil {
		return nil, err
	}
	text, ok, err := s.v.toJSON(ret)
	if err != nil || !ok {
		return nil, err
	}
	return json.RawMessage(text), nil
}

// Close ends the session and returns its runtime to the pool.
func (s *UDFSession) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.rn.release(s.v, s.r, s.broken == nil)
}
