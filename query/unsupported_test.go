package query

import (
	"errors"
	"strings"
	"testing"
)

// A query calling a spatial, vector or full-text function of the service is
// refused with a 400 error that names the function and says Orrery lacks
// it; a misspelled function is still "not recognized".
func TestUnsupportedServiceFunctionsAreNamed(t *testing.T) {
	tests := []struct{ query, name, family string }{
		{`SELECT * FROM c WHERE ST_DISTANCE(c.loc, {"type":"Point","coordinates":[0,0]}) < 30`, "ST_DISTANCE", "spatial"},
		{`SELECT * FROM c WHERE ST_WITHIN(c.loc, @area)`, "ST_WITHIN", "spatial"},
		{`SELECT * FROM c WHERE st_intersects(c.a, c.b)`, "ST_INTERSECTS", "spatial"},
		{`SELECT ST_ISVALID(c.loc) FROM c`, "ST_ISVALID", "spatial"},
		{`SELECT ST_ISVALIDDETAILED(c.loc) FROM c`, "ST_ISVALIDDETAILED", "spatial"},
		{`SELECT ST_AREA(c.loc) FROM c`, "ST_AREA", "spatial"},
		{`SELECT TOP 5 c.id, VectorDistance(c.v, [1,2,3]) AS s FROM c ORDER BY VectorDistance(c.v, [1,2,3])`, "VECTORDISTANCE", "vector search"},
		{`SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, [1,2,3])`, "VECTORDISTANCE", "vector search"},
		{`SELECT * FROM c WHERE FullTextContains(c.text, "red")`, "FULLTEXTCONTAINS", "full-text search"},
		{`SELECT * FROM c WHERE FullTextContainsAll(c.text, "red", "blue")`, "FULLTEXTCONTAINSALL", "full-text search"},
		{`SELECT * FROM c WHERE FullTextContainsAny(c.text, "red", "blue")`, "FULLTEXTCONTAINSANY", "full-text search"},
		{`SELECT VALUE FullTextScore(c.text, "red") FROM c`, "FULLTEXTSCORE", "full-text search"},
		{`SELECT VALUE RRF(1, 2) FROM c`, "RRF", "hybrid search"},
		{`SELECT TOP 10 * FROM c ORDER BY RANK FullTextScore(c.text, "red")`, "FULLTEXTSCORE", "full-text search"},
		{`SELECT TOP 10 * FROM c ORDER BY RANK RRF(VectorDistance(c.v, [1]), FullTextScore(c.text, "red"))`, "RRF", "hybrid search"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.query)
		var qe *Error
		if !errors.As(err, &qe) {
			t.Fatalf("%s: error %v, want a query error", tc.query, err)
		}
		want := "'" + tc.name + "' is a " + tc.family + " function of Azure Cosmos DB that Orrery does not support."
		if qe.Code != CodeUnknownFunction || qe.Message != want {
			t.Errorf("%s: %s %q, want %q", tc.query, qe.Code, qe.Message, want)
		}
		if got := strings.ToUpper(tc.query[qe.Start:qe.End]); got != tc.name {
			t.Errorf("%s: the error points at %q", tc.query, got)
		}
	}
	_, err := Parse(`SELECT * FROM c WHERE ST_DISTANCEE(c.a, c.b) < 1`)
	if err == nil || !strings.Contains(err.Error(), "is not a recognized built-in function name") {
		t.Fatalf("misspelled function: %v", err)
	}
}
