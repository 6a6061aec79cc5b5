package query

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustComputed(t *testing.T, name, text string) *ComputedProperty {
	t.Helper()
	cp, err := ParseComputedProperty(name, text)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cp
}

func TestComputedPropertiesReadTheirExpressionEverywhereButStar(t *testing.T) {
	cps := []*ComputedProperty{
		mustComputed(t, "cp_lower", "SELECT VALUE LOWER(c.name) FROM c"),
		mustComputed(t, "cp_total", "SELECT VALUE r.price * r.qty FROM root r"),
	}
	docs := []string{
		`{"id":"1","name":"Bob","price":2,"qty":3}`,
		`{"id":"2","name":"ALICE","price":5,"qty":1}`,
		`{"id":"3","name":"bob","price":1,"qty":1,"cp_lower":"persisted"}`,
	}
	run := func(q string) string {
		t.Helper()
		pq, err := ParseComputed(q, cps)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out, err := pq.Execute(func(yield func([]byte, error) bool) {
			for _, d := range docs {
				if !yield([]byte(d), nil) {
					return
				}
			}
		}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	for _, tt := range []struct{ q, want string }{
		{`SELECT VALUE c.id FROM c WHERE c.cp_lower = "bob"`, `["1","3"]`},
		{`SELECT c.id, c.cp_total FROM c WHERE c.cp_total > 1`, `[{"id":"1","cp_total":6},{"id":"2","cp_total":5}]`},
		{`SELECT VALUE x.id FROM x ORDER BY x.cp_total DESC`, `["1","2","3"]`},
		{`SELECT VALUE x.id FROM x ORDER BY x["cp_lower"]`, `["2","1","3"]`},
		{`SELECT c.cp_lower, COUNT(1) AS n FROM c GROUP BY c.cp_lower`, `[{"cp_lower":"alice","n":1},{"cp_lower":"bob","n":2}]`},
		{`SELECT * FROM c WHERE c.id = "3"`, `[{"id":"3","name":"bob","price":1,"qty":1,"cp_lower":"persisted"}]`},
		{`SELECT VALUE c FROM c WHERE c.id = "1"`, `[{"id":"1","name":"Bob","price":2,"qty":3}]`},
		{`SELECT VALUE c.id FROM c WHERE EXISTS(SELECT VALUE 1 FROM t IN [1] WHERE c.cp_total = 5)`, `["2"]`},
	} {
		if got := run(tt.q); got != tt.want {
			t.Errorf("%s\n got %s\nwant %s", tt.q, got, tt.want)
		}
	}
}

func TestComputedPropertyDefinitionsFollowTheServiceRules(t *testing.T) {
	for _, tt := range []struct{ name, query, why string }{
		{"id", "SELECT VALUE c.a FROM c", "system property"},
		{"_ts", "SELECT VALUE c.a FROM c", "system property"},
		{"a/b", "SELECT VALUE c.a FROM c", "nested"},
		{"", "SELECT VALUE c.a FROM c", "non-empty"},
		{"cp", "SELECT c.a FROM c", "SELECT VALUE"},
		{"cp", "SELECT VALUE c.a FROM c WHERE c.b = 1", "WHERE"},
		{"cp", "SELECT VALUE t FROM c JOIN t IN c.tags", "JOIN"},
		{"cp", "SELECT VALUE COUNT(1) FROM c", "aggregate"},
		{"cp", "SELECT VALUE GetCurrentDateTime() FROM c", "non-deterministic"},
		{"cp", "SELECT VALUE RAND() FROM c", "non-deterministic"},
		{"cp", "SELECT VALUE udf.f(c.a) FROM c", "user-defined"},
		{"cp", "SELECT VALUE (SELECT VALUE 1) FROM c", "subqueries"},
		{"cp", "SELECT VALUE c.a FROM c.children", "container itself"},
		{"cp", "SELECT VALUE FROM c", "invalid"},
	} {
		_, err := ParseComputedProperty(tt.name, tt.query)
		if err == nil || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("%q %q: %v, want an error about %s", tt.name, tt.query, err, tt.why)
		}
	}
}

func TestComputedPropertyEvaluate(t *testing.T) {
	cp := mustComputed(t, "cp", "SELECT VALUE CONCAT(c.a, c.b) FROM c")
	v, ok, err := cp.Evaluate([]byte(`{"a":"x","b":"y"}`))
	if err != nil || !ok || string(v) != `"xy"` {
		t.Fatalf("%s %v %v", v, ok, err)
	}
	if _, ok, _ := cp.Evaluate([]byte(`{"a":"x"}`)); ok {
		t.Fatal("an undefined computed value evaluated to something")
	}
}

func TestComputedPropertyOfItsOwnNameReadsThePersistedValue(t *testing.T) {
	cps := []*ComputedProperty{mustComputed(t, "name", "SELECT VALUE LOWER(c.name) FROM c")}
	q, err := ParseComputed(`SELECT VALUE c.name FROM c`, cps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := q.Execute(func(yield func([]byte, error) bool) { yield([]byte(`{"name":"BoB"}`), nil) }, Options{})
	if err != nil || len(out) != 1 || string(out[0]) != `"bob"` {
		t.Fatalf("%s %v", out, err)
	}
}
