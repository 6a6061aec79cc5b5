// Package pkey turns partition key values given as Go values into what the
// azcosmos SDK and the documents of a container need: the SDK's
// PartitionKey, and the values set at the partition key's paths. coord's
// outbox and inbox use it to write their documents into a container whose
// partition key is any path (nested or not) of any scalar type, or a
// hierarchical key. It imports nothing of coord.
package pkey
