// Command orrery runs Orrery, a document database that speaks the Azure
// Cosmos DB for NoSQL wire protocol, so the official SDKs work against it
// unmodified.
//
//	orrery serve [--addr :8081] [--data ./orrery-data | --memory | --postgres URL] [--key K] [--readonly-key K]
//	orrery cert  [--data ./orrery-data]   print the server's TLS certificate (PEM)
//	orrery version
//
// It holds flags and wiring only: storage, engine and server are packages.
package main
