// Package script runs Cosmos DB server-side JavaScript — stored procedures,
// pre- and post-triggers and user-defined functions — on the goja engine.
//
// A script sees the database only through the Collection interface defined
// here, which the engine implements for the one logical partition the script
// runs in; every write goes into the caller's open transaction, and the caller
// commits it or discards it depending on the error returned. The package
// provides the Cosmos server-side API (getContext, Collection, Request,
// Response, the __ query object, ErrorCodes, console.log and an Error
// constructor taking a status number), runs each script under a time budget,
// a memory ceiling and a call-depth limit, caches compiled programs and pools
// locked-down runtimes so that no state leaks from one run to the next.
//
// It must not import the engine, storage or server packages, nor anything
// else of this module: the engine imports it, never the other way round.
package script
