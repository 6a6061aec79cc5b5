package engine

import (
	"errors"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/query"
)

// Computed properties (the container's computedProperties) are evaluated by
// queries that read them, never stored in items nor shown by SELECT * or
// point reads. A computed property is indexed only when the indexing policy
// names its path explicitly (/name/? or /name/*), as in the service: the
// root wildcard does not cover it. A persisted property of the same name is
// not indexed.

// parseComputedProperties reads and checks a container's computed
// properties; ip is its indexing policy, which decides the indexed ones.
func parseComputedProperties(props map[string]any, ip *indexpolicy.Policy) ([]*query.ComputedProperty, *Error) {
	raw, ok := props["computedProperties"]
	if !ok || raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, BadRequest("The computedProperties property must be an array of {\"name\", \"query\"} objects.")
	}
	if len(list) > query.MaxComputedProperties {
		return nil, BadRequest("The number of computed properties (%d) exceeds the maximum of %d.", len(list), query.MaxComputedProperties)
	}
	var out []*query.ComputedProperty
	seen := map[string]bool{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, BadRequest("Each computed property must be an object with a name and a query.")
		}
		name, _ := m["name"].(string)
		text, _ := m["query"].(string)
		if seen[name] {
			return nil, BadRequest("Computed property '%s' is defined more than once: computed property names must be unique.", name)
		}
		seen[name] = true
		cp, err := query.ParseComputedProperty(name, text)
		if err != nil {
			var qe *query.Error
			if errors.As(err, &qe) {
				return nil, BadRequest("%s", qe.Message)
			}
			return nil, BadRequest("%v", err)
		}
		cp.Indexed = ip.IndexesComputed(name)
		out = append(out, cp)
	}
	for _, cp := range out {
		for _, other := range out {
			if other != cp && cp.Uses(other.Name) {
				return nil, BadRequest("Computed property '%s' uses computed property '%s': a computed property cannot use other computed properties.", cp.Name, other.Name)
			}
		}
	}
	return out, nil
}

// computedByName returns the container's computed property name, or nil.
func (c *Container) computedByName(name string) *query.ComputedProperty {
	for _, cp := range c.computed {
		if cp.Name == name {
			return cp
		}
	}
	return nil
}

// parseQuery parses a query on c: references to its computed properties
// read their expressions.
func (c *Container) parseQuery(text string) (*query.Query, error) {
	if len(c.computed) == 0 {
		return parseQuery(text)
	}
	q, err := query.ParseComputed(text, c.computed)
	if err != nil {
		return nil, parseError(err)
	}
	return q, nil
}

// computedChanged reports whether a replace changes the computed
// properties or which of them are indexed, which rebuilds the index.
func computedChanged(props map[string]any, prev *Container) bool {
	cur, err := parseComputedProperties(props, indexpolicy.New(props))
	if err != nil || len(cur) != len(prev.computed) {
		return true
	}
	for i, cp := range cur {
		old := prev.computed[i]
		if cp.Name != old.Name || cp.Query != old.Query || cp.Indexed != old.Indexed {
			return true
		}
	}
	return false
}
