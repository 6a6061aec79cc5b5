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
// A resumable import (ImportFile with a state file) is exact: the state
// file records which records are done and, before any is sent, how far the
// run may have written; after Ctrl-C or a kill the same call writes exactly
// the records not done, and a create that finds one of its own earlier
// writes counts it recovered, not as a conflict. Items without their
// partition key property go under the undefined partition key, as the
// service files them (see PartitionKeyPolicy).
//
// It imports the SDK only: nothing of the server, the engine or storage.
package transfer
