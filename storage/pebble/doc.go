// Package pebble is the durable, embedded backend of package storage, built on
// the Pebble LSM engine. Every committed batch is written to the write-ahead
// log and fsynced before Commit returns; commits from many goroutines share
// fsyncs through Pebble's commit pipeline (group commit). Batches read their own
// writes (indexed once read after a write); snapshots and iterators are Pebble's.
//
// The package is named pebble after its directory; inside it the engine is
// imported as pebbledb. It imports only package storage, the Pebble module and
// the standard library; it must not import any package above storage.
package pebble
