package script

import (
	"reflect"
	"strconv"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/token"
	"github.com/dop251/goja/unistring"
)

// Goja concatenates strings eagerly, in one copy that cannot be interrupted
// and that holds up the collector's stop-the-world phases: a script doubling
// a string gets each doubling done (a copy of hundreds of megabytes takes
// long enough for the next to start) before the memory watchdog can look.
// So every string concatenation a script's source contains is routed through
// a native of the runtime that refuses a result beyond the memory limit
// before making it: a + b becomes add(a, b), x += y becomes x = add(x, y),
// untagged template literals with two or more substitutions become
// template(parts...). The natives are constants of the runtime's global
// lexical scope (see declareNatives), under names the parser cannot produce,
// so no script can shadow, replace or even name them. Code made at run time
// (eval, the Function constructor) is not rewritten; the memory watchdog
// remains its only bound.

// Names of the natives in the rewritten code.
const (
	addOpName      unistring.String = "%add"
	templateOpName unistring.String = "%template"
)

// Parameters of the arrow functions that evaluate the object and key of a
// compound assignment once.
const (
	objectParam unistring.String = "%object"
	keyParam    unistring.String = "%key"
	valueParam  unistring.String = "%value"
)

var astPackage = reflect.TypeOf(ast.Program{}).PkgPath()

// rewriteConcatenation rewrites the concatenations of prg in place.
func rewriteConcatenation(prg *ast.Program) {
	w := rewriter{seen: make(map[uintptr]bool)}
	w.walk(reflect.ValueOf(prg))
}

type rewriter struct {
	seen map[uintptr]bool
}

// walk visits every node under v, children first, and replaces the
// concatenations it finds in the interface-typed fields and slots that hold
// them.
func (w *rewriter) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct || v.Elem().Type().PkgPath() != astPackage {
			return
		}
		if w.seen[v.Pointer()] {
			return
		}
		w.seen[v.Pointer()] = true
		w.walk(v.Elem())
	case reflect.Struct:
		if v.Type().PkgPath() != astPackage {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				w.walk(f)
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			w.walk(v.Index(i))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		w.walk(v.Elem())
		expr, ok := v.Elem().Interface().(ast.Expression)
		if !ok || !v.CanSet() {
			return
		}
		if r := w.replace(expr); r != nil && reflect.TypeOf(r).AssignableTo(v.Type()) {
			v.Set(reflect.ValueOf(r))
		}
	}
}

// replace returns what stands for a concatenation, or nil for anything else.
func (w *rewriter) replace(e ast.Expression) ast.Expression {
	switch e := e.(type) {
	case *ast.BinaryExpression:
		if e.Operator == token.PLUS && !short(e.Left) && !short(e.Right) {
			return add(e.Left, e.Right, e.Idx0(), e.Idx1())
		}
	case *ast.AssignExpression:
		if e.Operator == token.PLUS && !short(e.Right) {
			return w.compoundAdd(e)
		}
	case *ast.TemplateLiteral:
		// One substitution makes a string as long as it plus the literal
		// parts: as with a short operand, nothing to double.
		if e.Tag == nil && len(e.Expressions) > 1 {
			args := make([]ast.Expression, 0, 2*len(e.Elements))
			for i, el := range e.Elements {
				args = append(args, &ast.StringLiteral{Idx: el.Idx, Literal: el.Literal, Value: el.Parsed})
				if i < len(e.Expressions) {
					args = append(args, e.Expressions[i])
				}
			}
			return call(templateOpName, e.Idx0(), e.Idx1(), args...)
		}
	}
	return nil
}

// compoundAdd rewrites target += value. A target whose evaluation has no
// side effects is read and written again: target = add(target, value).
// Otherwise the object and key are evaluated once, as the arguments of an
// arrow function that does the rest, so that the value is still evaluated
// after the read, in the same strictness: ((o, k) => o[k] = add(o[k],
// value))(object, key). A value containing await or yield, which the arrow
// function could not hold, is passed in evaluated.
func (w *rewriter) compoundAdd(e *ast.AssignExpression) ast.Expression {
	var object, key ast.Expression
	switch t := e.Left.(type) {
	case *ast.Identifier:
		return assign(e.Left, add(&ast.Identifier{Name: t.Name, Idx: t.Idx}, e.Right, e.Idx0(), e.Idx1()))
	case *ast.DotExpression:
		if simple(t.Left) {
			read := &ast.DotExpression{Left: t.Left, Identifier: t.Identifier}
			return assign(e.Left, call(addOpName, e.Idx0(), e.Idx1(), read, e.Right))
		}
		object, key = t.Left, &ast.StringLiteral{Idx: t.Identifier.Idx, Literal: string(t.Identifier.Name), Value: t.Identifier.Name}
	case *ast.PrivateDotExpression:
		if !simple(t.Left) {
			return nil // the private name cannot be passed on
		}
		read := &ast.PrivateDotExpression{Left: t.Left, Identifier: t.Identifier}
		return assign(e.Left, call(addOpName, e.Idx0(), e.Idx1(), read, e.Right))
	case *ast.BracketExpression:
		if simple(t.Left) && simple(t.Member) {
			read := &ast.BracketExpression{Left: t.Left, Member: t.Member, LeftBracket: t.LeftBracket, RightBracket: t.RightBracket}
			return assign(e.Left, call(addOpName, e.Idx0(), e.Idx1(), read, e.Right))
		}
		object, key = t.Left, t.Member
	default:
		return nil
	}
	at := e.Idx0()
	ident := func(name unistring.String) *ast.Identifier { return &ast.Identifier{Name: name, Idx: at} }
	member := func() *ast.BracketExpression {
		return &ast.BracketExpression{Left: ident(objectParam), Member: ident(keyParam), LeftBracket: at, RightBracket: at}
	}
	params := []*ast.Binding{{Target: ident(objectParam)}, {Target: ident(keyParam)}}
	args := []ast.Expression{object, key}
	value := e.Right
	if suspends(e.Right) {
		params = append(params, &ast.Binding{Target: ident(valueParam)})
		args = append(args, e.Right)
		value = ident(valueParam)
	}
	arrow := &ast.ArrowFunctionLiteral{
		Start:         at,
		ParameterList: &ast.ParameterList{Opening: at, List: params, Closing: at},
		Body:          &ast.ExpressionBody{Expression: assign(member(), call(addOpName, at, e.Idx1(), member(), value))},
	}
	return &ast.CallExpression{Callee: arrow, LeftParenthesis: at, ArgumentList: args, RightParenthesis: e.Idx1()}
}

// add is left + right through the native, except where the operands are
// checked inline, which costs a fraction of a call of the native. When left
// is a variable and right is small enough to be written twice, a number in
// the variable takes the operator (a number joined to a string adds a few
// characters to it):
//
//	typeof left === "number" ? left + right : add(left, right)
//
// and when right is a variable too, so does a short string followed by a
// number:
//
//	typeof left === "number" || typeof left === "string" && left.length < inlineStringMax && typeof right === "number" ? ...
//
// (Two strings are left to the native: reading a string's length in the
// script costs more than the call.)
func add(left, right ast.Expression, from, to file.Idx) ast.Expression {
	id, ok := left.(*ast.Identifier)
	if !ok {
		return call(addOpName, from, to, left, right)
	}
	second, ok := copySmall(right)
	if !ok {
		return call(addOpName, from, to, left, right)
	}
	ident := func(x *ast.Identifier) *ast.Identifier { return &ast.Identifier{Name: x.Name, Idx: x.Idx} }
	str := func(v string) *ast.StringLiteral {
		return &ast.StringLiteral{Idx: from, Literal: `"` + v + `"`, Value: unistring.String(v)}
	}
	is := func(x *ast.Identifier, kind string) ast.Expression {
		return &ast.BinaryExpression{
			Operator: token.STRICT_EQUAL,
			Left:     &ast.UnaryExpression{Operator: token.TYPEOF, Idx: from, Operand: ident(x)},
			Right:    str(kind),
		}
	}
	test := is(id, "number")
	if rid, ok := right.(*ast.Identifier); ok {
		// Only a short string: strings of a megabyte each, joined to
		// numbers one after another, must still be counted by the native.
		shortString := &ast.BinaryExpression{Operator: token.LOGICAL_AND, Left: is(id, "string"),
			Right: &ast.BinaryExpression{Operator: token.LESS,
				Left:  &ast.DotExpression{Left: ident(id), Identifier: ast.Identifier{Name: "length", Idx: from}},
				Right: &ast.NumberLiteral{Idx: from, Literal: strconv.Itoa(inlineStringMax), Value: int64(inlineStringMax)}}}
		test = &ast.BinaryExpression{Operator: token.LOGICAL_OR, Left: test,
			Right: &ast.BinaryExpression{Operator: token.LOGICAL_AND, Left: shortString, Right: is(rid, "number")}}
	}
	return &ast.ConditionalExpression{
		Test:       test,
		Consequent: &ast.BinaryExpression{Operator: token.PLUS, Left: ident(id), Right: right},
		Alternate:  call(addOpName, from, to, left, second),
	}
}

// inlineStringMax is the longest string the operator joins to a number
// inline, uncounted.
const inlineStringMax = 4096

// copySmall copies a variable or a chain of property names on one.
func copySmall(e ast.Expression) (ast.Expression, bool) {
	switch e := e.(type) {
	case *ast.Identifier:
		return &ast.Identifier{Name: e.Name, Idx: e.Idx}, true
	case *ast.DotExpression:
		left, ok := copySmall(e.Left)
		if !ok {
			return nil, false
		}
		return &ast.DotExpression{Left: left, Identifier: e.Identifier}, true
	}
	return nil, false
}

// short reports an expression whose value is never a long string, so that
// + with it cannot double a string: literals, and the results of unary
// operators and of the binary ones other than + and the logical ones.
func short(e ast.Expression) bool {
	switch e := e.(type) {
	case *ast.StringLiteral, *ast.NumberLiteral, *ast.BooleanLiteral, *ast.NullLiteral, *ast.UnaryExpression:
		return true
	case *ast.BinaryExpression:
		switch e.Operator {
		case token.PLUS, token.LOGICAL_AND, token.LOGICAL_OR, token.COALESCE:
			return false
		}
		return true
	}
	return false
}

// simple reports an expression that can be evaluated twice with the same
// result and no side effects.
func simple(e ast.Expression) bool {
	switch e.(type) {
	case *ast.Identifier, *ast.ThisExpression, *ast.SuperExpression, *ast.StringLiteral, *ast.NumberLiteral:
		return true
	}
	return false
}

// suspends reports whether e contains await or yield outside nested
// functions.
func suspends(e ast.Expression) bool {
	found := false
	var visit func(v reflect.Value)
	visit = func(v reflect.Value) {
		if found {
			return
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				return
			}
			switch v.Interface().(type) {
			case *ast.AwaitExpression, *ast.YieldExpression:
				found = true
				return
			case *ast.FunctionLiteral, *ast.ArrowFunctionLiteral, *ast.ClassLiteral:
				return
			}
			visit(v.Elem())
		case reflect.Struct:
			if v.Type().PkgPath() != astPackage {
				return
			}
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					visit(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				visit(v.Index(i))
			}
		}
	}
	visit(reflect.ValueOf(e))
	return found
}

func call(name unistring.String, from, to file.Idx, args ...ast.Expression) *ast.CallExpression {
	return &ast.CallExpression{
		Callee:           &ast.Identifier{Name: name, Idx: from},
		LeftParenthesis:  from,
		ArgumentList:     args,
		RightParenthesis: to,
	}
}

func assign(target, value ast.Expression) *ast.AssignExpression {
	return &ast.AssignExpression{Operator: token.ASSIGN, Left: target, Right: value}
}
