// Package compat holds the tests that drive Orrery with the official SDKs,
// unmodified: the Go SDK (azcosmos) here, the JavaScript SDK in compat/js.
// They are the proof that a real client sees Cosmos DB's behaviour.
//
// The JavaScript suite is an npm project pinned to @azure/cosmos 4.10.1 by
// its lock file, with tests written for node's built-in runner. TestJSSDK
// starts an in-process server and runs the suite against it, so go test is
// the one command for both; it fails, rather than skips, when the SDK is not
// installed: run `npm ci --prefix compat/js` first (the CI script does).
//
// The package imports only orrerytest and the SDKs: it tests the server from
// the outside and must not reach into engine or server internals.
package compat
