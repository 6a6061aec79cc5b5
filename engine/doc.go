// Package engine holds the database semantics of Orrery: accounts, databases,
// containers, items, ETags and preconditions, partition keys, patch (a pure
// function on the document) and transactional batches (one partition
// transaction), and the write path that puts an item and its change-feed record
// into one storage transaction.
//
// The change feed (changefeed.go) reads the latest-version index and the
// all-versions-and-deletes log (logChange, txn.go) only up to the sequencer's
// watermark, so a write that commits late with a lower sequence number is
// never passed over. Time to live hides expired items from every read at once;
// a background sweeper (ttl.go) deletes them for real, paced so writers keep
// their latency, and prunes change records past their retention.
//
// It takes typed requests and returns typed results or *Error values carrying
// the Cosmos status and substatus. It knows nothing of HTTP (it must not import
// net/http or the server package) and reaches storage only through the
// storage.Store interface.
package engine
