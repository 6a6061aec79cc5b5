// Package epk computes effective partition keys: the hashes Cosmos DB orders
// and routes items by. A partition key is one or more components (a string,
// a number, true, false, null or undefined); each hashes, under hash
// partitioning version 2, to 16 bytes: MurmurHash3 x64 128-bit (seed 0) of
// the component's type marker and value, its two halves written big-endian
// in reverse and the top two bits cleared. An item's effective partition key
// is its components' hashes concatenated, so that a prefix of a hierarchical
// key (MultiHash) is a prefix of its effective key.
//
// The package knows values and bytes only: parsing a partition key from a
// request or a document, and its validation, belong to the engine.
package epk
