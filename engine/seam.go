package engine

import (
	"context"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// seam is what differs between an engine alone on its store (localSeam)
// and one of several engines sharing a store (sharedSeam, on a
// storage.Shared such as PostgreSQL). Open picks one; the rest of the
// engine calls through it and never asks which it has.
type seam interface {
	// inPartition runs fn in a transaction of the logical partition pk of
	// c, holding the partition's write lock. ids names items fn reads
	// first: a shared store reads them with the locks, in one round trip.
	// The lock is held while fn reads and decides and until the commit is
	// applied, not across the fsync: the next writer of a hot partition
	// builds on the applied state while this one waits for its own fsync,
	// and is acknowledged only after it (the log is ordered).
	//
	// fn may have read writes that are applied but not yet durable, and
	// what it read goes back to the client: in a batch's Read results, a
	// stored procedure's body, even the message of an error it threw. A
	// transaction that commits is answered after its own fsync, which
	// makes everything it read durable too; one that writes nothing (it
	// only read, or it failed and is rolled back) waits for the durability
	// barrier instead, as point reads do, after releasing the partition's
	// lock.
	//
	// r.run is given the transaction, built in r.room() when r has room
	// for it (a single write's, kept with its operation), else in an
	// allocation of its own.
	inPartition(ctx context.Context, c *Container, pk PartitionKey, ids []string, r txnRunner) error
	// containerMoved reports, after a partition transaction failed before
	// it began, whether db/coll is no longer c (replaced or deleted on
	// another gateway): the request is then made again.
	containerMoved(ctx context.Context, db, coll string, c *Container) (bool, error)
	// readItem is ReadItem.
	readItem(ctx context.Context, req *ItemRequest) (*ItemResult, error)
	// cachedContainer is CachedContainer with the catalog version the
	// cache answered at (nil on a local store).
	cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error)
	// itemsSnapshot looks container db/name up and opens the snapshot
	// that a read of its items (a query page, a change-feed page) runs in,
	// with the store's watermark as of that snapshot (without a shared
	// store: 0, or with settle, one above the sequencer's settled
	// watermark, read before the snapshot is taken). On a shared store the
	// container comes from the cache and the round trip that opens the
	// snapshot checks the catalog version and reads the watermark
	// (Shared.SnapshotAll), along with the keys extra names for the
	// container (values[i] is extra's i-th key's value, nil when absent;
	// without a shared store they are read from the snapshot); if the
	// version moved, the catalog is reloaded and the container looked up
	// again, so that a container deleted or changed on another gateway is
	// seen at once. With settle, the snapshot is taken again, for at most
	// settle, until its watermark covers every write this engine has
	// finished and, where the store's first snapshot tells it
	// (storage.Ended), every write any gateway had finished when the read
	// began.
	itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (*Container, storage.Snapshot, [][]byte, uint64, error)
	// containerScripts is scriptHost.containerScripts.
	containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error)
	// current reports whether a container a request resolved may be
	// read without looking it up again: on a local store, unless it was
	// replaced or deleted since; never on a shared one, whose snapshot's
	// round trip checks the catalog version.
	current(c *Container) bool
	// snapshotSession is the session LSN a read answers with, given the
	// watermark its snapshot came with: 0 when the caller asks SessionLSN.
	snapshotSession(watermark uint64) uint64
	// presenceSeam: whether an item key was certainly never written.
	presenceSeam
	// catalogLocker: the catalog cache's reload and lock.
	catalogLocker
	// catalogBatch starts a batch of catalog changes; catalogChanged
	// records in b that other engines must reload the catalog.
	catalogBatch() (storage.Batch, error)
	catalogChanged(b storage.Batch) error
	// sweepLoop runs the TTL sweeper every interval until Close.
	sweepLoop(interval time.Duration)
	// placeRanges gives a new container's ranges their places, on a store
	// of several (storage/placed); notePlacement records where c's ranges
	// live, for the store's router; placeCount is how many places the
	// store has, 1 for most.
	placeRanges(rec *containerRecord, rid []byte)
	notePlacement(c *Container)
	placeCount() int
}

// txnRunner is what a partition transaction runs (seam.inPartition): run
// is given the transaction, built in room's txn, on a partition built in
// room's partition, where they are not nil. A single write passes its
// operation's run, which has room for both: neither a closure, a
// transaction nor a partition is allocated for it.
type txnRunner interface {
	room() (*txn, *partition)
	run(t *txn) error
}

// txnFunc is a function run in a partition transaction of its own
// allocation.
type txnFunc func(t *txn) error

func (txnFunc) room() (*txn, *partition) { return nil, nil }

func (f txnFunc) run(t *txn) error { return f(t) }
