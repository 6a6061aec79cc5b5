package orrery

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/orrery-db/orrery"

// goList runs go list with a template over the patterns and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, msg)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestForbiddenImports fails when a package reaches across or up the layers:
// engine, query and storage never speak HTTP nor depend on the server; query
// and storage know nothing of documents' engine; the server knows nothing of
// storage; the wiring (instance) opens no store; orrerytest links no
// PostgreSQL; transfer reaches any endpoint through the SDK alone; the
// engine's search leaves (vector, fulltext), its key layout (keys), its
// partition key model (pkey), its RIDs (rids), its spatial cells
// (geocell) and its JSON document model (jsondoc) depend on no package of
// this module; coord depends on nothing of this
// module, so that a service importing it downloads and compiles nothing of
// the server.
func TestForbiddenImports(t *testing.T) {
	rules := []struct {
		patterns []string
		direct   []string // forbidden direct imports (prefix match)
		deps     []string // forbidden transitive dependencies (prefix match)
		allow    []string // dependencies deps forbids that are allowed (exact match)
	}{
		{
			patterns: []string{"./engine/...", "./query/...", "./storage/..."},
			direct:   []string{"net/http"},
			deps:     []string{module + "/server", module + "/cmd", module + "/orrerytest", module + "/compat", module + "/coord", module + "/examples"},
		},
		{
			patterns: []string{"./query/...", "./storage/..."},
			deps:     []string{module + "/engine"},
		},
		{
			patterns: []string{"./storage/..."},
			deps:     []string{module + "/query"},
		},
		{
			patterns: []string{"./server/..."},
			direct:   []string{module + "/storage"},
		},
		{
			// The wiring takes a store; it opens none itself.
			patterns: []string{"./instance"},
			deps: []string{module + "/storage/memory", module + "/storage/pebble", module + "/storage/postgres",
				module + "/cmd", module + "/orrerytest", module + "/compat", module + "/examples"},
		},
		{
			// A user's test binary links PostgreSQL's driver and launcher
			// only when it imports orrerytest/onpostgres.
			patterns: []string{"./orrerytest"},
			deps:     []string{module + "/storage/postgres", "github.com/jackc/pgx"},
		},
		{
			// transfer talks to any endpoint through the SDK only.
			patterns: []string{"./transfer/..."},
			deps:     []string{module + "/server", module + "/engine", module + "/storage", module + "/query", module + "/orrerytest"},
		},
		{
			// The fault rules decide and the server acts: they know
			// nothing of the module.
			patterns: []string{"./faults/..."},
			deps:     []string{module + "/"},
		},
		{
			// The API port's HTTP/1.x server is net/http's semantics
			// only: it knows nothing of the module.
			patterns: []string{"./server/h1serve"},
			deps:     []string{module + "/"},
		},
		{
			// Throughput budgets read the engine's offers and ranges only.
			patterns: []string{"./throughput/..."},
			direct:   []string{"net/http", module + "/server", module + "/storage"},
		},
		{
			// The search leaves know nothing of the engine, its storage,
			// the query language or each other: the engine adapts them.
			patterns: []string{"./engine/internal/vector/...", "./engine/internal/fulltext/..."},
			deps:     []string{module + "/"},
		},
		{
			// The key layout, the partition key model, the RIDs, the
			// spatial index's cells and the presence filter are bytes
			// and values only:
			// they know nothing of the engine, its storage or the
			// query language.
			patterns: []string{"./engine/internal/keys", "./engine/internal/pkey", "./engine/internal/rids", "./engine/internal/geocell", "./engine/internal/presence"},
			deps:     []string{module + "/"},
		},
		{
			// The JSON document model is bytes and values only: it
			// knows nothing of the engine, its storage, the query
			// language or the other leaves.
			patterns: []string{"./engine/internal/jsondoc"},
			deps:     []string{module + "/"},
		},
		{
			// The change feed reads storage through its interfaces,
			// keys through the key layout and writes JSON with the
			// document model; it knows nothing of the
			// engine, which adapts it, nor of the query language.
			patterns: []string{"./engine/internal/feed"},
			deps:     []string{module + "/"},
			allow:    []string{module + "/engine/internal/keys", module + "/engine/internal/jsondoc", module + "/storage"},
		},
		{
			// The search indexes' keeping (local, shared, rebuild,
			// catch-up) reads storage through its interfaces, keys
			// through the key layout and documents with the document
			// model, over the two index leaves; it knows nothing of the
			// engine, which adapts it, nor of the query language.
			patterns: []string{"./engine/internal/searchindex"},
			deps:     []string{module + "/"},
			allow:    []string{module + "/engine/internal/keys", module + "/engine/internal/jsondoc", module + "/engine/internal/vector", module + "/engine/internal/fulltext", module + "/storage"},
		},
		{
			// A container's policies (indexing, unique keys) and its
			// partition key ranges are values read from its properties:
			// they know nothing of the engine, its storage, the query
			// language or the other leaves.
			patterns: []string{"./engine/internal/indexpolicy", "./engine/internal/uniquepolicy", "./engine/internal/pkranges"},
			deps:     []string{module + "/"},
		},
	}
	// The rules must reach these packages: a pattern that matches nothing
	// (a package moved or renamed) would otherwise pass in silence.
	mustCover := map[string]bool{}
	for _, p := range []string{"/engine", "/engine/script", "/engine/internal/vector", "/engine/internal/fulltext", "/engine/internal/keys", "/engine/internal/pkey", "/engine/internal/rids", "/engine/internal/geocell", "/engine/internal/feed", "/engine/internal/presence", "/engine/internal/indexpolicy", "/engine/internal/uniquepolicy", "/engine/internal/pkranges", "/engine/internal/jsondoc", "/engine/internal/searchindex", "/query", "/storage", "/storage/memory", "/storage/pebble", "/storage/postgres", "/storage/placed", "/server", "/instance", "/orrerytest", "/transfer", "/faults", "/throughput"} {
		mustCover[module+p] = false
	}
	for _, r := range rules {
		for _, line := range goList(t, append([]string{"-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, r.patterns...)...) {
			fields := strings.Fields(line)
			if _, ok := mustCover[fields[0]]; ok {
				mustCover[fields[0]] = true
			}
			for _, imp := range fields[1:] {
				for _, bad := range r.direct {
					if under(imp, bad) {
						t.Errorf("%s imports %s", fields[0], imp)
					}
				}
			}
		}
		for _, line := range goList(t, append([]string{"-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, r.patterns...)...) {
			fields := strings.Fields(line)
			for _, dep := range fields[1:] {
				if slices.Contains(r.allow, dep) {
					continue
				}
				for _, bad := range r.deps {
					if under(dep, bad) {
						t.Errorf("%s depends on %s", fields[0], dep)
					}
				}
			}
		}
	}
	for p, seen := range mustCover {
		if !seen {
			t.Errorf("no rule checks %s", p)
		}
	}
}

// under reports whether the package path is the package prefix or one
// under it; a prefix ending in "/" (module + "/") names every package
// under it and none other.
func under(path, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// TestCoordStandsAlone fails when a package of the coord module (tests
// aside) depends on any package of this module, or on the server's engines.
func TestCoordStandsAlone(t *testing.T) {
	forbidden := []string{"github.com/cockroachdb/pebble", "github.com/dop251/goja", "github.com/jackc/pgx"}
	lines := goList(t, "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./coord/...")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("go list found no coord packages")
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(dep, module+"/coord") {
				t.Errorf("%s depends on %s", fields[0], dep)
			}
			for _, bad := range forbidden {
				if strings.HasPrefix(dep, bad) {
					t.Errorf("%s depends on %s", fields[0], dep)
				}
			}
		}
	}
}
