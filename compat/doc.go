// Package compat holds the tests that drive Orrery with the official SDKs,
// unmodified: the Go SDK (azcosmos) here, the JavaScript SDK in compat/js.
// They are the proof that a real client sees Cosmos DB's behaviour.
package compat
