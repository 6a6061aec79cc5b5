// Package storage defines the ordered, transactional key-value store that the
// engine keeps everything in, and is the parent of its backends
// (storage/pebble, durable and the default; storage/memory, for tests and
// --memory). It knows nothing of documents, containers or HTTP, and must not
// import any other package of this module.
package storage
