// Package pkey is the partition key model: a partition key's values, its
// canonical JSON form, and the effective partition key (EPK) Cosmos DB
// orders and routes items by.
//
// A partition key (Key) is one Value per path of its container's
// definition: a string, a number, true, false, null or undefined (a path the
// document lacks, {} in the SDKs' JSON). Each value hashes, under hash
// partitioning version 2, to 16 bytes: MurmurHash3 x64 128-bit (seed 0) of
// its type marker and value, its two halves written big-endian in reverse
// and the top two bits cleared. A key's EPK is its values' hashes
// concatenated, so that a prefix of a hierarchical key (MultiHash) is a
// prefix of its EPK.
//
// The package knows values and bytes only. Its errors are plain errors whose
// text is the service's message; the engine returns them as 400 BadRequest.
// The partition key definition (paths, kind, version) and its validation
// belong to the engine.
package pkey
