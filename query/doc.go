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
// Vector, full-text and hybrid search (VectorDistance, FullTextContains,
// FullTextContainsAll, FullTextContainsAny, FullTextScore with ORDER BY
// RANK, RRF, and the gateway's rewrites of them) evaluate exactly over the
// documents given: the brute-force search. Options.Search lets the engine
// supply what the documents do not hold (the policies' distance functions
// and languages, its analyzers, container-wide BM25 statistics), and
// Plan.Vector, Plan.FullText and Plan.Rank tell it which of its indexes may
// narrow the documents to candidates. Query.Gateway gives the query plan
// the gateway hands the SDKs for vector and hybrid search.
//
// The spatial functions (ST_DISTANCE, ST_WITHIN, ST_INTERSECTS, ST_AREA,
// ST_ISVALID, ST_ISVALIDDETAILED) take GeoJSON Points, LineStrings,
// Polygons and MultiPolygons with the service's geography semantics:
// geodesics and areas of the WGS-84 ellipsoid in meters, regions to the
// left of their rings on the sphere (geodesy.go). Plan.Spatial tells the
// engine which of its spatial indexes may narrow the documents.
//
// A Query is immutable and safe for concurrent use; so is an Execution.
// Patch filter predicates ("FROM c WHERE ...") use ParseCondition and
// Condition.Matches. Errors render in the service's JSON shape with
// Error.JSON.
//
// The package is pure: it imports only the standard library. It must not
// import storage, HTTP, or any other package of this module.
package query
