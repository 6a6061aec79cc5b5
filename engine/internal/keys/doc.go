// Package keys is the engine's storage key layout: every prefix and every
// key shape the engine writes, in one place. Keys are ordered so that what
// is read together is adjacent: a container's items sorted by effective
// partition key, then partition key value, then id; its change records by
// sequence number.
//
// Each family of keys starts with a byte of its own; a family's keys then
// name their parent by RID. RIDs nest: a container's and a user's RID start
// with their database's, a permission's with its user's. Two families
// sharing a first byte would therefore overlap as soon as one's parent RID
// is a prefix of the other's: users (database RID) and unique-key entries
// (container RID) once both used 'U', and a scan of a database's users met
// the unique-key entries of its containers. TestFamiliesAreDisjoint checks
// every pair of families over every nesting of RIDs.
//
// Format is the version of this layout. A store written in an older one is
// rewritten when an engine opens it (the engine's upgradeLayout).
//
// Lock names (CatalogLock, PartitionLock) are names of store locks, a
// namespace of their own: they are never keys.
package keys
