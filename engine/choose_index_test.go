package engine

import (
	"reflect"
	"testing"

	"github.com/orrery-db/orrery/query"
)

// TestTheChosenIndexCarriesExactlyTheFilterItsRangesServe holds the index
// source chooseIndex picks to the filter that ranks best among those an
// index serves (the first of equal rank): its one filter, equal to it, with
// no room to append into the plan's filters it is cut from.
func TestTheChosenIndexCarriesExactlyTheFilterItsRangesServe(t *testing.T) {
	ctx := t.Context()
	e := newMemEngine(t)
	c, _ := e.Container(ctx, "db", "c")
	for _, tt := range []struct {
		q    string
		want int // index of the filter in plan.Filters
	}{
		{"SELECT * FROM c WHERE c.a = 1", 0},
		{"SELECT * FROM c WHERE c.a > 1 AND c.b = 2", 1},
		{"SELECT * FROM c WHERE c.a IN (1, 2) AND c.b = 'x' AND c.d = 3", 1},
		{"SELECT * FROM c WHERE STARTSWITH(c.name, 'ab') AND c.a.b IN ('x','y')", 1},
		{"SELECT * FROM c WHERE c.a > 1 AND c.b < 2", 0},
	} {
		q, err := query.Parse(tt.q)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := q.Plan(nil)
		if err != nil {
			t.Fatal(err)
		}
		ix, ok := c.chooseIndex(plan)
		if !ok {
			t.Fatalf("%s: no index chosen", tt.q)
		}
		want := []query.Filter{plan.Filters[tt.want]}
		if !reflect.DeepEqual(ix.filters, want) || cap(ix.filters) != 1 {
			t.Fatalf("%s: chose %v (cap %d), want %v of %v", tt.q, ix.filters, cap(ix.filters), want, plan.Filters)
		}
	}
}
