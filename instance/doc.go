// Package instance wires one Orrery: a store, the engine on it and the
// server in front of the engine, listening for plain HTTP, or HTTPS and
// plain HTTP on one port. `orrery serve`, orrerytest and the reference
// app's embedded server all start through Start, so that what one of them
// can set, each of them can.
//
// It imports the engine, the server and the storage interface, never a
// storage backend: the caller opens the store (memory, Pebble, PostgreSQL)
// and hands it over, so that a program keeping its data in memory links
// neither Pebble nor PostgreSQL's driver. It must not import cmd, orrerytest,
// compat or examples.
package instance
