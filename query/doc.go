// Package query implements the SQL language of Azure Cosmos DB for NoSQL: a
// lexer, a parser producing an AST, an evaluator with Cosmos's undefined/null
// semantics, the built-in system functions, and a plan analysis (ORDER BY
// keys, TOP/OFFSET/LIMIT, index-usable WHERE conjuncts) for the engine.
//
// Documents enter as raw JSON bytes and results leave as raw JSON
// (json.RawMessage), so callers never depend on the internal value model.
//
// The life of a query:
//
//	q, err := query.Parse(text)          // syntax and binding errors are *query.Error
//	plan, err := q.Plan(params)          // streaming?, ORDER BY keys, TOP/OFFSET/LIMIT, index filters
//	x, err := q.Prepare(query.Options{Params: params, UDF: resolver})
//	all, err := x.Execute(docs)          // whole-input semantics: ORDER BY, GROUP BY, aggregates, ...
//	rows, err := x.Rows(doc)             // streaming queries only: one document's results
//	next, err := x.RowsFrom(doc, from, fn) // the same row by row, resumable inside the document
//
// Options bound an execution: Context cancels it (checked every few hundred
// rows of work), Deadline is its time budget (RowsFrom stops between rows,
// anything else fails with ErrTimeBudget), MaxMemory and Pool bound what it
// holds in kept rows, groups, DISTINCT keys, arrays being built and results,
// and Heavy lets the caller make costly executions wait their turn.
//
// A Query is immutable and safe for concurrent use; so is an Execution.
// Patch filter predicates ("FROM c WHERE ...") use ParseCondition and
// Condition.Matches. Errors render in the service's JSON shape with
// Error.JSON.
//
// The package is pure: it imports only the standard library. It must not
// import storage, HTTP, or any other package of this module.
package query
