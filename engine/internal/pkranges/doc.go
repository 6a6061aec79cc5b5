// Package pkranges is a container's map of physical partition key ranges:
// spans of the effective partition key space, each with an id that never
// comes back, kept in the container's catalog record. New cuts the space
// hash partitioning V2 uses into ranges of equal width; FormatBoundary and
// ParseBoundary read and write the points between them. A split replaces
// a range by two children whose parents name it.
//
// It knows nothing of the engine, its storage or the query language: the
// engine decides how many ranges a container gets (engine/containers.go),
// scopes requests to a range (engine/rangescope.go), splits a range and
// stores the set (engine/ranges.go).
package pkranges
