package engine

import (
	"go/types"
	"path/filepath"
	"sort"
	"testing"
)

// maxEngineUnexportedMethods is how many unexported methods *Engine may
// still declare. The engine's work belongs to its parts (the catalog, the
// seam, the item writer, the script host, the rebuilder, the sweeper, the
// search indexes...), each holding the narrow things it needs; *Engine
// keeps the public API, which delegates to them. None is left: keep it so.
const maxEngineUnexportedMethods = 0

// TestEngineMethodsAreOnlyThePublicAPI keeps work off *Engine: a method
// that is not part of the public API belongs on the part that owns that
// work. It counts the methods declared on Engine (not those promoted from
// its embedded catalog, which are the catalog's) that are unexported. Run
// with -v to see them.
func TestEngineMethodsAreOnlyThePublicAPI(t *testing.T) {
	if testOnShared || testOnPostgres {
		t.Skip("the layout of the source does not depend on the store")
	}
	fset, pkg, _, _ := typeCheckEngine(t)
	obj := pkg.Scope().Lookup("Engine")
	if obj == nil {
		t.Fatal("the package declares no Engine")
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		t.Fatalf("Engine is a %T, not a named type", obj.Type())
	}
	var exported, unexported []string
	for i := range named.NumMethods() {
		m := named.Method(i)
		where := filepath.Base(fset.Position(m.Pos()).Filename) + " " + m.Name()
		if m.Exported() {
			exported = append(exported, where)
		} else {
			unexported = append(unexported, where)
		}
	}
	sort.Strings(unexported)
	t.Logf("*Engine declares %d exported and %d unexported methods:", len(exported), len(unexported))
	for _, m := range unexported {
		t.Logf("  %s", m)
	}
	if len(unexported) > maxEngineUnexportedMethods {
		t.Errorf("*Engine declares %d unexported methods, more than the ceiling of %d: move the work onto the part that owns it, and let the public API delegate (see -v)", len(unexported), maxEngineUnexportedMethods)
	}
}
