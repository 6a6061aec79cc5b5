package query

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		query     string
		params    map[string]json.RawMessage
		streaming bool
		needsPlan bool
		top       int
		offset    int
		limit     int
		orderBy   []OrderKey
		filters   []string
	}{
		{query: "SELECT * FROM c", streaming: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT VALUE 1 + 2", top: -1, offset: -1, limit: -1},
		{query: "SELECT VALUE COUNT(1) FROM c", needsPlan: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT DISTINCT c.a FROM c", needsPlan: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT c.a, COUNT(1) AS n FROM c GROUP BY c.a", needsPlan: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT TOP 5 * FROM c", streaming: true, needsPlan: true, top: 5, offset: -1, limit: -1},
		{query: "SELECT * FROM c OFFSET 2 LIMIT @n", params: map[string]json.RawMessage{"@n": json.RawMessage("7")},
			streaming: true, needsPlan: true, top: -1, offset: 2, limit: 7},
		{query: "SELECT * FROM c ORDER BY c.a.b DESC, c.x, c.arr[0]", needsPlan: true, top: -1, offset: -1, limit: -1,
			orderBy: []OrderKey{{Path: []string{"a", "b"}, Descending: true}, {Path: []string{"x"}}, {}}},
		{query: "SELECT t FROM c JOIN t IN c.tags ORDER BY t", needsPlan: true, top: -1, offset: -1, limit: -1,
			orderBy: []OrderKey{{}}},
		{query: "SELECT * FROM c WHERE c.id = 'x' AND c.n > 3 AND 5 >= c.m AND c.s BETWEEN 1 AND @hi",
			params:    map[string]json.RawMessage{"@hi": json.RawMessage("9")},
			streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`id = "x"`, `n > 3`, `m <= 5`, `s BETWEEN 1,9`}},
		{query: `SELECT * FROM root r WHERE r["a"]["b"] = @p AND STARTSWITH(r.id, 'order-') AND r.k IN (1, 2)`,
			params:    map[string]json.RawMessage{"@p": json.RawMessage(`{"z":true}`)},
			streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`a.b = {"z":true}`, `id STARTSWITH "order-"`, `k IN 1,2`}},
		{query: "SELECT * FROM c WHERE (c.id = @param_id0 AND c.pk = @param_pk00) OR (c.id = @param_id1 AND c.pk = @param_pk10)",
			params: map[string]json.RawMessage{"@param_id0": json.RawMessage(`"a"`), "@param_pk00": json.RawMessage(`"p"`),
				"@param_id1": json.RawMessage(`"b"`), "@param_pk10": json.RawMessage(`"q"`)},
			streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`id IN "a","b"`}},
		{query: "SELECT * FROM c WHERE c.myPk = @pk0 AND c.id IN (@param_id0, @param_id1)",
			params: map[string]json.RawMessage{"@pk0": json.RawMessage(`"p"`), "@param_id0": json.RawMessage(`"a"`),
				"@param_id1": json.RawMessage(`"b"`)},
			streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`myPk = "p"`, `id IN "a","b"`}},
		{query: "SELECT * FROM c WHERE c.id = @id AND c.pkey = @pkey",
			params:    map[string]json.RawMessage{"@id": json.RawMessage(`"item-1"`), "@pkey": json.RawMessage(`"k"`)},
			streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`id = "item-1"`, `pkey = "k"`}},
		{query: "SELECT * FROM c WHERE IS_NULL(c.pk) AND c.active", streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`pk = null`, `active = true`}},
		{query: "SELECT * FROM c WHERE c.a = c.b OR c.x = 1 OR NOT c.y = 2 OR STARTSWITH(c.id, 'a', true)",
			streaming: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT * FROM c WHERE STARTSWITH(c.id, 'a', true) AND c.n != 3 AND c.m NOT IN (1)",
			streaming: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT t FROM c JOIN t IN c.tags WHERE t = 'x' AND c.kind = 'k'", streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`kind = "k"`}},
		{query: "SELECT * FROM c.child ch WHERE ch.name = 'n'", streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`child.name = "n"`}},
		{query: "SELECT * FROM c WHERE c.id = @missing", streaming: true, top: -1, offset: -1, limit: -1},
		{query: "SELECT * FROM c WHERE c.n = NaN AND c.m < Infinity", streaming: true, top: -1, offset: -1, limit: -1},
		{query: `SELECT * FROM c WHERE c.tags = ["a", @p] AND c.dims = {"w": 1} AND c.x = [c.y]`,
			params:    map[string]json.RawMessage{"@p": json.RawMessage(`2`)},
			streaming: true, top: -1, offset: -1, limit: -1,
			filters: []string{`tags = ["a",2]`, `dims = {"w":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := Parse(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			p, err := q.Plan(tt.params)
			if err != nil {
				t.Fatal(err)
			}
			if p.Streaming != tt.streaming || p.NeedsQueryPlan != tt.needsPlan {
				t.Errorf("streaming=%v needsPlan=%v, want %v %v", p.Streaming, p.NeedsQueryPlan, tt.streaming, tt.needsPlan)
			}
			if p.Top != tt.top || p.Offset != tt.offset || p.Limit != tt.limit {
				t.Errorf("top/offset/limit = %d/%d/%d, want %d/%d/%d", p.Top, p.Offset, p.Limit, tt.top, tt.offset, tt.limit)
			}
			if !reflect.DeepEqual(p.OrderBy, tt.orderBy) {
				t.Errorf("order by = %#v, want %#v", p.OrderBy, tt.orderBy)
			}
			var got []string
			for _, f := range p.Filters {
				got = append(got, f.String())
			}
			if strings.Join(got, "; ") != strings.Join(tt.filters, "; ") {
				t.Errorf("filters = %q, want %q", got, tt.filters)
			}
		})
	}
}

func TestPlanBadCount(t *testing.T) {
	q, err := Parse("SELECT TOP @n * FROM c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Plan(map[string]json.RawMessage{"@n": json.RawMessage(`-1`)}); err == nil {
		t.Fatal("negative TOP accepted")
	}
	if _, err := q.Plan(map[string]json.RawMessage{"@n": json.RawMessage(`{`)}); err == nil {
		t.Fatal("invalid parameter JSON accepted")
	}
}

func TestStringers(t *testing.T) {
	const text = "SELECT * FROM c"
	q, err := Parse(text)
	if err != nil || q.String() != text {
		t.Fatalf("Query.String() = %q, %v", q.String(), err)
	}
	const cond = "FROM c WHERE c.a = 1"
	c, err := ParseCondition(cond)
	if err != nil || c.String() != cond {
		t.Fatalf("Condition.String() = %q, %v", c.String(), err)
	}
	if got := FilterOp(99).String(); got != "?" {
		t.Fatalf("unknown FilterOp renders %q", got)
	}
}
