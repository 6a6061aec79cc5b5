// Package inbox makes a message handler take effect once per message id
// although messages arrive at least once (coord/outbox publishes each
// message one or more times). It is built on the azcosmos SDK and coord,
// and must not import the other coord packages nor anything of the Orrery
// server.
//
// The inbox writes a marker document per handled message, with the
// create-only id "inbox:<consumer>:<message id>": a second creation fails
// with 409 Conflict, which is how a redelivery is recognized.
//
//   - When the handler's own writes are in one logical partition, Handle puts
//     the marker in the same transactional batch: the effect and the marker
//     commit together or not at all, so the effect happens exactly once
//     whatever crashes, and a redelivery does nothing.
//   - When the effect is elsewhere (another partition, another service),
//     HandleExternal runs the handler and then writes the marker. A crash
//     between the two runs the handler again on redelivery, so that handler
//     must itself be idempotent by message id (a create-only write, a
//     request with an idempotency key); the marker then only saves the
//     repeat.
//
// The inbox's container is any container of the consumer's, partitioned by
// any path: New reads its partition key definition, and markers carry their
// partition key where the consumer's documents do.
package inbox
