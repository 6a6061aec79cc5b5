package indexpolicy

import (
	"slices"
	"strings"
)

// Spatial lists the path patterns ("/loc/?", "/loc/*") with a spatial
// index.
type Spatial struct {
	Paths []string
}

// NewSpatial reads the spatial indexes of an indexing policy: its
// spatialIndexes, and the included paths with a legacy index of kind
// Spatial. It is nil when there are none.
func NewSpatial(ip map[string]any) *Spatial {
	p := &Spatial{}
	list, _ := ip["spatialIndexes"].([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			if s, ok := m["path"].(string); ok {
				p.Paths = append(p.Paths, strings.ReplaceAll(s, `"`, ""))
			}
		}
	}
	inc, _ := ip["includedPaths"].([]any)
	for _, e := range inc {
		m, _ := e.(map[string]any)
		s, ok := m["path"].(string)
		if !ok {
			continue
		}
		idx, _ := m["indexes"].([]any)
		for _, x := range idx {
			if k, _ := x.(map[string]any); k != nil && strings.EqualFold(stringOf(k["kind"]), "Spatial") {
				p.Paths = append(p.Paths, strings.ReplaceAll(s, `"`, ""))
				break
			}
		}
	}
	slices.Sort(p.Paths)
	p.Paths = slices.Compact(p.Paths)
	if len(p.Paths) == 0 {
		return nil
	}
	return p
}

func stringOf(v any) string { s, _ := v.(string); return s }

// Equal reports whether two spatial policies list the same paths.
func (p *Spatial) Equal(q *Spatial) bool {
	if p == nil || q == nil {
		return p == q
	}
	return slices.Equal(p.Paths, q.Paths)
}

// Covers reports whether a spatial index holds the geometry at path.
func (p *Spatial) Covers(path string) bool {
	if p == nil {
		return false
	}
	for _, pat := range p.Paths {
		if ok, _ := Covers(pat, path); ok {
			return true
		}
	}
	return false
}
