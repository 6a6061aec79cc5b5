// Package orrerytest starts an in-process Orrery server for Go tests: memory
// storage, a free loopback port, no Docker and nothing to install. One call
// gives the endpoint, the key and a ready azcosmos.Client; the server stops
// when the test ends. It starts the server as `orrery serve` does, through
// package instance.
//
// It links memory and Pebble storage only: a test binary that imports it
// carries neither PostgreSQL's driver nor its launcher. Servers on
// PostgreSQL come from orrerytest/onpostgres, which a test imports when it
// wants them. Nothing in the module imports orrerytest outside tests.
package orrerytest
