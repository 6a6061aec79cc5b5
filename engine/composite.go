package engine

import (
	"strings"

	"github.com/orrery-db/orrery/engine/internal/indexpolicy"
	"github.com/orrery-db/orrery/query"
)

// msgNoCompositeIndex is the service's answer to an ORDER BY on several
// properties that no composite index of the container serves.
const msgNoCompositeIndex = "The order by query does not have a corresponding composite index that it can be served from."

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
	for _, ci := range c.index.Composite {
		if len(ci) < len(plan.OrderBy) {
			continue
		}
		same, reversed := true, true
		for i, k := range plan.OrderBy {
			if ci[i].Path != indexpolicy.Path(k.Path) {
				same, reversed = false, false
				break
			}
			same = same && ci[i].Desc == k.Descending
			reversed = reversed && ci[i].Desc != k.Descending
		}
		if same || reversed {
			return nil
		}
	}
	return &Error{Status: 400, Code: "BadRequest", Message: msgNoCompositeIndex}
}

// indexUtilization describes the indexes a plan used (ix, order) and the
// ones its filters and ORDER BY would have used but the container's
// indexing policy lacks.
func (c *Container) indexUtilization(plan *query.Plan, used []query.Filter, orderUsed bool) *IndexUtilization {
	u := &IndexUtilization{UtilizedSingle: []IndexUse{}, PotentialSingle: []IndexUse{}, PotentialComposite: []CompositeIndexUse{}}
	seen := map[string]bool{}
	for _, f := range used {
		spec := indexpolicy.Path(f.Path) + "/?"
		if !seen[spec] {
			seen[spec] = true
			u.UtilizedSingle = append(u.UtilizedSingle, IndexUse{Spec: spec, Filter: filterText(f)})
		}
	}
	if orderUsed && len(plan.OrderBy) == 1 {
		spec := indexpolicy.Path(plan.OrderBy[0].Path) + "/?"
		if !seen[spec] {
			seen[spec] = true
			u.UtilizedSingle = append(u.UtilizedSingle, IndexUse{Spec: spec, Filter: orderText(plan.OrderBy[0])})
		}
	}
	indexed := func(path []string) bool {
		return len(path) > 0 && c.index != nil && !c.indexRetired.Load() && c.index.Indexes(indexpolicy.Path(path))
	}
	for _, f := range plan.Filters {
		spec := indexpolicy.Path(f.Path) + "/?"
		if !seen[spec] && !indexed(f.Path) {
			seen[spec] = true
			u.PotentialSingle = append(u.PotentialSingle, IndexUse{Spec: spec, Filter: filterText(f)})
		}
	}
	switch {
	case len(plan.OrderBy) == 1 && plan.OrderBy[0].Path != nil:
		spec := indexpolicy.Path(plan.OrderBy[0].Path) + "/?"
		if !seen[spec] && !indexed(plan.OrderBy[0].Path) {
			u.PotentialSingle = append(u.PotentialSingle, IndexUse{Spec: spec, Filter: orderText(plan.OrderBy[0])})
		}
	case len(plan.OrderBy) > 1:
		// The service needs a composite index for an ORDER BY on several
		// paths; Orrery has none and sorts instead.
		var specs []string
		for _, k := range plan.OrderBy {
			if k.Path == nil {
				specs = nil
				break
			}
			specs = append(specs, orderText(k))
		}
		if specs != nil {
			u.PotentialComposite = append(u.PotentialComposite, CompositeIndexUse{Specs: specs})
		}
	}
	return u
}

// filterText renders a filter as the service's index metrics name it,
// e.g. (ROOT.a = "x").
func filterText(f query.Filter) string {
	vals := make([]string, len(f.Values))
	for i, v := range f.Values {
		vals[i] = string(v)
	}
	return "(ROOT." + strings.Join(f.Path, ".") + " " + f.Op.String() + " " + strings.Join(vals, ", ") + ")"
}

func orderText(k query.OrderKey) string {
	dir := "ASC"
	if k.Descending {
		dir = "DESC"
	}
	return indexpolicy.Path(k.Path) + " " + dir
}
