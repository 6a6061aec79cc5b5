// Package presence is a growing Bloom filter of byte keys, safe for
// concurrent use: Add records a key, MayContain answers false only for a
// key never added. It never forgets a key, so its "absent" is certain and
// a "maybe" costs what the caller would have done without it.
//
// The engine keeps one per container, of every item key ever written, so
// that a create need not read the store to prove its id free (see
// engine/presence.go for the build from the store and when a filter is
// trusted). The package knows nothing of the engine or its storage.
package presence
