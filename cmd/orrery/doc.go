// Command orrery runs Orrery, a document database that speaks the Azure
// Cosmos DB for NoSQL wire protocol, so the official SDKs work against it
// unmodified.
//
//	orrery serve  [--addr localhost:8081] [--data ./orrery-data | --memory | --postgres URL] [--key K] [--readonly-key K]
//	orrery cert   [--endpoint URL] [--data ./orrery-data]   print the server's TLS certificate (PEM)
//	orrery health [--endpoint URL]                          exit 0 when the server is ready
//	orrery import [--endpoint URL] … FILE, orrery export [--endpoint URL] …
//	orrery version
//
// It holds flags only: it opens the store the flags name and starts it
// through package instance, the wiring orrerytest uses too.
package main
