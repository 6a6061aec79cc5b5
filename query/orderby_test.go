package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestOrderByBounded checks the heap kept for ORDER BY with TOP or
// OFFSET/LIMIT against a plain stable sort of every row, with many ties.
func TestOrderByBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type row struct {
		id string
		n  int
	}
	var rows []row
	var docs []string
	for i := 0; i < 400; i++ {
		rw := row{id: fmt.Sprintf("d%03d", i), n: r.IntN(20)}
		rows = append(rows, rw)
		if i%17 == 0 {
			docs = append(docs, fmt.Sprintf(`{"id":%q}`, rw.id)) // n undefined: sorts first
			rows[len(rows)-1].n = -1
			continue
		}
		docs = append(docs, fmt.Sprintf(`{"id":%q,"n":%d}`, rw.id, rw.n))
	}
	src := docsOf(docs...)
	for _, desc := range []bool{false, true} {
		want := slices.Clone(rows)
		slices.SortStableFunc(want, func(a, b row) int {
			if desc {
				return b.n - a.n
			}
			return a.n - b.n
		})
		for _, tc := range []struct {
			clause   string
			from, to int
		}{
			{"TOP 0", 0, 0}, {"TOP 1", 0, 1}, {"TOP 37", 0, 37}, {"TOP 1000", 0, 400},
			{"OFFSET 0 LIMIT 5", 0, 5}, {"OFFSET 13 LIMIT 29", 13, 42}, {"OFFSET 390 LIMIT 50", 390, 400}, {"OFFSET 500 LIMIT 5", 400, 400},
		} {
			dir := ""
			if desc {
				dir = " DESC"
			}
			text := "SELECT VALUE c.id FROM c ORDER BY c.n" + dir
			if strings.HasPrefix(tc.clause, "TOP") {
				text = strings.Replace(text, "SELECT", "SELECT "+tc.clause, 1)
			} else {
				text += " " + tc.clause
			}
			q, err := Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			res, err := q.Execute(src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var exp []string
			for _, rw := range want[tc.from:tc.to] {
				exp = append(exp, fmt.Sprintf("%q", rw.id))
			}
			if got, w := joinRaw(res), "["+strings.Join(exp, ",")+"]"; got != w {
				t.Errorf("%s:\n got %s\nwant %s", text, got, w)
			}
		}
	}
}
