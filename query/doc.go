// Package query implements the SQL language of Azure Cosmos DB for NoSQL: a
// lexer, a parser producing an AST, an evaluator with Cosmos's undefined/null
// semantics, the built-in system functions, and a plan analysis (ORDER BY
// keys, TOP/OFFSET/LIMIT, index-usable WHERE conjuncts) for the engine.
//
// Documents enter as raw JSON bytes and results leave as raw JSON
// (json.RawMessage), so callers never depend on the internal value model.
//
// The package is pure: it imports only the standard library. It must not
// import storage, HTTP, or any other package of this module.
package query
