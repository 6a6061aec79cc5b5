package script

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// Script is a stored procedure, trigger or user-defined function as the
// engine stores it.
type Script struct {
	// ID is the script's id; it also names the script in stack traces.
	ID string
	// Body is the JavaScript source: a function, optionally followed or
	// preceded by helper functions.
	Body string
	// ETag is the version of the body; compiled programs are cached by ID
	// and ETag (and checked against Body).
	ETag string
}

// StoredProcedure is a Script run by Execute.
type StoredProcedure = Script

// Trigger is a Script run by RunPreTrigger or RunPostTrigger.
type Trigger = Script

// UDF is a Script run by CallUDF.
type UDF = Script

// Validate compiles a script body and reports, as a 400 *Error naming the
// line and column, why it cannot be run. The engine calls it when a script
// is created or replaced, so that a syntax error fails there and not at the
// first run. id names the script in the message.
func Validate(id, body string) error {
	_, err := compile(scriptFileName(id), body)
	return err
}

// compile turns a body into a program whose completion value is the entry
// function: the body itself when it is one function expression, otherwise
// the first function the body declares. Its concatenations are rewritten
// (see rewrite.go).
func compile(name, body string) (*goja.Program, error) {
	expr := strings.TrimRight(body, " \t\r\n;")
	prg, exprErr := parser.ParseFile(nil, name, "(\n"+expr+"\n)", 0)
	if exprErr == nil {
		if len(prg.Body) == 1 {
			if es, ok := prg.Body[0].(*ast.ExpressionStatement); ok {
				switch es.Expression.(type) {
				case *ast.FunctionLiteral, *ast.ArrowFunctionLiteral:
					return compileRewritten(prg)
				}
			}
		}
		return nil, failure(StatusBadRequest, "The script body must be a JavaScript function.")
	}
	file, err := parser.ParseFile(nil, name, body, 0)
	if err != nil {
		return nil, syntaxFailure(name, err, exprErr)
	}
	entry := ""
	for _, st := range file.Body {
		if fd, ok := st.(*ast.FunctionDeclaration); ok && fd.Function.Name != nil {
			entry = string(fd.Function.Name.Name)
			break
		}
	}
	if entry == "" {
		return nil, failure(StatusBadRequest, "The script body must be a JavaScript function.")
	}
	prg, err = parser.ParseFile(nil, name, fmt.Sprintf("(function () {\n%s\n;return %s;\n})()", body, entry), 0)
	if err != nil {
		return nil, syntaxFailure(name, err, nil)
	}
	return compileRewritten(prg)
}

// syntaxFailure reports the syntax error of a body parsed as a script
// (asScript) and as a function expression (asExpr, wrapped in one line
// above: nil when not tried). The body is read as whichever got further
// before failing: an anonymous function's error is in its body, not at the
// parenthesis a declaration would need.
func syntaxFailure(name string, asScript, asExpr error) *Error {
	line, col, msg, ok := firstSyntaxError(asScript)
	if l, c, m, eok := firstSyntaxError(asExpr); eok && l > 1 && (!ok || l-1 > line || (l-1 == line && c > col)) {
		line, col, msg, ok = l-1, c, m, true
	}
	if !ok {
		return failure(StatusBadRequest, "Encountered exception while compiling Javascript. Exception = SyntaxError: "+asScript.Error())
	}
	return failure(StatusBadRequest, fmt.Sprintf("Encountered exception while compiling Javascript. Exception = SyntaxError: %s at line %d, column %d of %s",
		msg, line, col, strings.TrimSuffix(name, ".js")))
}

// firstSyntaxError returns the position and text of a parser error.
func firstSyntaxError(err error) (line, col int, msg string, ok bool) {
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return list[0].Position.Line, list[0].Position.Column, list[0].Message, true
	}
	var one *parser.Error
	if errors.As(err, &one) {
		return one.Position.Line, one.Position.Column, one.Message, true
	}
	return 0, 0, "", false
}

// compileRewritten rewrites the concatenations of prg and compiles it.
func compileRewritten(prg *ast.Program) (*goja.Program, error) {
	rewriteConcatenation(prg)
	p, err := goja.CompileAST(prg, false)
	if err != nil {
		return nil, failure(StatusBadRequest, "The script body is not valid JavaScript: "+err.Error())
	}
	return p, nil
}

// programCache keeps compiled programs by script id and version.
type programCache struct {
	mu    sync.RWMutex
	max   int
	items map[programKey]*cachedProgram
}

type programKey struct{ id, etag string }

type cachedProgram struct {
	body string
	prog *goja.Program
}

func newProgramCache(max int) *programCache {
	return &programCache{max: max, items: make(map[programKey]*cachedProgram)}
}

// get returns the compiled program of s, compiling it on a miss or when the
// cached body differs from s.Body.
func (c *programCache) get(s Script) (*goja.Program, error) {
	key := programKey{s.ID, s.ETag}
	c.mu.RLock()
	cp := c.items[key]
	c.mu.RUnlock()
	if cp != nil && cp.body == s.Body {
		return cp.prog, nil
	}
	prog, err := compile(scriptFileName(s.ID), s.Body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.items) >= c.max {
		for k := range c.items { // evict an arbitrary entry
			delete(c.items, k)
			break
		}
	}
	c.items[key] = &cachedProgram{body: s.Body, prog: prog}
	c.mu.Unlock()
	return prog, nil
}

func scriptFileName(id string) string {
	if id == "" {
		return "script.js"
	}
	return strings.ReplaceAll(id, "\n", " ") + ".js"
}
