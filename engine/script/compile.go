package script

import (
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

// Validate compiles a script body and reports, as a 400 *Error, why it cannot
// be run. The engine may call it when a script is created or replaced.
func Validate(body string) error {
	_, err := compile("script", body)
	return err
}

// compile turns a body into a program whose completion value is the entry
// function: the body itself when it is one function expression, otherwise
// the first function the body declares. Its concatenations are rewritten
// (see rewrite.go).
func compile(name, body string) (*goja.Program, error) {
	expr := strings.TrimRight(body, " \t\r\n;")
	if prg, err := parser.ParseFile(nil, name, "(\n"+expr+"\n)", 0); err == nil {
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
		return nil, failure(StatusBadRequest, "The script body is not valid JavaScript: "+err.Error())
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
	prg, err := parser.ParseFile(nil, name, fmt.Sprintf("(function () {\n%s\n;return %s;\n})()", body, entry), 0)
	if err != nil {
		return nil, failure(StatusBadRequest, "The script body is not valid JavaScript: "+err.Error())
	}
	return compileRewritten(prg)
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
