package engine

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/orrery-db/orrery/storage"
)

// The local seam: an engine alone on its store (Pebble, memory). The
// partition transaction under a mutex of this process, the presence
// filter, point reads answered from the store and the durability barrier.

// localSeam is the seam of an engine alone on its store: locks are
// mutexes of this process, LSNs come from the sequencer, the catalog cache
// is the catalog. It holds the parts it uses, not the engine; Open builds
// it.
type localSeam struct {
	store   storage.Store
	catalog *catalog
	seq     lsnSource
	durable *durability
	now     func() time.Time
	// presence is the containers' presence filters, search their search
	// indexes (the engine's, not copies).
	presence *presenceFilters
	search   *searchIndexes
	// locks are the engine's partition write locks (Engine.locks, not a
	// copy), picked by a hash of the partition under seed.
	locks []sync.Mutex
	seed  maphash.Seed
	// sweeper is the TTL sweep, which runs through this seam.
	sweeper *sweeper
	// noCreationOrder makes the transactions write no order key (only the
	// benchmark of creation order sets it: withoutCreationOrder).
	noCreationOrder bool
}

func (*localSeam) containerMoved(context.Context, string, string, *Container) (bool, error) {
	return false, nil
}

func (l *localSeam) cachedContainer(ctx context.Context, db, name string) (*Container, []byte, error) {
	c, err := l.catalog.Container(ctx, db, name)
	return c, nil, err
}

func (*localSeam) current(c *Container) bool { return !c.retired.Load() }

func (l *localSeam) itemsSnapshot(ctx context.Context, db, name string, extra func(c *Container) [][]byte, settle time.Duration) (c *Container, snap storage.Snapshot, values [][]byte, watermark uint64, err error) {
	if c, err = l.catalog.Container(ctx, db, name); err != nil {
		return nil, nil, nil, 0, err
	}
	if settle > 0 {
		// Settled before the snapshot, which then holds every write
		// below the watermark.
		w, err := l.seq.settle(ctx, settle)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		watermark = w + 1
	}
	if snap, err = l.store.NewSnapshot(ctx); err != nil {
		return nil, nil, nil, 0, err
	}
	if extra != nil {
		if values, err = storage.GetMany(ctx, snap, extra(c)); err != nil {
			snap.Close()
			return nil, nil, nil, 0, err
		}
	}
	return c, snap, values, watermark, nil
}

func (l *localSeam) containerScripts(ctx context.Context, db, coll string, kind ScriptKind, ids []string) (*Container, []map[string]any, error) {
	c, err := l.catalog.Container(ctx, db, coll)
	if err != nil {
		return nil, nil, err
	}
	props := make([]map[string]any, len(ids))
	for i, id := range ids {
		if props[i], _, err = readScript(ctx, l.store, c, kind, id); err != nil {
			return nil, nil, err
		}
	}
	return c, props, nil
}

func (*localSeam) snapshotSession(uint64) uint64 { return 0 }

func (l *localSeam) notePresent(c *Container, key []byte) { l.presence.of(c).Add(key) }

func (*localSeam) refreshCatalog(context.Context) error { return nil }

func (l *localSeam) lockCatalog(context.Context) error {
	l.catalog.catMu.mu.Lock()
	return nil
}

func (l *localSeam) unlockCatalog() { l.catalog.catMu.mu.Unlock() }

func (l *localSeam) catalogBatch() (storage.Batch, error) { return l.store.NewBatch(), nil }

func (*localSeam) catalogChanged(storage.Batch) error { return nil }

func (l *localSeam) sweepLoop(interval time.Duration) { l.sweeper.sweepLoop(interval) }

func (*localSeam) placeRanges(*containerRecord, []byte) {}

func (*localSeam) notePlacement(*Container) {}

func (*localSeam) placeCount() int { return 1 }

// absent reports whether the item key was certainly never written: the
// presence filter says so once it is built.
func (l *localSeam) absent(c *Container, key []byte) bool {
	f := l.presence.of(c)
	return f.Ready() && !f.MayContain(key)
}

// readItem is ReadItem on a store of this process alone.
func (l *localSeam) readItem(ctx context.Context, req *ItemRequest) (*ItemResult, error) {
	c := req.resolved().c
	if c == nil || c.retired.Load() {
		// Not resolved, or replaced or deleted since.
		var err error
		if c, err = l.catalog.Container(ctx, req.Database, req.Container); err != nil {
			return nil, err
		}
	}
	if !req.HasPartitionKey {
		return nil, errPartitionKeyRequired
	}
	r := new(pointRead)
	if perr := c.partitionInto(&r.p, req.PartitionKey); perr != nil {
		return nil, perr
	}
	if verr := validItemID(req.ID); verr != nil {
		return nil, verr
	}
	if err := l.pointRead(ctx, c, r.p.itemKey(req.ID), &r.it); err != nil {
		return nil, err
	}
	r.res = readResult(&r.it, req.IfNoneMatch, 0)
	return &r.res, nil
}

// pointRead is a point read's partition, record and answer, in one
// allocation.
type pointRead struct {
	p   partition
	it  storedItem
	res ItemResult
}

// inPartition is the partition transaction for an engine alone on its store: the
// partition's lock is a mutex of this process.
func (l *localSeam) inPartition(ctx context.Context, c *Container, pk PartitionKey, _ []string, r txnRunner) error {
	var p *partition
	var mu *sync.Mutex
	t, room := r.room()
	err := l.catalog.onCurrent(ctx, c, pk, room, func(c *Container, pp *partition) (bool, error) {
		mu = l.partitionLock(c.rid, pp.enc)
		mu.Lock()
		if c.retired.Load() {
			// A replace of the container (say, of its indexing policy)
			// came first: write by its rules.
			mu.Unlock()
			return false, nil
		}
		p = pp
		return true, nil
	})
	if err != nil {
		return err
	}
	locked := true
	defer func() {
		if locked {
			mu.Unlock()
			l.durable.barrier()
		}
	}()
	b := l.store.NewBatch()
	defer b.Close()
	if t == nil {
		t = new(txn)
	}
	*t = txn{indexes: l.search, presence: l, lsns: l.seq, noCreationOrder: l.noCreationOrder, p: p, b: b, now: l.now()}
	defer func() {
		if t.lsn != 0 {
			l.seq.finish(t.lsn)
		}
	}()
	defer func() { t.search.Abort() }()
	if err := r.run(t); err != nil {
		return err
	}
	if b.Count() == 0 {
		return nil
	}
	// The write is pending for readers' barriers before the store makes it
	// visible: CommitPipelined publishes the batch before it returns, and a
	// read in between would otherwise find it visible, not pending, and
	// return a write a crash could take back.
	l.durable.applied(t.lsn)
	defer l.durable.durable(t.lsn)
	wait, err := b.CommitPipelined(ctx)
	if err != nil {
		return err
	}
	t.search.Commit()
	mu.Unlock()
	locked = false
	return wait()
}

// partitionLock returns the mutex that serializes the writers of one logical
// partition.
func (l *localSeam) partitionLock(collRID, pkEnc []byte) *sync.Mutex {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.Write(collRID)
	h.Write(pkEnc)
	return &l.locks[h.Sum64()%uint64(len(l.locks))]
}

// pointRead reads the record of the item key of c into it, outside any
// transaction: 404 when it is absent or expired. What it read, a write or
// a delete, is durable before it returns: a record it returns, the write
// of that record (its LSN); an absence, which a delete then pending may
// have made, every write then pending.
func (l *localSeam) pointRead(ctx context.Context, c *Container, key []byte, it *storedItem) error {
	v, err := l.store.Get(ctx, key)
	if err != nil {
		l.durable.barrier()
		if errors.Is(err, storage.ErrNotFound) {
			return NotFound(msgNotFound)
		}
		return err
	}
	if err := decodeItemInto(it, key, v); err != nil {
		l.durable.barrier()
		return err
	}
	if c.expired(it, l.now().Unix()) {
		l.durable.barrier()
		return NotFound(msgNotFound)
	}
	l.durable.waitFor(it.lsn)
	return nil
}
