package query

import "testing"

// TestFullTextCallsRequiredOnlyAsConjuncts: the plan marks a full-text
// call Required only when it is a conjunct of the WHERE clause, the only
// place where every row the query returns has it true; under OR, NOT, a
// comparison or a conditional, an index of its path cannot narrow the
// candidates.
func TestFullTextCallsRequiredOnlyAsConjuncts(t *testing.T) {
	cases := []struct {
		where    string
		required []bool // per call, in the order of the text
	}{
		{"FullTextContains(c.t, 'a')", []bool{true}},
		{"FullTextContainsAll(c.t, 'a', 'b') AND c.n > 1 AND FullTextContainsAny(c.u, 'c', 'd')", []bool{true, true}},
		{"FullTextContains(c.t, 'a') OR FullTextContains(c.t, 'b')", []bool{false, false}},
		{"NOT FullTextContains(c.t, 'a')", []bool{false}},
		{"FullTextContains(c.t, 'a') AND NOT FullTextContains(c.t, 'b')", []bool{true, false}},
		{"(FullTextContains(c.t, 'a') OR c.n = 1) AND FullTextContains(c.t, 'b')", []bool{false, true}},
		{"FullTextContains(c.t, 'a') = false", []bool{false}},
		{"(c.n > 1 ? FullTextContains(c.t, 'a') : true)", []bool{false}},
		{"FullTextContains(c.t, 'a') ?? true", []bool{false}},
	}
	for _, tc := range cases {
		q, err := Parse("SELECT * FROM c WHERE " + tc.where)
		if err != nil {
			t.Fatalf("%s: %v", tc.where, err)
		}
		p, err := q.Plan(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.FullText) != len(tc.required) {
			t.Fatalf("%s: %d full-text calls planned, want %d", tc.where, len(p.FullText), len(tc.required))
		}
		for i, ts := range p.FullText {
			if ts.Required != tc.required[i] {
				t.Errorf("%s: call %d (%s %v) Required %v, want %v", tc.where, i, ts.Function, ts.Keywords, ts.Required, tc.required[i])
			}
		}
	}
}
