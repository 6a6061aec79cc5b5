package engine

import (
	"slices"
	"strings"

	"github.com/orrery-db/orrery/query"
)

// partitionKeySegments returns the property path segments of each of the
// container's partition key paths ("/a/b" gives a, b).
// They are computed once, as the container is loaded (pkSegments); the
// caller only reads them.
func (c *Container) partitionKeySegments() [][]string {
	if c.pkSegs != nil {
		return c.pkSegs
	}
	return pathSegments(c.pk.Paths)
}

// pathSegments is partitionKeySegments for the paths given.
func pathSegments(paths []string) [][]string {
	out := make([][]string, len(paths))
	for i, p := range paths {
		for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			out[i] = append(out[i], strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~"))
		}
	}
	return out
}

// pinnedPartitionKey returns the partition key a query's filter pins: an
// equality with one scalar on every partition key path, or on a
// hierarchical key on its leading paths (a prefix, see queryScope). Such a
// query reads one logical partition (or the partitions under the prefix),
// so it needs no query plan even with ORDER BY, aggregates, DISTINCT, TOP
// or OFFSET.
func (c *Container) pinnedPartitionKey(plan *query.Plan) (PartitionKey, bool) {
	var pk PartitionKey
	for _, segs := range c.partitionKeySegments() {
		v, ok := pinnedValue(plan.Filters, segs)
		if !ok {
			break
		}
		pk = append(pk, v)
	}
	switch {
	case len(pk) == len(c.pk.Paths):
		return pk, true
	case len(pk) > 0 && c.pk.Kind == "MultiHash":
		return pk, true
	}
	return nil, false
}

// pinnedValue finds an equality filter that pins path to one scalar.
func pinnedValue(filters []query.Filter, path []string) (PartitionKeyValue, bool) {
	for _, f := range filters {
		if f.Op != query.FilterEq || len(f.Values) != 1 || !slices.Equal(f.Path, path) {
			continue
		}
		raw := f.Values[0]
		if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' {
			continue
		}
		v, err := parsePartitionKeyComponent(raw)
		if err != nil {
			continue
		}
		return v, true
	}
	return PartitionKeyValue{}, false
}

// withoutPartitionKeyFilters drops the equality filters on partition key
// paths, which a query scoped by its partition key gains nothing from.
func (c *Container) withoutPartitionKeyFilters(filters []query.Filter) []query.Filter {
	paths := c.partitionKeySegments()
	onKey := func(f query.Filter) bool {
		for _, p := range paths {
			if f.Op == query.FilterEq && slices.Equal(f.Path, p) {
				return true
			}
		}
		return false
	}
	if len(filters) > 0 && !slices.ContainsFunc(filters, onKey) {
		// None dropped: the filters themselves, which no one appends to.
		return filters[:len(filters):len(filters)]
	}
	var out []query.Filter
	for _, f := range filters {
		if !onKey(f) {
			out = append(out, f)
		}
	}
	return out
}
