package query

import "strings"

// unsupportedBuiltins are the built-in functions of the service that Orrery
// does not implement, by upper-case name, with the family they belong to. A
// query calling one is refused with a 400 that names it, not with the
// "not a recognized built-in function" a misspelling gets.
//
// Every function of the service is implemented today; the map stays for the
// next family the service adds.
var unsupportedBuiltins = map[string]string{}

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

// atRank consumes RANK at the start of an ORDER BY item (ORDER BY RANK
// FullTextScore(...), the service's ranking by a full-text or hybrid
// score) and reports whether it was there: RANK is a keyword only when a
// function call follows it.
func (p *parser) atRank() bool {
	t, fn, paren := p.peek(), p.peekAt(1), p.peekAt(2)
	if t.kind != tIdent || !strings.EqualFold(t.text, "RANK") || fn.kind != tIdent || paren.kind != tPunct || paren.text != "(" {
		return false
	}
	p.next()
	return true
}
