package indexpolicy

import (
	"slices"
	"strings"
)

// Path renders a property path as the index names it: its segments
// joined by '/', with '~' and '/' escaped as in JSON pointers.
func Path(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// Policy decides which property paths a container indexes, from its
// indexingPolicy: the most specific included or excluded path wins.
type Policy struct {
	None     bool
	Included []string
	Excluded []string
	// All: every path but /_etag is indexed (the default policy: /* in,
	// at most /"_etag"/? out), which the write path need not ask per path.
	All bool
	// Spatial lists the paths with a spatial index; nil: none.
	Spatial *Spatial
	// Composite are the composite indexes, which multi-property ORDER BY
	// queries need.
	Composite [][]CompositePath
}

// New reads the indexing policy of a container's properties.
func New(props map[string]any) *Policy {
	ip, _ := props["indexingPolicy"].(map[string]any)
	p := &Policy{Composite: CompositeIndexes(props)}
	if mode, _ := ip["indexingMode"].(string); strings.EqualFold(mode, "none") {
		p.None = true
		return p
	}
	read := func(name string) []string {
		var out []string
		list, _ := ip[name].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				if s, ok := m["path"].(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}
	p.Spatial = NewSpatial(ip)
	p.Included = read("includedPaths")
	p.Excluded = read("excludedPaths")
	p.All = slices.ContainsFunc(p.Included, func(pat string) bool { return strings.ReplaceAll(pat, `"`, "") == "/*" }) &&
		!slices.ContainsFunc(p.Excluded, func(pat string) bool { return strings.ReplaceAll(pat, `"`, "") != "/_etag/?" })
	return p
}

// Equal reports whether two policies index the same paths.
func (p *Policy) Equal(q *Policy) bool {
	return p.None == q.None && slices.Equal(p.Included, q.Included) && slices.Equal(p.Excluded, q.Excluded) && p.Spatial.Equal(q.Spatial)
}

// Covers reports whether a policy path pattern ("/*", "/a/?", "/a/*",
// "/\"_etag\"/?") matches the scalar at path, and how specific the match
// is (-1 when it does not match).
func Covers(pattern, path string) (bool, int) {
	pattern = strings.ReplaceAll(pattern, `"`, "")
	if pattern == "/" {
		pattern = "/*" // the legacy form
	}
	switch {
	case strings.HasSuffix(pattern, "/*"):
		base := strings.TrimSuffix(pattern, "/*")
		if base == "" || path == base || strings.HasPrefix(path, base+"/") {
			return true, len(base)
		}
	case strings.HasSuffix(pattern, "/?"):
		if path == strings.TrimSuffix(pattern, "/?") {
			return true, len(pattern)
		}
	case pattern == path:
		return true, len(pattern)
	}
	return false, -1
}

// Indexes reports whether the scalar at path is indexed.
func (p *Policy) Indexes(path string) bool {
	if p == nil || p.None {
		return false
	}
	best, in := -1, false
	for _, pat := range p.Included {
		if ok, n := Covers(pat, path); ok && n > best {
			best, in = n, true
		}
	}
	for _, pat := range p.Excluded {
		if ok, n := Covers(pat, path); ok && n >= best {
			best, in = n, false
		}
	}
	return in
}

// IndexesComputed reports whether the policy indexes the computed property
// name: an included path names it explicitly, and no exclusion wins. The
// root wildcard does not cover a computed property, as in the service.
func (p *Policy) IndexesComputed(name string) bool {
	if p == nil || p.None {
		return false
	}
	path := "/" + name
	for _, pat := range p.Included {
		pat = strings.ReplaceAll(pat, `"`, "")
		if pat == path+"/?" || pat == path+"/*" {
			return p.Indexes(path)
		}
	}
	return false
}
