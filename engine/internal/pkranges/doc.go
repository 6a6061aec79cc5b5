// Package pkranges is a container's map of physical partition key ranges:
// spans of the effective partition key space, each with an id that never
// comes back, kept in the container's catalog record. New cuts the space
// hash partitioning V2 uses into ranges of equal width; Split replaces a
// range by two children whose parents name it.
//
// It knows nothing of the engine, its storage or the query language: the
// engine (engine/ranges.go) decides how many ranges a container gets,
// scopes requests to a range and stores the set.
package pkranges
