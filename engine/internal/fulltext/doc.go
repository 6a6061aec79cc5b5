// Package fulltext holds the full-text search of Azure Cosmos DB for NoSQL as
// Orrery serves it: the analysis of text per language (tokens, lower case,
// stop words, stemming: bleve's analyzers, for every language a full-text
// policy may name), an inverted index with positions (so a keyword of
// several words matches as a phrase) and the statistics BM25 ranks by (how
// many documents, their terms in all, how many contain each term), kept
// incrementally as items are written, and block-max bounds of each term's
// scores with which Top finds FullTextScore's best documents without
// scoring every one that holds a keyword. It also holds the policy model of
// full-text search (fullTextPolicy, indexingPolicy.fullTextIndexes) and its
// validation, with the service's rules and messages.
//
// An index keeps its state in an ordered key-value keyspace of its own,
// reached through Reader and Writer, so that its changes go into the same
// storage transaction as the item they come from; Prepare writes a
// transaction's changes and holds them (the counters in memory included)
// until the caller commits or aborts, as package vector's indexes do.
//
// The package is a leaf: it imports the standard library and bleve's
// analysis packages (github.com/blevesearch/bleve/v2/analysis/...,
// registry), nothing of bleve's index. It must not import the engine,
// storage, query or any other package of this module.
package fulltext
