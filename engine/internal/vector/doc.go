// Package vector holds the vector indexes of Azure Cosmos DB for NoSQL's
// vector search as Orrery serves them: flat (exact search over every stored
// vector), quantizedFlat (a scan of product-quantized codes, then an exact
// re-rank of the best candidates) and diskANN (a Vamana graph, the algorithm
// behind DiskANN, searched greedily with a beam), with the distance functions
// of the service (cosine, dot product, Euclidean) over the data types a
// vector embedding policy names (float32, float16, int8, uint8). It also holds
// the container-policy model of vector search (vectorEmbeddingPolicy and
// indexingPolicy.vectorIndexes) and its validation, with the service's rules
// and messages.
//
// An index keeps its state in an ordered key-value keyspace of its own,
// reached through Reader and Writer, so that the engine can put an index's
// changes in the same storage transaction as the item they come from: an
// index is exactly as durable as its items, and a crash leaves it as it was
// at the last commit. Open loads an index from its keyspace; Prepare writes a
// transaction's changes to a Writer and holds them until the caller, once
// the transaction is applied, calls Commit (or Abort when it failed), so that
// a search never sees what was not committed. Searches take a filter that is
// applied during the search (the graph walk widens its beam until enough
// items pass), not to a top-k taken before it.
//
// Distances are computed with AVX2 and FMA where the processor has them
// (distance_amd64.s), in plain Go elsewhere.
//
// The package is a leaf: it imports only the standard library,
// golang.org/x/sys/cpu and github.com/google/btree (MemStore). It must not import the engine, storage, query or any
// other package of this module.
package vector
