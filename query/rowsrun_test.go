package query

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestRowsFromGivesAFreshRunsRowsWhenItsStateIsReused: RowsFrom keeps its
// state (context copy, environment, slots, row callback) in the execution
// and reuses it from call to call, unless another call holds it. For random
// streaming queries over documents in random order, resumed at the
// positions where a refused row stopped them, and with a call made from
// inside another's callback on the same execution, every call gives the
// rows, positions and errors of the same call on an execution of its own.
func TestRowsFromGivesAFreshRunsRowsWhenItsStateIsReused(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 25))
	g := &queryGen{r: r}
	docs := []string{
		`{"id":"1","a":1,"b":"x","n":3,"s":"abc","arr":[1,{"k":"v"},"a"],"o":{"x":[1,2]}}`,
		`{"id":"2","a":"1","n":-1.5,"s":"a%","arr":[],"o":{"x":null},"extra":{"deep":[1,2,3]}}`,
		`{"id":"3","n":null,"arr":[{"k":1},{"k":2}],"o":"str","k":[1,2]}`,
		`{"id":"4","n":7,"arr":[3,3,[4,5]],"o":{"x":[{"y":1}]},"s":"zz"}`,
		`not json`,
	}
	queries := []string{
		"SELECT c.id, t FROM c JOIN t IN c.arr",
		"SELECT VALUE [c.id, t, u] FROM c JOIN t IN c.arr JOIN u IN c.arr WHERE c.n != 3",
		"SELECT c.id, t, u, v, w, z FROM c JOIN t IN c.arr JOIN u IN c.k JOIN v IN c.arr JOIN w IN c.arr JOIN z IN c.arr",
	}
	params := map[string]json.RawMessage{"@p": json.RawMessage(`1`), "@q": json.RawMessage(`"a"`), "@n": json.RawMessage(`[1,2]`)}
	type call struct {
		doc    string
		from   []int
		refuse int // rows taken before one is refused; -1: none is
	}
	// run makes the calls on x, each call's k-th row (nested >= 0) making
	// the nested call on x from inside its callback.
	run := func(x func() *Execution, calls []call, nestAt, nested int, inner call) []string {
		var out []string
		one := func(x *Execution, c call, nest bool) {
			taken := 0
			var rows []string
			next, err := x.RowsFrom([]byte(c.doc), c.from, func(row json.RawMessage) bool {
				if nest && taken == nested {
					var in []string
					inNext, inErr := x.RowsFrom([]byte(inner.doc), inner.from, func(row json.RawMessage) bool {
						in = append(in, string(row))
						return true
					})
					rows = append(rows, fmt.Sprintf("nested %s %v %v", strings.Join(in, ","), inNext, errText(inErr)))
				}
				if taken == c.refuse {
					return false
				}
				taken++
				rows = append(rows, string(row))
				return true
			})
			out = append(out, fmt.Sprintf("%s -> %v %v", strings.Join(rows, ","), next, errText(err)))
		}
		shared := x()
		for i, c := range calls {
			one(shared, c, i == nestAt && nested >= 0)
		}
		return out
	}
	compared, streaming := 0, 0
	for i := 0; i < 3000; i++ {
		text := queries[r.IntN(len(queries))]
		if r.IntN(2) == 0 {
			text = g.query()
		}
		q, err := Parse(text)
		if err != nil {
			continue
		}
		if _, err := q.Prepare(Options{Params: params, Now: corpusNow}); err != nil {
			continue
		}
		prepare := func() *Execution {
			x, err := q.Prepare(Options{Params: params, Now: corpusNow})
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		var calls []call
		for range 1 + r.IntN(6) {
			c := call{doc: docs[r.IntN(len(docs))], refuse: r.IntN(4) - 1}
			if len(calls) > 0 && r.IntN(3) == 0 {
				// Resume where a fresh run of an earlier call stopped.
				prev := calls[r.IntN(len(calls))]
				next, _ := prepare().RowsFrom([]byte(prev.doc), prev.from, func(json.RawMessage) bool { return false })
				c.doc, c.from = prev.doc, next
			}
			calls = append(calls, c)
		}
		nested := r.IntN(3) - 1
		inner := call{doc: docs[r.IntN(len(docs))], refuse: -1}
		nestAt := r.IntN(len(calls))
		got := run(prepare, calls, nestAt, nested, inner)
		var want []string
		for j, c := range calls {
			// Each call on an execution of its own, the nested one too.
			w := run(prepare, []call{c}, 0, map[bool]int{true: nested, false: -1}[j == nestAt], inner)
			want = append(want, w...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q, calls %+v, nested at %d: reused\n%s\nfresh\n%s", text, calls, nested, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		compared++
		if q.q.streaming() {
			streaming++
		}
	}
	if streaming < 1000 {
		t.Fatalf("only %d streaming queries compared", streaming)
	}
	t.Logf("%d queries compared, %d streaming", compared, streaming)
}

// TestMatchedCountsTheRowsOfEveryRunOfAnExecution: the match count lives in
// the execution and every run's copy of its context (RowsFrom's reused
// state, a nested call's own, Execute's) counts into it.
func TestMatchedCountsTheRowsOfEveryRunOfAnExecution(t *testing.T) {
	q, err := Parse("SELECT c.id, t FROM c JOIN t IN c.arr WHERE t > 1")
	if err != nil {
		t.Fatal(err)
	}
	x, err := q.Prepare(Options{Heavy: GateFunc(func() error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"id":"a","arr":[1,2,3,4]}`) // three rows match
	nested := false
	if _, err := x.RowsFrom(doc, nil, func(json.RawMessage) bool {
		if !nested {
			nested = true
			if _, err := x.RowsFrom(doc, nil, func(json.RawMessage) bool { return true }); err != nil {
				t.Fatal(err)
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RowsFrom(doc, nil, func(json.RawMessage) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Execute(docsOf(string(doc), `{"id":"b","arr":[5]}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := x.Matched(), int64(3+3+3+3+1); got != want {
		t.Errorf("Matched() = %d, want %d", got, want)
	}
	y, err := q.Prepare(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := y.Matched(); got != 0 {
		t.Errorf("a new execution's Matched() = %d, want 0", got)
	}
}
