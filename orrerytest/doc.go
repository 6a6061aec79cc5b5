// Package orrerytest starts an in-process Orrery server for Go tests: memory
// storage, a free loopback port, no Docker and nothing to install. One call
// gives the endpoint, the key and a ready azcosmos.Client; the server stops
// when the test ends.
//
// It imports the server, the engine and the storage backends; nothing in the
// module imports it outside tests.
package orrerytest
