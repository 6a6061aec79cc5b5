package script

import (
	"reflect"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"github.com/dop251/goja/unistring"
)

// The natives the rewritten concatenations call (see rewrite.go). They
// compute what the operators would, and stop the run with the memory-limit
// error, before allocating, when a string result would be longer than
// Limits.maxStringLength: such a string alone holds about the whole memory
// limit. The stop cannot be caught by the script.

var (
	reflectInt64Type   = reflect.TypeOf(int64(0))
	reflectFloat64Type = reflect.TypeOf(float64(0))
)

// plainAddProgram is the + operator itself, for the operands the natives do
// not handle (objects, which convert by their own methods, and the rarer
// primitives). Compiled on the first runtime made, as the prelude is.
var plainAddProgram = sync.OnceValue(func() *goja.Program {
	return goja.MustCompile("add.js", "(function (a, b) { return a + b; })", true)
})

// concatOps are one runtime's concatenation natives.
type concatOps struct {
	g        *guards
	plainAdd goja.Callable
}

// installConcatOps makes the natives of g's runtime and declares them.
func installConcatOps(g *guards) error {
	fv, err := g.rt.RunProgram(plainAddProgram())
	if err != nil {
		return err
	}
	plain, _ := goja.AssertFunction(fv)
	c := &concatOps{g: g, plainAdd: plain}
	return c.declareNatives()
}

// addOp is a + b.
func (c *concatOps) addOp(call goja.FunctionCall) goja.Value {
	return c.add(call.Argument(0), call.Argument(1))
}

func (c *concatOps) add(a, b goja.Value) goja.Value {
	sa, aString := a.(goja.String)
	sb, bString := b.(goja.String)
	switch {
	case aString && bString:
		return c.concat(sa, sb)
	case aString && isNumber(b):
		return c.concat(sa, toJSString(c.g.rt, b))
	case bString && isNumber(a):
		return c.concat(toJSString(c.g.rt, a), sb)
	case isNumber(a) && isNumber(b):
		if a.ExportType() == reflectInt64Type && b.ExportType() == reflectInt64Type {
			return c.g.rt.ToValue(a.ToInteger() + b.ToInteger())
		}
		return c.g.rt.ToValue(a.ToFloat() + b.ToFloat())
	}
	v, err := c.plainAdd(goja.Undefined(), a, b)
	if err != nil {
		panic(err)
	}
	// An object's conversion may have produced a long string: the result
	// is made already, but the run goes no further with it.
	if s, ok := v.(goja.String); ok && int64(s.Length()) > c.g.maxChars {
		c.g.exceed()
	}
	return v
}

// isNumber reports a number primitive (a string is none: its export type
// is not a number's).
func isNumber(v goja.Value) bool {
	switch v.(type) {
	case *goja.Object, *goja.Symbol, nil:
		return false
	}
	t := v.ExportType()
	return t == reflectInt64Type || t == reflectFloat64Type
}

// concat joins two strings, or stops the run if the result would be too
// long or the run's heap has grown beyond the limit.
func (c *concatOps) concat(a, b goja.String) goja.Value {
	n := int64(a.Length()) + int64(b.Length())
	if n > c.g.maxChars {
		c.g.exceed()
		return goja.Undefined()
	}
	if !c.g.mayMakeString(n) {
		return goja.Undefined()
	}
	if n > concatChunk && isASCII(a) && isASCII(b) {
		return concatChunked(a, b, int(n))
	}
	return a.Concat(b)
}

// concatChunk is the most characters one copy of a concatenation takes. A
// copy cannot be preempted: one of 64 MiB holds up the collector's
// stop-the-world phases, and so every request, for tens of milliseconds.
// Longer strings are copied a chunk at a time.
const concatChunk = 256 << 10

// asciiType is the dynamic type of goja's one-byte strings.
var asciiType = func() reflect.Type {
	var b goja.StringBuilder
	b.WriteUTF8String("a")
	return reflect.TypeOf(b.String())
}()

func isASCII(s goja.String) bool { return reflect.TypeOf(s) == asciiType }

// concatChunked is a + b of one-byte strings, n characters in all, copied
// concatChunk characters at a time into a buffer allocated once (and not
// cleared first).
func concatChunked(a, b goja.String, n int) goja.String {
	var sb goja.StringBuilder
	sb.Grow(n)
	writeChunked(&sb, a)
	writeChunked(&sb, b)
	return sb.String()
}

// writeChunked appends s to b, concatChunk characters at a time when s is a
// long one-byte string.
func writeChunked(b *goja.StringBuilder, s goja.String) {
	l := s.Length()
	if l <= concatChunk || !isASCII(s) {
		b.WriteString(s)
		return
	}
	for i := 0; i < l; i += concatChunk {
		b.WriteString(s.Substring(i, min(i+concatChunk, l)))
	}
}

// templateOp is an untagged template literal: its arguments alternate
// between the literal parts and the substituted values. The values are all
// evaluated before the first is converted to a string, where the literal
// converts each before evaluating the next: only a toString with side
// effects on a later substitution could tell.
func (c *concatOps) templateOp(call goja.FunctionCall) goja.Value {
	parts := make([]goja.String, len(call.Arguments))
	total := int64(0)
	for i, a := range call.Arguments {
		if _, ok := a.(*goja.Symbol); ok {
			panic(c.g.rt.NewTypeError("Cannot convert a Symbol value to a string"))
		}
		parts[i] = toJSString(c.g.rt, a)
		total += int64(parts[i].Length())
	}
	if total > c.g.maxChars {
		c.g.exceed()
		return goja.Undefined()
	}
	if !c.g.mayMakeString(total) {
		return goja.Undefined()
	}
	var b goja.StringBuilder
	b.Grow(int(total))
	for _, p := range parts {
		writeChunked(&b, p)
	}
	return b.String()
}

// declareNatives makes the natives constants of the runtime's global
// lexical scope, where the rewritten code finds them: not properties of any
// object, and under names no source can spell.
func (c *concatOps) declareNatives() error {
	const tmp = "__orreryNatives"
	prg, err := parser.ParseFile(nil, "natives.js", "const __orreryAdd = "+tmp+"[0], __orreryTemplate = "+tmp+"[1];", 0)
	if err != nil {
		return err
	}
	names := map[unistring.String]unistring.String{"__orreryAdd": addOpName, "__orreryTemplate": templateOpName}
	for _, b := range prg.Body[0].(*ast.LexicalDeclaration).List {
		id := b.Target.(*ast.Identifier)
		id.Name = names[id.Name]
	}
	p, err := goja.CompileAST(prg, true)
	if err != nil {
		return err
	}
	rt := c.g.rt
	if err := rt.Set(tmp, []goja.Value{rt.ToValue(c.addOp), rt.ToValue(c.templateOp)}); err != nil {
		return err
	}
	_, err = rt.RunProgram(p)
	rt.GlobalObject().Delete(tmp)
	return err
}
