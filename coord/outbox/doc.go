// Package outbox publishes messages reliably after commit: the business
// writes and the outgoing messages are one transactional batch in one
// logical partition, and a relay publishes the messages from the change
// feed.
//
// Writing a document and then publishing a message is a dual write: a crash
// (or a failed publish) between the two loses the message while the write
// stays, and publishing first announces writes that may never happen. With
// the outbox the message is a document (id "outbox:<message id>", kind
// "coord.outbox") created in the same batch as the business writes, so both
// commit or neither does; a batch rejected for a stale ETag leaves nothing.
//
// The Relay reads the container with a coord/changefeed processor, so any
// number of relay instances share the work and a crashed one's ranges move
// on. For each new outbox record it calls a Publisher (MemoryPublisher and
// WebhookPublisher are provided), retrying with exponential backoff and full
// jitter until the message is accepted; later messages of the same
// partition key wait, so they are published in the order written. It then
// patches the record with sentAt (and optionally a TTL). That patch comes
// back through the change feed; the relay recognizes a record carrying
// sentAt and skips it, so marking never re-triggers a publication.
//
// Delivery is at least once: a crash after publishing and before the mark
// (or the checkpoint) publishes the message again. Consumers deduplicate by
// Message.ID, for example with coord/inbox, which makes the effect happen
// exactly once.
//
// NewMetrics registers coord_outbox_backlog (unsent records),
// coord_outbox_oldest_unsent_age_seconds, coord_outbox_lag (changes the
// relay has yet to read), coord_outbox_published_total and
// coord_outbox_publish_failures_total; Relay.Stats measures the same figures
// on demand.
package outbox
