// Package outbox publishes messages reliably after commit: the business
// writes and the outgoing messages are one transactional batch in one
// logical partition, and a relay publishes the messages from the change
// feed. It is built on the azcosmos SDK, coord and coord/changefeed, and
// must not import the other coord packages nor anything of the Orrery
// server.
//
// Writing a document and then publishing a message is a dual write: a crash
// (or a failed publish) between the two loses the message while the write
// stays, and publishing first announces writes that may never happen. With
// the outbox the message is a document (id "outbox:<message id>", kind
// "coord.outbox") created in the same batch as the business writes, so both
// commit or neither does; a batch rejected for a stale ETag leaves nothing.
// The record carries the batch's partition key at the container's own
// partition key paths (New reads them): any path, nested or not, any
// scalar type, or a hierarchical key.
//
// The Relay reads the container with a coord/changefeed processor, so any
// number of relay instances share the work and a crashed one's leases move
// on. Each new outbox record goes to the lane of its partition key: a key's
// messages are published one at a time, in the order written, while the
// other keys' go on concurrently (RelayOptions.Concurrency). A publication
// that fails is retried with exponential backoff and full jitter; with
// RelayOptions.MaxAttempts the relay gives up on a message after that many
// failures, writes it to a dead-letter container and calls a hook, and the
// key's later messages go on. A published message's record is patched with
// sentAt (a dead-lettered one with deadLetteredAt, optionally with a TTL).
// That patch comes back through the change feed; the relay recognizes the
// mark and skips the record, so marking never re-triggers a publication.
// The relay checkpoints its lease (manually) only past batches whose every
// message was published or dead-lettered, so a relay killed with messages
// in flight loses none of them.
//
// Delivery is at least once: a crash after publishing and before the mark
// (or the checkpoint) publishes the message again. Consumers deduplicate by
// Message.ID, for example with coord/inbox, which makes the effect happen
// exactly once.
//
// NewMetrics registers coord_outbox_backlog (unsent records),
// coord_outbox_oldest_unsent_age_seconds, coord_outbox_lag (changes the
// relay has yet to checkpoint past), coord_outbox_published_total,
// coord_outbox_publish_failures_total and coord_outbox_dead_lettered_total;
// Relay.Stats measures the same figures on demand.
package outbox
