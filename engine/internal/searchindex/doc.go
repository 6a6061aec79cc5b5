// Package searchindex keeps the search indexes of the engine's containers:
// one vector index (engine/internal/vector) per path of
// indexingPolicy.vectorIndexes and one full-text index
// (engine/internal/fulltext) per path of indexingPolicy.fullTextIndexes,
// which also keeps the path's BM25 statistics.
//
// A vector index with a shard key (vectorIndexShardKey) is one index per
// value of the shard key's path (shards.go); VectorIndex.Search searches
// the shards of the values a query pins, or all of them.
//
// A Set holds the open indexes of every container, by container RID, for
// the policy they were built for (Spec.Fingerprint). How they are kept is
// chosen once, when the Set is made (Options.Mode):
//
//   - Local: a store this process has alone. Each index keeps its state
//     under its own prefix of the search key family (keys.SearchIndexPrefix),
//     and every item write, delete, patch, TTL expiry and partition-key
//     delete changes it in the item's own storage transaction (Reindex with
//     the transaction's Write): the change is prepared (written to the
//     transaction's batch, applied in memory but hidden from searches) as
//     the item is written, committed once the batch is applied, aborted
//     when it is not. An index is therefore exactly as durable as the items,
//     and after a crash it is the index of the items that survived. The
//     indexes are opened from their state when the search meta record
//     (keys.SearchMetaKey) says it was built for the container's current
//     policy, else rebuilt from the items (a policy change, a store written
//     before the indexes existed, a rebuild a crash cut short: the meta
//     record is written last).
//   - Shared: several gateways writing one store. Each gateway keeps the
//     indexes in its memory, and catches them up with the store's change
//     records before a query reads them (shared.go).
//   - Off: a store over several places, whose LSNs are not one order: no
//     index is kept and searches are exact.
//
// The package knows the key layout, storage's interfaces, the document
// model and the two index leaves; nothing of the engine, which adapts it:
// a container is what the Container interface says, an item's document is
// what Options.Decode reads out of its stored record.
package searchindex
