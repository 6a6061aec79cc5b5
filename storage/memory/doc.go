// Package memory is an in-memory backend of package storage: an ordered
// B-tree whose copy-on-write clones give snapshots and iterators, and batches
// that keep their writes in a sorted overlay until Commit applies them
// atomically. Nothing survives the process; it serves tests and the server's
// in-memory mode.
//
// It imports only package storage, the B-tree module and the standard library;
// it must not import any other backend or any package above storage.
package memory
