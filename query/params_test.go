package query

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// randomParamJSON is a random parameter value: JSON of every kind, nested,
// with escapes, and now and then text that is not JSON at all.
func randomParamJSON(r *rand.Rand, depth int) string {
	k := r.IntN(9)
	if depth > 2 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[r.IntN(2)]
	case 2:
		return []string{"0", "1", "-2.5", "3e2", "1e400", "-0", "42", "9007199254740993"}[r.IntN(8)]
	case 3:
		return []string{`"a%"`, `"x"`, `""`, `"\u00e9\"\\"`, `"abc"`, `"\ud83d\ude00"`}[r.IntN(6)]
	case 4:
		return []string{`[1,2]`, `[]`, `{}`}[r.IntN(3)]
	case 5:
		if r.IntN(12) == 0 {
			return []string{`{"a":`, `nul`, `[1,]`, `'x'`, ``}[r.IntN(5)]
		}
		return fmt.Sprint(r.IntN(5) - 1)
	case 6, 7:
		var b strings.Builder
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(randomParamJSON(r, depth+1))
		}
		b.WriteByte(']')
		return b.String()
	default:
		var b strings.Builder
		b.WriteByte('{')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s":%s`, []string{"k", "x", "a", "k"}[r.IntN(4)], randomParamJSON(r, depth+1))
		}
		b.WriteByte('}')
		return b.String()
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%T %v", err, err)
}

// TestParamsDecodedOncePlanAndExecuteAsEachDecodingItsOwn holds the engine's
// one decoding of a page's parameters (DecodeParams, shared by PlanParams
// and by Prepare through Options.Decoded, and by every run of the
// execution) to Plan and Prepare decoding them each: the same plan, the
// same rows and the same errors, over random queries and random values.
func TestParamsDecodedOncePlanAndExecuteAsEachDecodingItsOwn(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 25))
	g := &queryGen{r: r}
	docs := docsOf(
		`{"id":"1","a":1,"b":"x","n":3,"s":"abc","arr":[1,{"k":"v"},"a"],"o":{"x":[1,2]}}`,
		`{"id":"2","a":"1","n":-1.5,"s":"a%","arr":[],"o":{"x":null},"extra":{"deep":[1,2,3]}}`,
		`{"id":"3","n":null,"arr":[{"k":1},{"k":2}],"o":"str","k":[1,2]}`,
	)
	n := 4000
	if testing.Short() {
		n = 400
	}
	compared := 0
	for i := 0; i < n; i++ {
		text := g.query()
		q, err := Parse(text)
		if err != nil {
			continue
		}
		params := map[string]json.RawMessage{}
		for _, name := range []string{"@p", "@q", "@n"} {
			switch r.IntN(6) {
			case 0: // absent: undefined
			case 1: // named without its @
				params[name[1:]] = json.RawMessage(randomParamJSON(r, 0))
			default:
				params[name] = json.RawMessage(randomParamJSON(r, 0))
			}
		}
		bad := 0
		for _, v := range params {
			if !json.Valid(v) {
				bad++
			}
		}
		if bad > 1 {
			continue // which one an error names is the map's order
		}
		wantPlan, wantPlanErr := q.Plan(params)
		pv, decErr := DecodeParams(params)
		var gotPlan *Plan
		gotPlanErr := decErr
		if decErr == nil {
			gotPlan, gotPlanErr = q.PlanParams(pv)
		}
		if errText(gotPlanErr) != errText(wantPlanErr) || !reflect.DeepEqual(gotPlan, wantPlan) {
			t.Fatalf("%q %s: decoded once planned %+v (%v), Plan %+v (%v)", text, params, gotPlan, gotPlanErr, wantPlan, wantPlanErr)
		}
		if wantPlanErr != nil {
			continue
		}
		want, wantErr := q.Execute(docs, Options{Params: params, Now: corpusNow})
		x, err := q.Prepare(Options{Decoded: pv, Params: map[string]json.RawMessage{"@p": json.RawMessage(`"not these"`)}, Now: corpusNow})
		if err != nil {
			t.Fatalf("%q: Prepare with decoded params: %v", text, err)
		}
		for run := range 2 { // the decoded values outlive every run
			got, gotErr := x.Execute(docs)
			if errText(gotErr) != errText(wantErr) || joinRaw(got) != joinRaw(want) {
				t.Fatalf("%q %s run %d: decoded once %s (%v), each its own %s (%v)", text, params, run, joinRaw(got), gotErr, joinRaw(want), wantErr)
			}
		}
		compared++
	}
	t.Logf("%d of %d queries compared", compared, n)
	if compared < n/4 {
		t.Fatalf("only %d of %d queries compared", compared, n)
	}
}
