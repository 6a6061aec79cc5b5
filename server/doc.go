// Package server is Orrery's HTTP face: it routes the Cosmos DB REST paths,
// verifies master-key signatures and resource tokens, parses the Cosmos
// request headers, calls the engine and writes its results and errors in the
// wire format the official SDKs expect. It also serves HTTPS and plain HTTP on one port.
//
// It holds no storage knowledge: it must not import the storage packages, and
// reaches data only through the engine.
package server
