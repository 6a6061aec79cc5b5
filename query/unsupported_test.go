package query

import (
	"errors"
	"strings"
	"testing"
)

// A query calling a spatial function of the service is
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
