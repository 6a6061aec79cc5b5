package searchindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/orrery-db/orrery/engine/internal/keys"
	"github.com/orrery-db/orrery/engine/internal/vector"
	"github.com/orrery-db/orrery/storage"
)

// In Shared mode (several gateways on one PostgreSQL database) each
// gateway keeps its own search indexes, in its memory, and makes them
// follow the store:
//
//   - Every item write records, in its own transaction, the item's key
//     under the write's LSN (keys.SearchChangeKey): one more key in the
//     write, and no key that two writers of different partitions share.
//   - A query's snapshot comes with the store's watermark W: every write
//     numbered below W is in it, or rolled back. Before the indexes answer
//     the query they catch up from it: the change records the snapshot
//     holds from the indexes' own watermark on are read, and each item they
//     name is indexed again as the snapshot has it (a gateway's indexes are
//     built the same way, from a snapshot of the items, when first used).
//   - The indexes then hold every change below W, and possibly some above
//     it (committed while an older write was still open, or by a later
//     snapshot of another query): the items whose newest change applied is
//     numbered W or above are stale for the query, which leaves them out of
//     what the index answers and evaluates them from its snapshot instead.
//     Every other item is in the indexes exactly as in the snapshot, so the
//     answer is the one an exact evaluation over the snapshot gives.
//
// The change records older than a retention are pruned by the gateway that
// runs the TTL sweep, which moves the container's horizon
// (keys.SearchChangeHorizon) in the same batch; a gateway whose indexes are
// older than the horizon (idle that long) rebuilds them from a snapshot.

// appliedKept is how many items' newest applied change a catch-up keeps
// before it forgets those below the watermark.
const appliedKept = 4096

// errBehind reports indexes older than the change records' horizon.
var errBehind = errors.New("searchindex: the search indexes are older than the change records kept")

// shared keeps the indexes in this process's memory.
type shared struct{ s *Set }

// catchUp is a gateway's catch-up state of one container's search indexes
// in Shared mode.
type catchUp struct {
	// lock is taken for writing by a catch-up and for reading by the
	// searches, which read the indexes and applied.
	lock readerLock
	// covered is a watermark: every change numbered below it is applied.
	covered uint64
	// applied maps an item key's suffix to the number of the newest of its
	// changes applied, for every change applied numbered floor or above.
	floor   uint64
	applied map[string]uint64
}

func (sh *shared) kept() bool { return true }

func (sh *shared) open(ctx context.Context, spec Spec, st *State) error {
	st.make(spec, func([]byte) keyspace { return inMemory{vector.NewMemStore()} })
	return sh.load(ctx, st)
}

// load builds st's indexes, in memory, from a snapshot of the container's
// items, and catches them up with the change records of the snapshot.
func (sh *shared) load(ctx context.Context, st *State) error {
	for _, v := range st.Vectors {
		v.space = inMemory{vector.NewMemStore()}
	}
	for _, t := range st.Texts {
		t.space = inMemory{vector.NewMemStore()}
	}
	// The keyspaces are in memory, new: nothing to read.
	if err := st.load(ctx, emptyReader{}); err != nil {
		return err
	}
	snap, _, w, err := sh.s.opts.Store.(storage.Shared).SnapshotAll(ctx, nil)
	if err != nil {
		return err
	}
	defer snap.Close()
	err = scanItems(ctx, sh.s.opts.Decode, st.spec.RID, snap, func(chunk []item) error {
		return indexChunk(st, nil, chunk, nil)
	})
	if err != nil {
		return err
	}
	if st.caught == nil {
		st.caught = &catchUp{}
	}
	// The indexes are the snapshot's. What changed from buildMargin LSNs
	// before its watermark on is noted as applied, so that the queries
	// whose snapshots are older than this one (the one that asked for the
	// build, say) can tell the items they see otherwise.
	cu := st.caught
	from := uint64(1)
	if w > buildMargin {
		from = w - buildMargin
	}
	cu.covered, cu.applied = from, map[string]uint64{}
	horizon, err := sh.catchUp(ctx, st, snap, w, false)
	if err != nil {
		return err
	}
	cu.floor = max(from, horizon)
	return nil
}

// buildMargin is how far below its snapshot's watermark a build of the
// indexes notes the changes, for older queries.
const buildMargin = 1 << 16

// catchUp applies to st the changes snapshot r holds from its indexes'
// watermark on; w is r's watermark. The caller holds st's lock for
// writing. errBehind means the records were pruned past the indexes. With
// apply false the changes are only noted as applied (the indexes are r's
// already), and the horizon below which they are pruned is returned.
func (sh *shared) catchUp(ctx context.Context, st *State, r storage.Reader, w uint64, apply bool) (uint64, error) {
	cu := st.caught
	rid := st.spec.RID
	prefix := keys.SearchChangePrefix(rid)
	horizonKey := keys.SearchChangeHorizon(rid)
	it, err := r.NewIterator(ctx, keys.SearchChangeKey(rid, cu.covered, nil), storage.PrefixEnd(prefix), false)
	if err != nil {
		return 0, err
	}
	newest := map[string]uint64{}
	var horizon uint64
	for it.Next() {
		k := it.Key()
		if bytes.Equal(k, horizonKey) {
			if len(it.Value()) == 8 {
				horizon = binary.BigEndian.Uint64(it.Value())
			}
			continue
		}
		if len(k) < len(prefix)+8 {
			continue
		}
		lsn := binary.BigEndian.Uint64(k[len(prefix):])
		suffix := string(k[len(prefix)+8:])
		if lsn > newest[suffix] {
			newest[suffix] = lsn
		}
	}
	if err := it.Err(); err != nil {
		it.Close()
		return 0, err
	}
	it.Close()
	if horizon > cu.covered && apply {
		return 0, errBehind
	}
	var todo []string
	for suffix, lsn := range newest {
		if !apply {
			cu.applied[suffix] = lsn
		} else if lsn > cu.applied[suffix] {
			todo = append(todo, suffix)
		}
	}
	slices.Sort(todo)
	for len(todo) > 0 {
		n := min(len(todo), RebuildChunk)
		itemKeys := make([][]byte, n)
		for i, s := range todo[:n] {
			itemKeys[i] = keys.ItemKeyFromSuffix(rid, []byte(s))
		}
		values, err := storage.GetMany(ctx, r, itemKeys)
		if err != nil {
			return 0, err
		}
		sx := &Txn{}
		if err := sx.Begin(st, nil); err != nil {
			sx.Abort()
			return 0, err
		}
		for i, s := range todo[:n] {
			var get Getter
			if values[i] != nil {
				doc, err := sh.s.opts.Decode(itemKeys[i], values[i])
				if err != nil {
					sx.Commit()
					return 0, err
				}
				get = DocGetter(doc)
			}
			if err := sx.Add(st, []byte(s), get); err != nil {
				sx.Commit()
				return 0, err
			}
			cu.applied[s] = newest[s]
		}
		sx.Commit()
		todo = todo[n:]
	}
	if w > cu.covered {
		cu.covered = w
	}
	if len(cu.applied) > appliedKept {
		for s, lsn := range cu.applied {
			if lsn < cu.covered {
				delete(cu.applied, s)
			}
		}
		cu.floor = cu.covered
	}
	return horizon, nil
}

// retire retires st: no writer holds a gateway's indexes in Shared mode.
func (sh *shared) retire(st *State) func() {
	st.retired.Store(true)
	return func() {}
}

// reindex records in the item's transaction that the item changed: each
// gateway's indexes catch up from the change records.
func (sh *shared) reindex(_ *Write, b storage.Batch, lsn uint64, c Container, suffix []byte, _ Getter) error {
	if !c.HasIndexes() {
		return nil
	}
	return b.Set(keys.SearchChangeKey(c.RID(), lsn, suffix), []byte{})
}

// sharedQuery is a query's snapshot's watermark, and the indexes caught up
// with it already (an index is asked several times by one query, from
// within its own searches too).
type sharedQuery struct {
	watermark uint64
	mu        sync.Mutex
	caught    map[*State]bool
}

type sharedQueryKey struct{}

func (sh *shared) withQuery(ctx context.Context, w uint64) context.Context {
	return context.WithValue(ctx, sharedQueryKey{}, &sharedQuery{watermark: w, caught: map[*State]bool{}})
}

// BuildWait is how long a query in Shared mode waits for its gateway to
// build a container's search indexes (the first use, a policy change, a
// gateway idle past the change records) before it evaluates exactly
// instead, the build going on.
const BuildWait = time.Second

func (sh *shared) view(ctx context.Context, c Container, r storage.Reader) (*State, *View, error) {
	q, _ := ctx.Value(sharedQueryKey{}).(*sharedQuery)
	if q == nil {
		return nil, nil, nil
	}
	st, err := sh.s.Within(ctx, c, BuildWait)
	if st == nil || err != nil {
		return nil, nil, err
	}
	cu := st.caught
	q.mu.Lock()
	caught := q.caught[st]
	q.mu.Unlock()
	if !caught {
		cu.lock.lock()
		_, err := sh.catchUp(ctx, st, r, q.watermark, true)
		if errors.Is(err, errBehind) {
			err = sh.load(ctx, st)
		}
		cu.lock.unlock()
		if err != nil {
			return nil, nil, err
		}
		q.mu.Lock()
		q.caught[st] = true
		q.mu.Unlock()
	}
	cu.lock.rlock()
	if q.watermark < cu.floor {
		cu.lock.runlock()
		return nil, nil, nil
	}
	v := &View{stale: map[string]bool{}, release: cu.lock.runlock}
	for s, lsn := range cu.applied {
		if lsn >= q.watermark {
			v.stale[s] = true
		}
	}
	return st, v, nil
}

// whole: a gateway's indexes are caught up with the query's snapshot.
func (sh *shared) whole(context.Context, *State, storage.Reader) (bool, error) { return true, nil }

// readerLock is a readers-writer lock that never makes a reader wait for a
// writer that is only waiting: a search holding it may take it again from
// within (a query's filter asking the index's statistics) while a catch-up
// waits for it.
type readerLock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	readers int
	writing bool
}

func (l *readerLock) wait() {
	if l.cond == nil {
		l.cond = sync.NewCond(&l.mu)
	}
	l.cond.Wait()
}

func (l *readerLock) rlock() {
	l.mu.Lock()
	for l.writing {
		l.wait()
	}
	l.readers++
	l.mu.Unlock()
}

func (l *readerLock) runlock() {
	l.mu.Lock()
	l.readers--
	if l.readers == 0 && l.cond != nil {
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}

func (l *readerLock) lock() {
	l.mu.Lock()
	for l.writing || l.readers > 0 {
		l.wait()
	}
	l.writing = true
	l.mu.Unlock()
}

func (l *readerLock) unlock() {
	l.mu.Lock()
	l.writing = false
	if l.cond != nil {
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}
