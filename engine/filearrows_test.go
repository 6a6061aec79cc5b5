package engine

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxArrowsBack is the most arrows between the engine's files that may
// point back up: none, no file of the engine is in a cycle with others.
// Keep it so: a name that a file below needs goes into that file or one
// below it, never raise the ceiling.
const maxArrowsBack = 0

// TestFilesPointBackUpNoMoreThanTheCeiling keeps the engine's files from
// growing more tangled. An arrow A → B means the file A uses a name (type,
// function, method, field, constant, variable) declared in the file B of
// the same package; it points back up when B reaches A through arrows,
// that is when A and B are in one cycle. Only the package's own files count,
// not its tests. Run with -v to see the count and the arrows.
func TestFilesPointBackUpNoMoreThanTheCeiling(t *testing.T) {
	if testOnShared || testOnPostgres {
		t.Skip("the layout of the source does not depend on the store")
	}
	arrows, back := engineFileArrows(t)
	t.Logf("%d of %d arrows between the engine's files point back up:", len(back), len(arrows))
	for _, a := range back {
		t.Logf("  %s → %s", a[0], a[1])
	}
	if len(back) > maxArrowsBack {
		t.Errorf("%d arrows between the engine's files point back up, more than the ceiling of %d: a new name is used against the direction of the files (see -v)", len(back), maxArrowsBack)
	}
}

// typeCheckEngine type-checks the package's non-test files: the package,
// its files' names in the order go list gives them, and what each name
// used refers to.
func typeCheckEngine(t *testing.T) (fset *token.FileSet, pkg *types.Package, names []string, info *types.Info) {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "-export", "-deps", ".").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	type listed struct {
		ImportPath string
		Dir        string
		Export     string
		GoFiles    []string
	}
	exports := map[string]string{}
	var self listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		self = p // the package named comes last
	}
	fset = token.NewFileSet()
	var files []*ast.File
	for _, name := range self.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(self.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})}
	info = &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err = conf.Check(self.ImportPath, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	return fset, pkg, self.GoFiles, info
}

// engineFileArrows type-checks the package's non-test files and returns
// every arrow between two of its files and those of them in a cycle.
func engineFileArrows(t *testing.T) (arrows, back [][2]string) {
	t.Helper()
	fset, pkg, goFiles, info := typeCheckEngine(t)
	fileOf := func(pos token.Pos) string { return filepath.Base(fset.Position(pos).Filename) }
	edges := map[string]map[string]bool{}
	add := func(from token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		a, b := fileOf(from), fileOf(obj.Pos())
		if a == b {
			return
		}
		if edges[a] == nil {
			edges[a] = map[string]bool{}
		}
		edges[a][b] = true
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		add(sel.Sel.Pos(), s.Obj())
	}
	// Tarjan's strongly connected components: an arrow points back up
	// when both its ends are in one component.
	names := append([]string(nil), goFiles...)
	sort.Strings(names)
	index, low, comp := map[string]int{}, map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next, ncomp := 0, 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(edges[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for _, v := range names {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	for _, a := range names {
		for _, b := range sortedKeys(edges[a]) {
			arrows = append(arrows, [2]string{a, b})
			if comp[a] == comp[b] {
				back = append(back, [2]string{a, b})
			}
		}
	}
	return arrows, back
}

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
