// Package uniquepolicy reads a container's uniqueKeyPolicy: the sets of
// property paths whose values, together, no two items of one logical
// partition may share. Parse checks the policy as the service does and
// answers, for each unique key, its paths as property names from the
// root.
//
// It knows nothing of the engine, its storage or how unique-key entries
// are written (engine/uniquekeys.go): it reads the property as decoded
// JSON.
package uniquepolicy
