// Package orrery is the root of the repository: it holds no code, only the
// test that keeps the layers of the house as ../shared/DESIGN.md draws them.
//
// The layers, imports pointing down only:
//
//	cmd/orrery    the binary: flags
//	instance      the wiring: a store, its engine, the server (orrerytest's too)
//	server        HTTP: routing, auth, wire format; no storage knowledge
//	faults        fault rules the server injects on demand; imports nothing of the module
//	throughput    provisioned RU/s enforced per physical partition; the engine's public API only
//	engine        database semantics; no HTTP knowledge
//	engine/script server-side JavaScript
//	query         Cosmos SQL, pure
//	storage       ordered transactional key-value stores
//
// coord (its own module) is built only on the official azcosmos SDK and
// imports nothing of this module.
package orrery
