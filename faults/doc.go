// Package faults holds the rules by which Orrery injects failures into the
// requests it serves, on demand: the failures production has and no emulator
// gives (a 429 storm, a 410 after a split, a write that commits and whose
// reply is lost), for every SDK at once since they happen on the server.
//
// A Rule has a condition (operation kinds as the Java, .NET and Rust SDKs'
// fault-injection libraries name them, database and container, partition
// key or partition key range, client IP or user-agent substring, the user
// of a resource token), a result (a Cosmos error with the service's status
// and substatus, a delay, a dropped connection, an operation applied and its
// reply lost) and limits (a hit count, a probability, a time window). An
// Injector holds the rules and picks, for each request, the first whose
// condition and limits let it fire, counting its hits; with no rule it
// costs one atomic load.
//
// The package decides; it does not act. The server (package server) asks
// the Injector about each request after routing and authentication and
// carries out the result. It imports nothing of this module: the server
// passes what a condition needs (the partition key range, the token's user)
// as functions it calls only when a rule asks.
package faults
