package main

import (
	"embed"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strings"
)

// The app's own source, so every scenario can link to the code that runs it
// without a network connection.
//
//go:embed *.go
var sourceFiles embed.FS

// codeLine is one line of a source file; Anchor names the function that
// starts there.
type codeLine struct {
	N      int
	Text   string
	Anchor string
}

// codeView is the source page's data.
type codeView struct {
	File  string
	Lines []codeLine
	Files []string
}

// code shows one of the app's source files with an anchor per function.
func (a *App) code(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	src, err := sourceFiles.ReadFile(name)
	if err != nil || strings.HasSuffix(name, "_test.go") {
		a.fail(w, r, http.StatusNotFound, "There is no such source file.")
		return
	}
	anchors := map[int]string{}
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, name, src, parser.ParseComments); err == nil {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				start := fd.Pos()
				if fd.Doc != nil {
					start = fd.Doc.Pos()
				}
				anchors[fset.Position(start).Line] = fd.Name.Name
			}
		}
	}
	v := codeView{File: name}
	for i, text := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
		v.Lines = append(v.Lines, codeLine{N: i + 1, Text: strings.ReplaceAll(text, "\t", "    "), Anchor: anchors[i+1]})
	}
	entries, _ := sourceFiles.ReadDir(".")
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "_test.go") {
			v.Files = append(v.Files, e.Name())
		}
	}
	a.render(w, r, http.StatusOK, "code", name, "code", v)
}
