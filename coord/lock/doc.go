// Package lock is a distributed lock (a lease) over a Cosmos DB container,
// for short critical sections such as choosing and holding the best
// available seats. It is built on the azcosmos SDK and coord alone, and
// must not import the other coord packages nor anything of the Orrery
// server.
//
// A lock is one document per name in a lock container with time to live
// enabled: the database, not the client's clock, expires a holder that
// stopped renewing. Every acquisition also advances a fencing counter, a
// document without TTL in the same logical partition, in the same
// transactional batch as the lease write; so every acquisition gets a token
// strictly greater than every earlier one for that name, across expiries and
// holders.
//
// While held, a lock renews itself in the background. Lost (and Context)
// fire when the holder can no longer be sure it holds the lock: a renewal
// found another holder or an expired lease, or no renewal succeeded within
// the part of the TTL the service is sure to honour. The holder must stop
// touching the protected resource then.
//
// # Fencing
//
// A holder that is paused (a long garbage collection, a stopped VM, a
// network partition) can outlive its lease without knowing it: when it wakes
// up it still believes it holds the lock, and nothing it checks locally can
// tell it otherwise in time. The protected items therefore check the lock's
// fencing token themselves. Every fenced write (FencedCreate,
// FencedReplace, FencedUpsert, FencedPatch, FencedDelete, and the
// operations of a FencedBatch) records the writer's token in the item's
// FencesField map, under the lock's name, and applies only if the item has
// accepted no newer token for that name, in one conditional write the
// database evaluates atomically. One item can be guarded by several locks:
// each name has its own entry.
//
// What the fence guarantees, and what it does not: a paused holder is
// stopped by the fence only once its successor has written the item. Until
// the successor's first fenced write of an item, that item still carries the
// paused holder's own token (or none), and the paused holder's late write
// to it succeeds. The fence orders the writers of each item; it does not
// make the first writer's lease extend to items it never touched. Design
// the critical section so that its successor writes what it must protect
// (the seat map, the counter) before relying on it, or keep leases long
// enough that a pause past one is rare, and treat Lost as the signal to
// stop.
//
// Every write is conditional on an ETag, and every acquisition carries an
// owner id unique to it, so an ambiguous outcome (the write applied but the
// reply was lost, and a retry was refused) is recognized by reading the lease
// back: the holder finds its own id and keeps the lock, and nobody is
// granted a lock that is still held.
package lock
