// Package storagetest is the conformance suite every backend of package storage
// must pass: point reads and writes, batches that read their own writes,
// bounded and reverse iteration, snapshot isolation, atomicity and concurrent
// commits. A backend's tests call Run with a function that opens a fresh,
// empty store.
//
// It imports only package storage and the standard library (testing); it must
// not import any backend.
package storagetest
