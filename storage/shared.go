package storage

import "context"

// Shared is implemented by a Store that several processes use at once, each
// running its own engine (one gateway each, say), so that together they
// behave as one database. The engine orders the writers of a logical
// partition, numbers writes for the change feed and elects the process that
// runs background duties through it. A Store without it belongs to one
// process: the engine then does all of this with in-process locks and
// counters, which are faster.
type Shared interface {
	Store
	// NewSharedBatch starts a write batch that can take locks and a sequence
	// number shared by every process on the store. Its reads see the
	// store's latest committed state (as of each read, read-committed) with
	// its own writes on top. Its iterators may read a long range in several
	// such reads (PostgreSQL's reads a page at a time), so a batch that
	// another writer commits meanwhile may be seen in part: what must not
	// change under an iterator, the caller keeps still with locks.
	NewSharedBatch(ctx context.Context) (SharedBatch, error)
	// Watermark returns a sequence number such that every batch with a
	// lower Sequence has committed or rolled back: a change-feed reader that
	// reads only entries below it never passes over an entry that commits
	// later with a lower number.
	Watermark(ctx context.Context) (uint64, error)
	// GetAll reads keys and the Watermark together, all as of one moment
	// and in one round trip to a server: values[i] is the value of
	// keys[i], nil when it is absent. A caller that checks a key it keeps
	// cached (a version) alongside the key it wants pays nothing for the
	// check, and the watermark comes with the read.
	GetAll(ctx context.Context, keys [][]byte) (values [][]byte, watermark uint64, err error)
	// SnapshotAll is NewSnapshot and GetAll together, in one round trip to
	// a server: it opens a snapshot and reads keys in it, with a watermark
	// the snapshot covers (every batch with a lower Sequence is in it, or
	// rolled back), so that a change-feed reader may read the snapshot's
	// entries up to the watermark. A query checks the catalog version it
	// keeps cached and takes its session token in the round trip that
	// opens its snapshot. The caller must Close the snapshot.
	SnapshotAll(ctx context.Context, keys [][]byte) (snap Snapshot, values [][]byte, watermark uint64, err error)
	// Lead makes this process the one that performs duty (say, the TTL
	// sweep) among all processes on the store. It blocks until it does, ctx
	// is done (ctx.Err()) or the store fails. It returns lost, closed when
	// the duty is no longer held (the connection that held it was lost),
	// and release, which gives the duty up.
	Lead(ctx context.Context, duty string) (lost <-chan struct{}, release func(), err error)
}

// Ended is implemented by a snapshot that a Shared store's SnapshotAll
// opens when the store can tell, besides the snapshot's watermark, the
// highest Sequence of a batch that had ended (committed or rolled back)
// when the snapshot was taken: every batch whose commit was acknowledged,
// by any process, before SnapshotAll was called has a Sequence at or
// below it. The watermark may lag behind it while an older batch is still
// open; a change-feed reader that waits until a later snapshot's watermark
// is above it shows every write acknowledged before its read began, on
// whichever process it was made.
type Ended interface {
	Ended() uint64
}

// SharedBatch is a Batch of a Shared store.
type SharedBatch interface {
	Batch
	// Lock takes the lock named by key until the batch commits or is
	// closed, waiting while another batch, in any process, holds it in a
	// conflicting mode: shared holders of one name hold it together, an
	// exclusive holder alone. Waiters are served in arrival order.
	Lock(ctx context.Context, key []byte, exclusive bool) error
	// Sequence returns the batch's sequence number, the same on every call.
	// Called after Lock, it is greater than the Sequence of every batch that
	// held a conflicting lock before this one, and no two batches share one;
	// numbers may skip.
	Sequence(ctx context.Context) (uint64, error)
	// Begin takes locks in order, as Lock does, then reads keys as Get
	// does (values[i] is keys[i]'s value, nil when absent), then, if
	// sequence, takes the batch's Sequence (which Sequence returns from
	// then on), all in one round trip to a server: what a transaction does
	// first, checking a version and reading what it will change under its
	// locks.
	Begin(ctx context.Context, locks []LockRequest, keys [][]byte, sequence bool) (values [][]byte, err error)
	// CommitWatermark is Commit, and returns the Shared store's Watermark
	// as of just after the commit, read in the same round trip. A watermark
	// it could not read after the commit succeeded is 0, with a nil error:
	// the batch is committed.
	CommitWatermark(ctx context.Context) (uint64, error)
}

// LockRequest names a lock of Begin and its mode.
type LockRequest struct {
	Key       []byte
	Exclusive bool
}
