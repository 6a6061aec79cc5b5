// Package transfer moves items between files and a container of any Cosmos DB
// for NoSQL endpoint (Azure, the emulator, Orrery) through the official Go
// SDK: export to JSON Lines or a JSON array, import from either, and seed a
// set of databases, containers and items. It is what `orrery import`,
// `orrery export` and `orrery serve --seed` run.
//
// Items keep their bytes: export writes each item's user properties exactly
// as the service returned them, minus the system properties (_rid, _self,
// _etag, _attachments, _ts), and import sends them as they are in the file.
//
// It imports the SDK only, nothing of the server.
package transfer
