package script

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
)

//go:embed prelude.js
var preludeSource string

// preludeProgram compiles the prelude on the first runtime made, not at
// package init: compiling it allocates about half a megabyte and keeps the
// program, which a server that runs no script never needs.
var preludeProgram = sync.OnceValue(func() *goja.Program {
	return goja.MustCompile("prelude.js", preludeSource, true)
})

// vm is one locked-down runtime with the server-side API installed. It runs
// one script at a time; cur is the run in progress.
type vm struct {
	rt        *goja.Runtime
	base      *goja.Object // the frozen global object each run's global inherits from
	parse     goja.Callable
	stringify goja.Callable
	statusErr goja.Callable
	describe  goja.Callable
	cur       *run
	// tainted is set when the script touched something (eval) that may leave
	// state behind; the runtime is then not reused.
	tainted bool
}

// newVM makes a runtime, wraps the dangerous built-ins, installs the API and
// freezes the built-ins.
func newVM(l Limits) (*vm, error) {
	rt := goja.New()
	rt.SetMaxCallStackSize(l.MaxCallDepth)
	v := &vm{rt: rt}
	if err := installGuards(rt, l, v.exceedMemory, v.mayMakeString); err != nil {
		return nil, fmt.Errorf("script: guards: %w", err)
	}

	host := rt.NewObject()
	natives := map[string]func(goja.FunctionCall) goja.Value{
		"submit":     v.submit,
		"readAll":    v.readAll,
		"selfLink":   v.selfLink,
		"altLink":    v.altLink,
		"need":       v.need,
		"getBody":    v.getBody,
		"setBody":    v.setBody,
		"appendBody": v.appendBody,
		"getValue":   v.getValue,
		"setValue":   v.setValue,
		"logging":    v.logging,
		"log":        v.log,
		"guid":       v.guid,
		"taint":      v.taint,
	}
	for name, fn := range natives {
		if err := host.Set(name, fn); err != nil {
			return nil, err
		}
	}
	fv, err := rt.RunProgram(preludeProgram())
	if err != nil {
		return nil, fmt.Errorf("script: prelude: %w", err)
	}
	fn, ok := goja.AssertFunction(fv)
	if !ok {
		return nil, fmt.Errorf("script: prelude is not a function")
	}
	exports, err := fn(goja.Undefined(), host)
	if err != nil {
		return nil, fmt.Errorf("script: prelude: %w", err)
	}
	ex := exports.ToObject(rt)
	for name, dst := range map[string]*goja.Callable{
		"parse": &v.parse, "stringify": &v.stringify, "statusError": &v.statusErr, "describe": &v.describe,
	} {
		f, ok := goja.AssertFunction(ex.Get(name))
		if !ok {
			return nil, fmt.Errorf("script: prelude does not export %s", name)
		}
		*dst = f
	}
	v.base = rt.GlobalObject()
	return v, nil
}

// exceedMemory stops the run in progress with the memory-limit error (a
// guard found that an operation would exceed it); it reports false when no
// run is in progress.
func (v *vm) exceedMemory() bool {
	r := v.cur
	if r == nil {
		return false
	}
	r.stop(v, newMemoryError(r.limits.MaxMemory))
	return true
}

// mayMakeString reports whether the run in progress may make a string of n
// characters (see run.checkBeforeString).
func (v *vm) mayMakeString(n int64) bool {
	if r := v.cur; r != nil {
		return r.checkBeforeString(v, n)
	}
	return true
}

// begin gives the runtime a fresh global object for run r.
func (v *vm) begin(r *run) {
	g := v.rt.CreateObject(v.base)
	_ = g.DefineDataProperty("globalThis", g, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	v.rt.SetGlobalObject(g)
	v.cur = r
}

// end drops everything of the finished run.
func (v *vm) end() {
	v.rt.SetGlobalObject(v.base)
	v.cur = nil
	v.rt.ClearInterrupt()
}

// throwStatus raises, in the script, an Error with number and body.
func (v *vm) throwStatus(status int, msg string) {
	e, err := v.errorValue(status, msg)
	if err != nil {
		panic(err)
	}
	panic(e)
}

// errorValue builds the error object callbacks receive.
// It runs JavaScript, so a limit reached meanwhile interrupts it: the
// error is then that interrupt, which the caller returns like any other.
func (v *vm) errorValue(status int, msg string) (goja.Value, error) {
	return v.statusErr(goja.Undefined(), v.rt.ToValue(status), v.rt.ToValue(msg))
}

// parseJSON turns JSON bytes into a JavaScript value. Scalars (the usual
// UDF arguments) are converted directly; the rest goes through JSON.parse.
func (v *vm) parseJSON(raw []byte) (goja.Value, error) {
	if len(raw) == 0 {
		return goja.Undefined(), nil
	}
	if val := v.scalar(raw); val != nil {
		return val, nil
	}
	return v.parse(goja.Undefined(), v.rt.ToValue(string(raw)))
}

// scalar converts a JSON number, true, false or null, or returns nil.
func (v *vm) scalar(raw []byte) goja.Value {
	switch string(raw) {
	case "true":
		return v.rt.ToValue(true)
	case "false":
		return v.rt.ToValue(false)
	case "null":
		return goja.Null()
	}
	if len(raw) > 32 || !isJSONNumber(raw) {
		return nil
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && n > -1<<53 && n < 1<<53 {
		return v.rt.ToValue(n)
	}
	// Out of range parses to ±Inf or 0 with an error; JavaScript gives the same.
	f, _ := strconv.ParseFloat(string(raw), 64)
	return v.rt.ToValue(f)
}

// isJSONNumber reports whether b is a number in JSON's grammar.
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// toJSON serializes a value; ok is false for undefined (and functions).
func (v *vm) toJSON(val goja.Value) (text string, ok bool, err error) {
	if val == nil || goja.IsUndefined(val) {
		return "", false, nil
	}
	if goja.IsNull(val) {
		return "null", true, nil
	}
	switch val.ExportType() {
	case reflectInt64, reflectBool:
		return val.String(), true, nil
	case reflectFloat64:
		if f := val.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			return "null", true, nil
		}
		return val.String(), true, nil
	}
	s, err := v.stringify(goja.Undefined(), val)
	if err != nil {
		return "", false, err
	}
	if goja.IsUndefined(s) {
		return "", false, nil
	}
	return s.String(), true, nil
}

var (
	reflectInt64   = reflect.TypeOf(int64(0))
	reflectFloat64 = reflect.TypeOf(float64(0))
	reflectBool    = reflect.TypeOf(false)
)

// newGUID returns a random version 4 UUID, the id Cosmos generates.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// pool keeps idle runtimes for reuse. Making a runtime takes milliseconds
// (the built-ins are materialized and frozen), so a runtime that is retired
// is replaced in the background, off the request path.
type pool struct {
	limits    Limits
	idle      chan *vm
	refilling atomic.Bool
}

func newPool(l Limits) *pool {
	return &pool{limits: l, idle: make(chan *vm, l.PoolSize)}
}

func (p *pool) get() (*vm, error) {
	select {
	case v := <-p.idle:
		return v, nil
	default:
		return newVM(p.limits)
	}
}

func (p *pool) put(v *vm) {
	select {
	case p.idle <- v:
	default:
	}
}

// refill makes a runtime in the background when none is idle (one at a
// time): after a runtime was retired, and when the pool is new.
func (p *pool) refill() {
	if len(p.idle) > 0 || !p.refilling.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.refilling.Store(false)
		if v, err := newVM(p.limits); err == nil {
			p.put(v)
		}
	}()
}
