// Package indexpolicy reads a container's indexingPolicy into the decisions
// the engine's index makes from it: which property paths are indexed (the
// most specific included or excluded path pattern wins), which paths hold
// a spatial index, which composite indexes serve a multi-property ORDER BY,
// and which computed properties are indexed.
//
// It knows nothing of the engine, its storage or the query language: it
// reads the container's properties as decoded JSON (map[string]any) and
// answers about paths rendered by Path.
package indexpolicy
