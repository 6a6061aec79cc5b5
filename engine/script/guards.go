package script

import (
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// Native built-ins run to completion without looking at the interrupt flag,
// so a single call such as new Array(1e9).fill(0) or "x".repeat(1e9) could
// allocate gigabytes before the memory watchdog gets a say. installGuards
// wraps the built-ins whose work or result size is set by a number the script
// controls, and makes them throw a RangeError when that size is beyond what
// the memory limit allows.

// arrayMethodsByLength are the Array.prototype methods that loop over, or
// allocate for, every index below this.length.
var arrayMethodsByLength = []string{
	"fill", "toLocaleString", "indexOf", "lastIndexOf", "includes", "forEach",
	"map", "filter", "reduce", "reduceRight", "every", "some", "find",
	"findIndex", "findLast", "findLastIndex", "reverse", "sort", "splice",
	"slice", "copyWithin", "flat", "flatMap", "toReversed", "toSorted",
	"toSpliced", "with",
}

// guards holds the limits the wrapped built-ins check.
type guards struct {
	rt         *goja.Runtime
	rangeError goja.Value
	comma      goja.String
	joining    map[*goja.Object]bool // arrays being joined, for cycle detection
	maxDepth   int                   // nesting depth of join and JSON.stringify
	maxLength  int64                 // array elements
	maxChars   int64                 // string length in UTF-16 code units
	// stopRun stops the run in progress with the memory-limit error, or
	// reports false when there is none.
	stopRun func() bool
	// mayMakeString reports whether the run may make a string of n
	// characters, checking its heap now and then.
	mayMakeString func(n int64) bool
}

// installGuards wraps the built-ins and declares the natives the rewritten
// concatenations call.
func installGuards(rt *goja.Runtime, l Limits, stopRun func() bool, mayMakeString func(int64) bool) error {
	g := &guards{rt: rt, rangeError: rt.Get("RangeError"), comma: rt.ToValue(",").(goja.String),
		joining: make(map[*goja.Object]bool), maxDepth: 10 * l.MaxCallDepth, maxLength: l.maxArrayLength(), maxChars: l.maxStringLength(),
		stopRun: stopRun, mayMakeString: mayMakeString}
	arrayCtor := rt.Get("Array").ToObject(rt)
	arrayProto := arrayCtor.Get("prototype").ToObject(rt)
	for _, name := range arrayMethodsByLength {
		g.wrap(arrayProto, name, func(call goja.FunctionCall) {
			g.checkLength(g.lengthOf(call.This), "the array")
		})
	}
	g.replace(arrayProto, "join", 1, g.join)
	jsonObj := rt.Get("JSON").ToObject(rt)
	if orig := jsonObj.Get("stringify"); orig != nil {
		// Sized before, and checked after for what toJSON methods and a
		// replacer produce, in one wrapper: every response goes through it.
		stringify, _ := goja.AssertFunction(orig)
		checked := g.resultChecked(stringify)
		g.install(jsonObj, "stringify", orig, func(call goja.FunctionCall) goja.Value {
			w := jsonWalk{g: g}
			w.check(w.size(call.Argument(0), 0))
			return checked(call)
		})
	}
	g.wrap(arrayProto, "concat", func(call goja.FunctionCall) {
		total := g.lengthOf(call.This)
		for _, a := range call.Arguments {
			if o, ok := a.(*goja.Object); ok && o.ClassName() == "Array" {
				total += g.lengthOf(o)
			} else {
				total++
			}
		}
		g.checkLength(total, "the result")
	})
	g.wrap(arrayCtor, "from", func(call goja.FunctionCall) {
		if o, ok := call.Argument(0).(*goja.Object); ok {
			g.checkLength(g.lengthOf(o), "the source")
		}
	})

	stringProto := rt.Get("String").ToObject(rt).Get("prototype").ToObject(rt)
	g.wrap(stringProto, "repeat", func(call goja.FunctionCall) {
		n := call.Argument(0).ToInteger()
		if n > 0 {
			g.checkChars(int64(g.stringLength(call.This)), n)
		}
	})
	padCheck := func(call goja.FunctionCall) {
		g.checkChars(call.Argument(0).ToInteger(), 1)
	}
	g.wrap(stringProto, "padStart", padCheck)
	g.wrap(stringProto, "padEnd", padCheck)
	g.wrap(stringProto, "split", func(call goja.FunctionCall) {
		n := int64(g.stringLength(call.This))
		if limit := call.Argument(1); !goja.IsUndefined(limit) && limit.ToInteger() < n {
			n = limit.ToInteger()
		}
		g.checkLength(n, "the result")
	})

	argsAt := func(i int) func(goja.FunctionCall) {
		return func(call goja.FunctionCall) {
			if o, ok := call.Argument(i).(*goja.Object); ok {
				g.checkLength(g.lengthOf(o), "the argument list")
			}
		}
	}
	functionProto := rt.Get("Function").ToObject(rt).Get("prototype").ToObject(rt)
	g.wrap(functionProto, "apply", argsAt(1))
	reflect := rt.Get("Reflect").ToObject(rt)
	g.wrap(reflect, "apply", argsAt(2))
	g.wrap(reflect, "construct", argsAt(1))

	// Built-ins whose result may be a multiple of their input's length:
	// repeated, each of them grows a string geometrically without a +.
	// Their result is checked once made; the run goes no further with a
	// string beyond the limit. (concat, String.raw, replace and replaceAll
	// are also checked before, as far as their arguments tell.)
	for _, name := range []string{"concat", "replace", "replaceAll", "normalize", "toUpperCase", "toLowerCase",
		"toLocaleUpperCase", "toLocaleLowerCase", "padStart", "padEnd"} {
		g.checkResult(stringProto, name)
	}
	stringCtor := rt.Get("String").ToObject(rt)
	g.wrapUnless(stringCtor, "raw", g.checkRaw)
	g.checkResult(stringCtor, "raw")
	for _, name := range []string{"encodeURI", "encodeURIComponent", "escape"} {
		g.checkResult(rt.GlobalObject(), name)
	}
	g.checkResult(arrayProto, "toLocaleString")
	regexpProto := rt.Get("RegExp").ToObject(rt).Get("prototype").ToObject(rt)
	if orig := regexpProto.GetSymbol(goja.SymReplace); orig != nil {
		if call, ok := goja.AssertFunction(orig); ok {
			_ = regexpProto.DefineDataPropertySymbol(goja.SymReplace, g.rt.ToValue(g.resultChecked(call)),
				goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
		}
	}
	g.wrapUnless(stringProto, "replace", func(call goja.FunctionCall) bool { return g.checkReplace(call, false) })
	g.wrapUnless(stringProto, "replaceAll", func(call goja.FunctionCall) bool { return g.checkReplace(call, true) })

	if err := installConcatOps(g); err != nil {
		return err
	}
	g.wrapUnless(stringProto, "concat", func(call goja.FunctionCall) bool {
		total := int64(g.stringLength(call.This))
		for _, a := range call.Arguments {
			if s, ok := a.(goja.String); ok {
				total += int64(s.Length())
			}
		}
		if total > g.maxChars {
			g.exceed()
			return false
		}
		return true
	})
	return nil
}

// replace installs fn as obj[name] with the given length.
func (g *guards) replace(obj *goja.Object, name string, length int, fn func(goja.FunctionCall) goja.Value) {
	f := g.rt.ToValue(fn).ToObject(g.rt)
	_ = f.DefineDataProperty("name", g.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = f.DefineDataProperty("length", g.rt.ToValue(length), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = obj.DefineDataProperty(name, f, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// wrap replaces obj[name] by a function that runs check (which throws to
// refuse) and then calls the original with the same this and arguments.
func (g *guards) wrap(obj *goja.Object, name string, check func(goja.FunctionCall)) {
	g.wrapUnless(obj, name, func(c goja.FunctionCall) bool {
		check(c)
		return true
	})
}

// checkResult replaces obj[name] by a function that calls the original and
// stops the run when the result is a string longer than the limit.
func (g *guards) checkResult(obj *goja.Object, name string) {
	orig := obj.Get(name)
	call, ok := goja.AssertFunction(orig)
	if !ok {
		return
	}
	g.install(obj, name, orig, g.resultChecked(call))
}

// resultChecked returns call with the check of checkResult.
func (g *guards) resultChecked(call goja.Callable) func(goja.FunctionCall) goja.Value {
	return func(c goja.FunctionCall) goja.Value {
		v, err := call(c.This, c.Arguments...)
		if err != nil {
			panic(err)
		}
		if s, ok := v.(goja.String); ok && int64(s.Length()) > g.maxChars {
			g.exceed()
			return goja.Undefined()
		}
		return v
	}
}

// checkRaw bounds the result of String.raw before it runs: the raw parts
// and the substitutions that are strings, as they are interleaved.
func (g *guards) checkRaw(call goja.FunctionCall) bool {
	site, ok := call.Argument(0).(*goja.Object)
	if !ok {
		return true
	}
	raw, ok := site.Get("raw").(*goja.Object)
	if !ok {
		return true
	}
	n := g.lengthOf(raw)
	g.checkLength(n, "the raw strings")
	total := int64(0)
	for i := int64(0); i < n; i++ {
		if s, ok := raw.Get(strconv.FormatInt(i, 10)).(goja.String); ok {
			total += int64(s.Length())
		}
		if i+1 < n && int(i+1) < len(call.Arguments) {
			if s, ok := call.Arguments[i+1].(goja.String); ok {
				total += int64(s.Length())
			}
		}
		if total > g.maxChars {
			g.exceed()
			return false
		}
	}
	return true
}

// matchBytes is about what goja allocates for each match of replace and
// replaceAll while it finds them all (measured: 170 bytes).
const matchBytes = 160

// checkReplace bounds the result of replace and replaceAll before they run,
// for a replacement given as a string: each match adds the replacement,
// whose $& and $n add at most the whole string over all matches, and whose
// $` and $' add up to the whole string at every match (so that a global
// replacement with them grows with the square of the length). Matches of a
// string pattern are counted; a regular expression may match at every
// position when global. It stops the run and returns false for a bound
// beyond the limit.
func (g *guards) checkReplace(call goja.FunctionCall, all bool) bool {
	str, ok := call.This.(goja.String)
	repl, isString := call.Argument(1).(goja.String)
	if !ok || !isString {
		return true
	}
	n := int64(str.Length())
	text := repl.String()
	perMatch := int64(strings.Count(text, "$`") + strings.Count(text, "$'"))
	overall := int64(strings.Count(text, "$")) - perMatch
	matches := int64(1)
	switch p := call.Argument(0).(type) {
	case goja.String:
		if all {
			if p.Length() == 0 {
				matches = n + 1
			} else {
				matches = int64(strings.Count(str.String(), p.String()))
			}
		}
	case *goja.Object:
		if all || p.Get("global").ToBoolean() {
			matches = n + 1
		}
	}
	// The built-in also notes every match before it writes the result,
	// in about matchBytes each: half the memory limit at most.
	if matches > g.maxChars/matchBytes {
		g.exceed()
		return false
	}
	bound := n + matches*int64(repl.Length()) + overall*n
	if perMatch > 0 && n > 0 && matches > g.maxChars/n/perMatch {
		bound = g.maxChars + 1
	} else {
		bound += perMatch * matches * n
	}
	if bound > g.maxChars {
		g.exceed()
		return false
	}
	return true
}

// install defines fn as obj[name] in place of orig, with orig's name and
// length.
func (g *guards) install(obj *goja.Object, name string, orig goja.Value, fn func(goja.FunctionCall) goja.Value) {
	origObj := orig.ToObject(g.rt)
	wrapped := g.rt.ToValue(fn).ToObject(g.rt)
	_ = wrapped.DefineDataProperty("name", g.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = wrapped.DefineDataProperty("length", origObj.Get("length"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = obj.DefineDataProperty(name, wrapped, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// wrapUnless is wrap with a check that may also refuse by returning false
// (after stopping the run): the call then returns undefined.
func (g *guards) wrapUnless(obj *goja.Object, name string, check func(goja.FunctionCall) bool) {
	orig := obj.Get(name)
	call, ok := goja.AssertFunction(orig)
	if !ok {
		return
	}
	g.install(obj, name, orig, func(c goja.FunctionCall) goja.Value {
		if !check(c) {
			return goja.Undefined()
		}
		v, err := call(c.This, c.Arguments...)
		if err != nil {
			panic(err)
		}
		return v
	})
}

func (g *guards) lengthOf(v goja.Value) int64 {
	o, ok := v.(*goja.Object)
	if !ok {
		return 0
	}
	return o.Get("length").ToInteger()
}

func (g *guards) stringLength(v goja.Value) int {
	if s, ok := v.(goja.String); ok {
		return s.Length()
	}
	if goja.IsUndefined(v) || goja.IsNull(v) {
		return 0
	}
	if s, ok := v.ToString().(goja.String); ok {
		return s.Length()
	}
	return len(v.String())
}

func (g *guards) checkLength(n int64, what string) {
	if n > g.maxLength {
		g.throw("Invalid array length: " + what + " would have " +
			strconv.FormatInt(n, 10) + " elements, more than the script memory limit allows (" +
			strconv.FormatInt(g.maxLength, 10) + ")")
	}
}

// checkChars refuses a string of unit*count characters beyond the limit.
func (g *guards) checkChars(unit, count int64) {
	if unit <= 0 || count <= 0 {
		return
	}
	if unit > g.maxChars/count {
		g.throw("Invalid string length: the result would be longer than the script memory limit allows (" +
			strconv.FormatInt(g.maxChars, 10) + " characters)")
	}
}

// join is Array.prototype.join with the result size bounded as it grows
// (elements that are arrays are joined by this same function, so nesting
// cannot multiply the size unchecked). Arrays already being joined further up
// the stack give "", as in the built-in.
func (g *guards) join(call goja.FunctionCall) goja.Value {
	o := call.This.ToObject(g.rt)
	if g.joining[o] {
		return g.rt.ToValue("")
	}
	if len(g.joining) >= g.maxDepth {
		g.throw("Maximum call stack size exceeded (arrays nested too deeply to join)")
	}
	g.joining[o] = true
	defer delete(g.joining, o)

	n := g.lengthOf(o)
	g.checkLength(n, "the array")
	sep := g.comma
	if s := call.Argument(0); !goja.IsUndefined(s) {
		sep = toJSString(g.rt, s)
	}
	var b goja.StringBuilder
	total := int64(0)
	for i := int64(0); i < n; i++ {
		if i > 0 {
			total += int64(sep.Length())
			g.checkChars(total, 1)
			b.WriteString(sep)
		}
		el := o.Get(strconv.FormatInt(i, 10))
		if el == nil || goja.IsUndefined(el) || goja.IsNull(el) {
			continue
		}
		s := toJSString(g.rt, el)
		total += int64(s.Length())
		g.checkChars(total, 1)
		b.WriteString(s)
	}
	return b.String()
}

// toJSString converts a value to a JavaScript string (ToString).
func toJSString(rt *goja.Runtime, val goja.Value) goja.String {
	if s, ok := val.(goja.String); ok {
		return s
	}
	if s, ok := val.ToString().(goja.String); ok {
		return s
	}
	return rt.ToValue(val.String()).(goja.String)
}

// jsonWalk bounds JSON.stringify before it runs: it sizes the value as the
// serializer will write it, counting elements and string characters against
// the limits, so that sparse arrays with huge lengths and sub-objects shared
// exponentially often are refused. A shared object is sized once and counted
// at every reference. Values produced by toJSON methods or a replacer are not
// seen.
type jsonWalk struct {
	g         *guards
	sizes     map[*goja.Object]jsonSize
	ancestors map[*goja.Object]bool // the serializer itself refuses cycles
}

// jsonSize is how much of the output a value accounts for.
type jsonSize struct{ elements, chars int64 }

func (s *jsonSize) add(o jsonSize) {
	s.elements += o.elements
	s.chars += o.chars
}

func (w *jsonWalk) check(s jsonSize) {
	if s.elements > w.g.maxLength {
		w.g.throw("JSON.stringify: the value has more elements than the script memory limit allows")
	}
	if s.chars > w.g.maxChars {
		w.g.throw("JSON.stringify: the result would be longer than the script memory limit allows")
	}
}

func (w *jsonWalk) size(v goja.Value, depth int) jsonSize {
	switch x := v.(type) {
	case goja.String:
		return jsonSize{chars: jsonStringLength(x)}
	case *goja.Object:
		if _, ok := goja.AssertFunction(x); ok || w.ancestors[x] {
			return jsonSize{}
		}
		if s, ok := w.sizes[x]; ok {
			return s
		}
		// The serializer recurses natively (and checks for cycles in time
		// proportional to the depth), out of reach of the time budget.
		if depth >= w.g.maxDepth {
			w.g.throw("JSON.stringify: the value is nested too deeply")
		}
		if w.ancestors == nil {
			w.ancestors = make(map[*goja.Object]bool)
			w.sizes = make(map[*goja.Object]jsonSize)
		}
		w.ancestors[x] = true
		defer delete(w.ancestors, x)
		var total jsonSize
		if x.ClassName() == "Array" {
			n := w.g.lengthOf(x)
			total.elements = n
			w.check(total)
			for i := int64(0); i < n; i++ {
				total.add(w.size(x.Get(strconv.FormatInt(i, 10)), depth+1))
				w.check(total)
			}
		} else {
			keys := x.Keys()
			total.elements = int64(len(keys))
			for _, k := range keys {
				total.chars += int64(len(k))
				total.add(w.size(x.Get(k), depth+1))
				w.check(total)
			}
		}
		w.sizes[x] = total
		return total
	}
	return jsonSize{}
}

// exceed ends the run for a result beyond the memory limit: the script sees
// the stop at its next instruction and cannot catch it. Outside a run it
// throws a RangeError.
func (g *guards) exceed() {
	if !g.stopRun() {
		g.throw("Invalid string length: the result would be longer than the script memory limit allows (" +
			strconv.FormatInt(g.maxChars, 10) + " characters)")
	}
}

// jsonStringLength is how long s is written as JSON. Strings shorter than
// jsonScanFrom are taken at their length (plus quotes), so that the usual
// small values cost no scan; longer ones are scanned for what escaping adds,
// which can make a string up to six times as long.
func jsonStringLength(s goja.String) int64 {
	n := int64(s.Length()) + 2
	if n < jsonScanFrom {
		return n
	}
	for _, r := range s.String() {
		switch {
		case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
			n++
		case r < 0x20:
			n += 5
		}
	}
	return n
}

const jsonScanFrom = 4096

// throw raises a RangeError in the script.
func (g *guards) throw(msg string) {
	ctor, _ := g.rangeError.(*goja.Object)
	e, err := g.rt.New(ctor, g.rt.ToValue(msg))
	if err != nil {
		panic(err)
	}
	panic(e)
}
