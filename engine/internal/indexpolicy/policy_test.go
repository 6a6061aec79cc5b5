package indexpolicy

import (
	"slices"
	"testing"
)

func TestIndexingPolicyPaths(t *testing.T) {
	p := New(map[string]any{"indexingPolicy": map[string]any{
		"includedPaths": []any{map[string]any{"path": "/*"}, map[string]any{"path": "/big/keep/?"}},
		"excludedPaths": []any{map[string]any{"path": "/big/*"}, map[string]any{"path": "/\"_etag\"/?"}},
	}})
	for path, want := range map[string]bool{"/a": true, "/a/b": true, "/big": false, "/big/x": false, "/big/keep": true, "/_etag": false} {
		if got := p.Indexes(path); got != want {
			t.Errorf("indexes(%s) = %v, want %v", path, got, want)
		}
	}
	only := New(map[string]any{"indexingPolicy": map[string]any{
		"includedPaths": []any{map[string]any{"path": "/name/?"}},
		"excludedPaths": []any{map[string]any{"path": "/*"}},
	}})
	if !only.Indexes("/name") || only.Indexes("/other") {
		t.Error("include-one-path policy")
	}
}

func TestSpatialPathsComeFromSpatialIndexesAndLegacyKinds(t *testing.T) {
	p := New(map[string]any{"indexingPolicy": map[string]any{
		"spatialIndexes": []any{map[string]any{"path": "/loc/*"}},
		"includedPaths": []any{
			map[string]any{"path": "/*"},
			map[string]any{"path": "/area/?", "indexes": []any{map[string]any{"kind": "Spatial"}}},
		},
	}})
	if !slices.Equal(p.Spatial.Paths, []string{"/area/?", "/loc/*"}) {
		t.Fatalf("spatial paths = %v", p.Spatial.Paths)
	}
	if !p.Spatial.Covers("/loc/point") || !p.Spatial.Covers("/area") || p.Spatial.Covers("/other") {
		t.Error("spatial coverage")
	}
	if New(map[string]any{}).Spatial != nil {
		t.Error("a policy without spatial indexes has a spatial policy")
	}
}

func TestCompositeIndexesKeepPathsAndDirections(t *testing.T) {
	got := CompositeIndexes(map[string]any{"indexingPolicy": map[string]any{
		"compositeIndexes": []any{[]any{
			map[string]any{"path": "/\"name\""},
			map[string]any{"path": "/age", "order": "Descending"},
		}},
	}})
	want := [][]CompositePath{{{Path: "/name"}, {Path: "/age", Desc: true}}}
	if len(got) != 1 || !slices.Equal(got[0], want[0]) {
		t.Errorf("composite indexes = %v, want %v", got, want)
	}
}

func TestNoneModeIndexesNothing(t *testing.T) {
	p := New(map[string]any{"indexingPolicy": map[string]any{
		"indexingMode":  "none",
		"includedPaths": []any{map[string]any{"path": "/*"}},
	}})
	if p.Indexes("/a") || p.IndexesComputed("a") {
		t.Error("indexingMode none indexes a path")
	}
}
