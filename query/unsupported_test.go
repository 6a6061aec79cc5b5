package query

import (
	"errors"
	"strings"
	"testing"
)

// A query calling a service function Orrery lacks is refused with a 400
// error that names the function and says Orrery lacks it; a misspelled
// function is still "not recognized". Every family is implemented today, so
// the test lists one of its own.
func TestUnsupportedServiceFunctionsAreNamed(t *testing.T) {
	unsupportedBuiltins["GEO_LACKING"] = "example"
	defer delete(unsupportedBuiltins, "GEO_LACKING")
	for _, q := range []string{`SELECT * FROM c WHERE GEO_LACKING(c.loc) < 30`, `SELECT geo_lacking(c.loc) FROM c`} {
		_, err := Parse(q)
		var qe *Error
		if !errors.As(err, &qe) {
			t.Fatalf("%s: error %v, want a query error", q, err)
		}
		want := "'GEO_LACKING' is a example function of Azure Cosmos DB that Orrery does not support."
		if qe.Code != CodeUnknownFunction || qe.Message != want {
			t.Errorf("%s: %s %q, want %q", q, qe.Code, qe.Message, want)
		}
		if got := strings.ToUpper(q[qe.Start:qe.End]); got != "GEO_LACKING" {
			t.Errorf("%s: the error points at %q", q, got)
		}
	}
	_, err := Parse(`SELECT * FROM c WHERE ST_DISTANCEE(c.a, c.b) < 1`)
	if err == nil || !strings.Contains(err.Error(), "is not a recognized built-in function name") {
		t.Fatalf("misspelled function: %v", err)
	}
	// The spatial functions are built in now.
	for _, q := range []string{`SELECT ST_AREA(c.loc) FROM c`, `SELECT * FROM c WHERE ST_WITHIN(c.loc, @area)`} {
		if _, err := Parse(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}
