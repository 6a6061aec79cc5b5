package query

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that parsing never panics, that every failure is a
// *Error, and that whatever parses also plans and executes without panicking.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"SELECT * FROM c",
		"SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'order-')",
		"SELECT c.id, t FROM c JOIN t IN c.tags WHERE t IN ('a', 'b') ORDER BY c.id DESC OFFSET 1 LIMIT 2",
		"SELECT DISTINCT TOP 3 VALUE {\"a\": c.a, b: [1, 2.5e3, -0x1F]} FROM root r",
		"SELECT c.g, COUNT(1) AS n, AVG(c.x) FROM c GROUP BY c.g",
		"SELECT VALUE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t LIKE 'a%' ESCAPE '!')",
		"SELECT ARRAY(SELECT VALUE x FROM x IN c.a) AS arr, (SELECT VALUE MAX(y) FROM y IN c.b) FROM c",
		"SELECT VALUE c.a ?? c.b ? c.c : ~c.d >>> 2 || 'x' FROM c WHERE NOT c.e BETWEEN 1 AND @p",
		"SELECT * FROM c WHERE (c.id = @param_id0 AND c.pk = @param_pk00) OR IS_NULL(c[\"a\"][\"b\"])",
		"SELECT VALUE udf.f(1) FROM (SELECT VALUE c FROM c) x",
		"SELECT 'unterminated",
		"SELECT * FORM c",
		`SELECT * FROM c WHERE c.x = [c.y, 1] AND c.z = {"a": c.w} AND c.q IN ([1], @p)`,
		`SELECT TOP 2 c.id, VectorDistance(c.a, [1, 2], false, {distanceFunction: 'euclidean'}) AS s FROM c ORDER BY VectorDistance(c.a, [1, 2])`,
		`SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.id, "a", "b") OR FullTextContainsAll(c.id, "x y", "z")`,
		`SELECT TOP 3 * FROM c ORDER BY RANK RRF(FullTextScore(c.id, "a"), VectorDistance(c.a, [1, 0]), [2, -1])`,
		`SELECT COUNT(1) AS n, [{"w": SUM(_FullTextWordCount(c.id)), "h": [COUNTIF(FullTextContains(c.id, "a"))]}] AS s FROM c`,
		`SELECT c._rid, [(_FullTextScore(c.id, ["a"], 2, 3, [1]) ?? -1)] AS s FROM c ORDER BY _VectorScore(c.a, [1, 2]) ASC`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	docs := docsOf(`{"id":"a","g":1,"tags":["a","b"],"a":[1,2],"b":[3],"x":2}`, `{"id":"b","g":2,"c":{"d":null}}`)
	params := map[string]json.RawMessage{"@p": json.RawMessage(`5`), "@param_id0": json.RawMessage(`"a"`)}
	f.Fuzz(func(t *testing.T, text string) {
		q, err := Parse(text)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("Parse(%q) returned %T, want *Error", text, err)
			}
			if qe.Start < 0 || qe.End < qe.Start || qe.End > len(text) {
				t.Fatalf("Parse(%q): bad error span %d..%d", text, qe.Start, qe.End)
			}
			return
		}
		if _, err := q.Plan(params); err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("Plan(%q) returned %T", text, err)
			}
		}
		opts := Options{Params: params, Now: corpusNow}
		res, err := q.Execute(docs, opts)
		if q.fields != nil && !strings.Contains(strings.ToUpper(text), "RAND") {
			// Skipping unread properties must not change the answer.
			full := *q
			full.fields = nil
			fres, ferr := full.Execute(docs, opts)
			if (err == nil) != (ferr == nil) || joinRaw(res) != joinRaw(fres) {
				t.Fatalf("%q: partial decoding gave %s (%v), full %s (%v)", text, joinRaw(res), err, joinRaw(fres), ferr)
			}
		}
	})
}
