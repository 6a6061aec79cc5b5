package engine

import (
	"strings"

	"github.com/orrery-db/orrery/query"
)

// msgNoCompositeIndex is the service's answer to an ORDER BY on several
// properties that no composite index of the container serves.
const msgNoCompositeIndex = "The order by query does not have a corresponding composite index that it can be served from."

// compositeIndexes reads a container's indexingPolicy.compositeIndexes:
// each index is its paths ("/a/b", quotes removed) with their orders
// (true for descending).
func compositeIndexes(props map[string]any) [][]compositePath {
	ip, _ := props["indexingPolicy"].(map[string]any)
	list, _ := ip["compositeIndexes"].([]any)
	var out [][]compositePath
	for _, e := range list {
		paths, _ := e.([]any)
		var ci []compositePath
		for _, p := range paths {
			m, _ := p.(map[string]any)
			path, _ := m["path"].(string)
			order, _ := m["order"].(string)
			ci = append(ci, compositePath{path: strings.ReplaceAll(path, `"`, ""), desc: strings.EqualFold(order, "descending")})
		}
		out = append(out, ci)
	}
	return out
}

// compositePath is one path of a composite index.
type compositePath struct {
	path string
	desc bool
}

// checkCompositeOrder refuses, as the service does, an ORDER BY on two or
// more properties that no composite index serves: one whose paths are the
// ORDER BY's, in its order, with the same directions or all of them
// reversed (the index read backwards). An aggregate's one row has no order
// to serve: the service answers it without the index.
func (c *Container) checkCompositeOrder(plan *query.Plan) *Error {
	if len(plan.OrderBy) < 2 || plan.Rank != nil || plan.Aggregates {
		return nil
	}
	for _, k := range plan.OrderBy {
		if k.Path == nil {
			return nil // not a property: the evaluation reports it
		}
	}
	if c.index == nil {
		return nil
	}
	for _, ci := range c.index.composite {
		if len(ci) < len(plan.OrderBy) {
			continue
		}
		same, reversed := true, true
		for i, k := range plan.OrderBy {
			if ci[i].path != indexPath(k.Path) {
				same, reversed = false, false
				break
			}
			same = same && ci[i].desc == k.Descending
			reversed = reversed && ci[i].desc != k.Descending
		}
		if same || reversed {
			return nil
		}
	}
	return &Error{Status: 400, Code: "BadRequest", Message: msgNoCompositeIndex}
}
