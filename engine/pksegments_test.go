package engine

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/orrery-db/orrery/query"
)

// TestAQueryPinnedToOnePartitionByItsFilterNeedsNoCrossPartitionRight holds
// the partition key segments a container keeps from its loading (nested
// and hierarchical paths) to its paths: a query that
// names no partition key but pins one with its filter is answered from that
// partition even when cross-partition queries are disabled.
func TestAQueryPinnedToOnePartitionByItsFilterNeedsNoCrossPartitionRight(t *testing.T) {
	ctx := t.Context()
	store := newTestStore(t)
	t.Cleanup(func() { store.Close() })
	e, err := Open(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.CreateDatabase(ctx, []byte(`{"id":"db"}`), nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ body, item, query string }{
		{`{"id":"flat","partitionKey":{"paths":["/a"]}}`, `{"id":"1","a":"v"}`, `SELECT c.id FROM c WHERE c.a = "v"`},
		{`{"id":"deep","partitionKey":{"paths":["/x/y/z"]}}`, `{"id":"1","x":{"y":{"z":"v"}}}`, `SELECT c.id FROM c WHERE c.x.y.z = "v"`},
		{`{"id":"nested","partitionKey":{"paths":["/x/y"]}}`, `{"id":"1","x":{"y":1}}`, `SELECT c.id FROM c WHERE c.x.y = 1`},
		{`{"id":"h2","partitionKey":{"paths":["/p","/q"],"kind":"MultiHash","version":2}}`, `{"id":"1","p":"a","q":"b"}`, `SELECT c.id FROM c WHERE c.p = "a" AND c.q = "b"`},
	}
	for _, tc := range cases {
		var def struct{ ID string }
		_ = json.Unmarshal([]byte(tc.body), &def)
		if _, err := e.CreateContainer(ctx, "db", []byte(tc.body), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateItem(ctx, &ItemRequest{Database: "db", Container: def.ID, Body: []byte(tc.item)}); err != nil {
			t.Fatalf("%s: %v", def.ID, err)
		}
		res, err := e.QueryItems(ctx, &QueryRequest{Database: "db", Container: def.ID, Query: tc.query, CrossPartitionDisabled: true})
		if err != nil {
			t.Fatalf("%s: %s: %v", def.ID, tc.query, err)
		}
		if len(res.Items) != 1 || string(res.Items[0]) != `{"id":"1"}` {
			t.Fatalf("%s: %s gave %s", def.ID, tc.query, res.Items)
		}
	}
}

// withoutPartitionKeyFiltersAsBefore is withoutPartitionKeyFilters as it
// was, always building a new slice.
func withoutPartitionKeyFiltersAsBefore(paths [][]string, filters []query.Filter) []query.Filter {
	var out []query.Filter
	for _, f := range filters {
		onKey := false
		for _, p := range paths {
			if f.Op == query.FilterEq && slices.Equal(f.Path, p) {
				onKey = true
			}
		}
		if !onKey {
			out = append(out, f)
		}
	}
	return out
}

// TestFiltersOnThePartitionKeyAreTheOnlyOnesDropped holds
// withoutPartitionKeyFilters, which hands back the filters themselves when
// none is on the key, to the filtering it replaced, over random filters.
func TestFiltersOnThePartitionKeyAreTheOnlyOnesDropped(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	c := &Container{pk: PartitionKeyDefinition{Paths: []string{"/a", "/b/c"}, Kind: "MultiHash", Version: 2}}
	c.pkSegs = pathSegments(c.pk.Paths)
	paths := [][]string{{"a"}, {"b", "c"}, {"b"}, {"c"}, {"a", "b"}}
	ops := []query.FilterOp{query.FilterEq, query.FilterIn, query.FilterLt, query.FilterGe}
	for range 20000 {
		var filters []query.Filter
		if r.IntN(8) != 0 {
			filters = []query.Filter{}
		}
		for range r.IntN(4) {
			filters = append(filters, query.Filter{Path: paths[r.IntN(len(paths))], Op: ops[r.IntN(len(ops))], Values: []json.RawMessage{json.RawMessage(`1`)}})
		}
		want := withoutPartitionKeyFiltersAsBefore(c.partitionKeySegments(), filters)
		got := c.withoutPartitionKeyFilters(filters)
		if len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: kept %v, before %v", filters, got, want)
		}
		if len(got) > 0 && cap(got) != len(got) {
			t.Fatalf("%v: kept filters with room to append into the plan's", filters)
		}
	}
}
