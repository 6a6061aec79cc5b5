package query

import "strings"

// unsupportedBuiltins are the built-in functions of the service that Orrery
// does not implement, by upper-case name, with the family they belong to. A
// query calling one is refused with a 400 that names it, not with the
// "not a recognized built-in function" a misspelling gets.
var unsupportedBuiltins = map[string]string{
	"ST_DISTANCE":         "spatial",
	"ST_WITHIN":           "spatial",
	"ST_INTERSECTS":       "spatial",
	"ST_ISVALID":          "spatial",
	"ST_ISVALIDDETAILED":  "spatial",
	"ST_AREA":             "spatial",
	"VECTORDISTANCE":      "vector search",
	"FULLTEXTCONTAINS":    "full-text search",
	"FULLTEXTCONTAINSALL": "full-text search",
	"FULLTEXTCONTAINSANY": "full-text search",
	"FULLTEXTSCORE":       "full-text search",
	"RRF":                 "hybrid search",
}

// unsupportedBuiltin returns the error for a call of a service function
// Orrery lacks, or nil.
func unsupportedBuiltin(name string, pos int) *Error {
	family, ok := unsupportedBuiltins[upper(name)]
	if !ok {
		return nil
	}
	return semanticError(CodeUnknownFunction, pos, pos+len(name),
		"'%s' is a %s function of Azure Cosmos DB that Orrery does not support.", upper(name), family)
}

// orderByRank refuses ORDER BY RANK, the service's ranking by full-text or
// hybrid score, naming the scoring function that follows it.
func (p *parser) orderByRank() error {
	t, fn, paren := p.peek(), p.peekAt(1), p.peekAt(2)
	if t.kind != tIdent || !strings.EqualFold(t.text, "RANK") || fn.kind != tIdent || paren.kind != tPunct || paren.text != "(" {
		return nil
	}
	if err := unsupportedBuiltin(fn.text, fn.pos); err != nil {
		return err
	}
	return semanticError(CodeSemantic, t.pos, t.pos+len(t.text), "ORDER BY RANK (ranking by a full-text or hybrid search score) is a function of Azure Cosmos DB that Orrery does not support.")
}
