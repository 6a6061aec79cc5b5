package indexpolicy

import "strings"

// CompositeIndexes reads a container's indexingPolicy.compositeIndexes:
// each index is its paths ("/a/b", quotes removed) with their orders.
func CompositeIndexes(props map[string]any) [][]CompositePath {
	ip, _ := props["indexingPolicy"].(map[string]any)
	list, _ := ip["compositeIndexes"].([]any)
	var out [][]CompositePath
	for _, e := range list {
		paths, _ := e.([]any)
		var ci []CompositePath
		for _, p := range paths {
			m, _ := p.(map[string]any)
			path, _ := m["path"].(string)
			order, _ := m["order"].(string)
			ci = append(ci, CompositePath{Path: strings.ReplaceAll(path, `"`, ""), Desc: strings.EqualFold(order, "descending")})
		}
		out = append(out, ci)
	}
	return out
}

// CompositePath is one path of a composite index.
type CompositePath struct {
	Path string
	Desc bool // descending
}
