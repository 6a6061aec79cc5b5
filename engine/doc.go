// Package engine holds the database semantics of Orrery: accounts, databases,
// containers, items, ETags and preconditions, partition keys, patch (a pure
// function on the document) and transactional batches (one partition
// transaction), and the write path that puts an item and its change-feed record
// into one storage transaction.
//
// It takes typed requests and returns typed results or *Error values carrying
// the Cosmos status and substatus. It knows nothing of HTTP (it must not import
// net/http or the server package) and reaches storage only through the
// storage.Store interface.
package engine
