package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"

	"github.com/google/btree"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orrery-db/orrery/storage"
)

// overlay is the pending writes of a batch, sorted by key.
type overlay struct {
	pending *btree.BTreeG[entry] // nil once committed or closed
	count   int
	deletes int // pending deletions among pending's entries
	inserts int // pending entries declared new (storage.Inserter)
	// slab holds the copies of the keys and values written, one after
	// another: a write of an item (its record and ~12 keys) copies into
	// one or two allocations, not one per key. A full slab is left to the
	// entries that point into it, never written again, so what an
	// iterator was given stays as it was.
	slab []byte
	// slabs is the slabs taken from slabPools, given back by drop unless
	// lent is set: an iterator was given the pending writes (writesIn),
	// whose keys and values point into them.
	slabs  [4]*[]byte
	nslabs int
	lent   bool
}

// slabFirst is the size of a batch's first slab (an item's write of a
// few hundred bytes and its keys fit), slabMax that of its largest.
const (
	slabFirst = 2 << 10
	slabMax   = 32 << 10
)

// slabPools holds the slabs of dropped batches, by size (slabFirst
// doubled i times in slabPools[i]), for the next batches: a write's copies
// then allocate nothing.
var slabPools [slabClasses]sync.Pool

// slabClasses is the number of slab sizes, slabFirst to slabMax.
const slabClasses = 5 // 2, 4, 8, 16 and 32 KiB

// newSlab returns an empty slab of size bytes, a size of slabPools'.
func (o *overlay) newSlab(size int) []byte {
	class := bits.Len(uint(size/slabFirst)) - 1
	p, _ := slabPools[class].Get().(*[]byte)
	if p == nil {
		b := make([]byte, 0, size)
		p = &b
	}
	if o.nslabs < len(o.slabs) {
		o.slabs[o.nslabs] = p
		o.nslabs++
	}
	return (*p)[:0]
}

// hold returns n bytes of the slab for a copy; a copy over half a largest
// slab gets an allocation of its own.
func (o *overlay) hold(n int) []byte {
	if n > slabMax/2 {
		return make([]byte, n)
	}
	if cap(o.slab)-len(o.slab) < n {
		size := min(max(2*cap(o.slab), slabFirst), slabMax)
		for size < n {
			size *= 2
		}
		o.slab = o.newSlab(size)
	}
	at := len(o.slab)
	o.slab = o.slab[:at+n]
	return o.slab[at : at+n : at+n]
}

func (o *overlay) set(key, value []byte, insert bool) error {
	if o.pending == nil {
		return storage.ErrClosed
	}
	buf := o.hold(len(key) + len(value))
	copy(buf, key)
	copy(buf[len(key):], value)
	e := entry{key: buf[:len(key):len(key)], value: buf[len(key):], fresh: insert}
	old, replaced := o.pending.ReplaceOrInsert(e)
	if replaced {
		if old.deleted {
			o.deletes--
		}
		if old.fresh {
			o.inserts--
		}
		// A key the batch wrote before is declared new only if that
		// write declared it (storage.Inserter): an Insert after a Set
		// or a Delete is a Set, a Set after an Insert keeps it.
		if e.fresh != old.fresh {
			e.fresh = old.fresh
			o.pending.ReplaceOrInsert(e)
		}
	}
	if e.fresh {
		o.inserts++
	}
	o.count++
	return nil
}

func (o *overlay) del(key []byte) error {
	if o.pending == nil {
		return storage.ErrClosed
	}
	k := o.hold(len(key))
	copy(k, key)
	old, replaced := o.pending.ReplaceOrInsert(entry{key: k, deleted: true})
	if !replaced || !old.deleted {
		o.deletes++
	}
	if replaced && old.fresh {
		o.inserts--
	}
	o.count++
	return nil
}

// drop forgets the pending writes, giving the tree, its nodes and the
// slabs (unless lent) back for the next batch.
func (o *overlay) drop() {
	if o.pending != nil {
		o.pending.Clear(true)
		trees.Put(o.pending)
		o.pending = nil
	}
	o.slab = nil
	for i, p := range o.slabs[:o.nslabs] {
		if !o.lent {
			slabPools[bits.Len(uint(cap(*p)/slabFirst))-1].Put(p)
		}
		o.slabs[i] = nil
	}
	o.nslabs = 0
}

// lookup returns the pending write of key, if any.
func (o *overlay) lookup(key []byte) (value []byte, found bool, err error) {
	e, ok := o.pending.Get(entry{key: key})
	if !ok {
		return nil, false, nil
	}
	if e.deleted {
		return nil, true, storage.ErrNotFound
	}
	return bytes.Clone(e.value), true, nil
}

// readOwn answers a batch's read of key with no round trip when it can:
// done is true when the batch is closed, ctx has ended or the batch wrote
// key, and value and err are then the answer.
func (o *overlay) readOwn(ctx context.Context, key []byte) (value []byte, done bool, err error) {
	if o.pending == nil {
		return nil, true, storage.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, true, &callerGone{err: err}
	}
	return o.lookup(key)
}

// own puts the batch's own writes of keys in values (a delete stays nil)
// and returns the other keys, to be read from the store, and where they
// are in keys, appended to rest and at.
func (o *overlay) own(keys, values [][]byte, rest [][]byte, at []int) ([][]byte, []int) {
	for i, key := range keys {
		if v, mine, err := o.lookup(key); mine {
			if err == nil {
				values[i] = v
			}
			continue
		}
		rest, at = append(rest, key), append(at, i)
	}
	return rest, at
}

// present is the value of a one-key read (Begin, GetMany): ErrNotFound
// when the key is absent.
func present(values [][]byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if values[0] == nil {
		return nil, storage.ErrNotFound
	}
	return values[0], nil
}

// writesIn returns the pending writes with keys in [lower, upper),
// ascending, for storage.NewOverlayIterator.
func (o *overlay) writesIn(lower, upper []byte) []storage.Write {
	o.lent = true // the writes point into the slabs: never reused
	var out []storage.Write
	visit := func(e entry) bool {
		if upper != nil && bytes.Compare(e.key, upper) >= 0 {
			return false
		}
		out = append(out, storage.Write{Key: e.key, Value: e.value, Delete: e.deleted})
		return true
	}
	if lower != nil {
		o.pending.AscendGreaterOrEqual(entry{key: lower}, visit)
	} else {
		o.pending.Ascend(visit)
	}
	return out
}

// The kinds of a batch's pending writes, each sent as one array (or two,
// keys and values) of tripWrites' statement.
const (
	kindUpsert = iota // Set: INSERT … ON CONFLICT DO UPDATE
	kindInsert        // Insert: a plain INSERT, which fails on a key that exists
	kindDelete        // Delete
	kinds
)

// writeStatements are tripWrites' statements, by the set of kinds a batch
// has (bit 1<<kind): one statement for all of them, the others' in a
// data-modifying WITH (each run to completion whatever the main statement
// reads; they touch different keys). Parameters: the upserts' keys and
// values, the inserts' keys and values, the deleted keys, those present.
var writeStatements = func() (sts [1 << kinds]*statement) {
	for mask := 1; mask < len(sts); mask++ {
		var parts []string
		n := 0
		param := func() string { n++; return fmt.Sprintf("$%d::bytea[]", n) }
		if mask&(1<<kindUpsert) != 0 {
			k, v := param(), param()
			parts = append(parts, `INSERT INTO orrery_kv (k, v) SELECT * FROM unnest(`+k+`, `+v+`)
			ON CONFLICT (k) DO UPDATE SET v = excluded.v`)
		}
		if mask&(1<<kindInsert) != 0 {
			k, v := param(), param()
			parts = append(parts, `INSERT INTO orrery_kv (k, v) SELECT * FROM unnest(`+k+`, `+v+`)`)
		}
		if mask&(1<<kindDelete) != 0 {
			parts = append(parts, `DELETE FROM orrery_kv WHERE k = ANY(`+param()+`)`)
		}
		// The main statement is the first; a delete rides in a WITH
		// before it, as it always has, an upsert beside an insert too.
		sql := parts[0]
		if len(parts) > 1 {
			var with []string
			for i, p := range parts[1:] {
				with = append(with, fmt.Sprintf("w%d AS (%s)", i, p))
			}
			sql = "WITH " + strings.Join(with, ", ") + "\n\t\t\t" + parts[0]
		}
		sts[mask] = newStatement(sql)
	}
	return sts
}()

// tripWrites adds the overlay's writes to t in one statement: an upsert
// of every key set, a plain insert of every key declared new (Insert) and
// a delete of every deleted key, each over arrays, keys in order (so that
// concurrent transactions lock rows in the same order). A key declared new
// that exists fails the statement (a unique violation), and with it the
// transaction. The arrays are encoded straight into the trip's message.
func (o *overlay) tripWrites(t *trip) {
	var counts [kinds]int
	counts[kindDelete] = o.deletes
	counts[kindInsert] = o.inserts
	counts[kindUpsert] = o.pending.Len() - o.deletes - o.inserts
	mask, nparams := 0, 0
	for kind, n := range counts {
		if n > 0 {
			mask |= 1 << kind
			nparams += 2
			if kind == kindDelete {
				nparams--
			}
		}
	}
	if mask == 0 {
		return
	}
	// Each column is appended by appendColumnParam, not through a
	// closure made per column (three allocations per write).
	t.queueEncoded(writeStatements[mask], nparams, nil, nil, func(buf []byte) (_ []byte, err error) {
		for kind, n := range counts {
			if n == 0 {
				continue
			}
			if buf, err = appendColumnParam(buf, o, n, kind, false); err != nil {
				return buf, err
			}
			if kind != kindDelete {
				if buf, err = appendColumnParam(buf, o, n, kind, true); err != nil {
					return buf, err
				}
			}
		}
		return buf, nil
	})
}

// appendColumnParam appends appendColumn's array as a parameter, after
// its length (see appendParam).
func appendColumnParam(buf []byte, o *overlay, n, kind int, values bool) ([]byte, error) {
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf, err := appendColumn(buf, o, n, kind, values)
	if err != nil {
		return buf, err
	}
	if len(buf)-at-4 > math.MaxInt32 {
		return buf, errArrayTooLong
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf, nil
}

// kindOf is e's kind of write.
func kindOf(e entry) int {
	switch {
	case e.deleted:
		return kindDelete
	case e.fresh:
		return kindInsert
	}
	return kindUpsert
}

// appendColumn appends to buf, in the binary format of a bytea[], the
// keys (or, with values, the values) of the overlay's n pending entries
// of kind, in key order.
func appendColumn(buf []byte, o *overlay, n, kind int, values bool) ([]byte, error) {
	if n > math.MaxInt32 {
		return nil, errArrayTooLong
	}
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // no NULL
	buf = binary.BigEndian.AppendUint32(buf, pgtype.ByteaOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	var err error
	o.pending.Ascend(func(e entry) bool {
		if kindOf(e) != kind {
			return true
		}
		v := e.key
		if values {
			v = e.value
		}
		if len(v) > math.MaxInt32 {
			err = errArrayTooLong
			return false
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
		buf = append(buf, v...)
		return true
	})
	return buf, err
}

// batch is a storage.Batch: writes wait in an overlay and are sent at
// Commit in one transaction, one round trip.
type batch struct {
	store *Store
	overlay
	closed bool
}

func (b *batch) Set(key, value []byte) error    { return b.set(key, value, false) }
func (b *batch) Insert(key, value []byte) error { return b.set(key, value, true) }
func (b *batch) Delete(key []byte) error        { return b.del(key) }
func (b *batch) Count() int                     { return b.count }

// Get returns the batch's own write of key, else the store's latest value.
func (b *batch) Get(ctx context.Context, key []byte) ([]byte, error) {
	if v, done, err := b.readOwn(ctx, key); done {
		return v, err
	}
	return b.store.Get(ctx, key)
}

// NewIterator iterates over the store's keys under the batch's writes.
func (b *batch) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if b.pending == nil {
		return nil, storage.ErrClosed
	}
	base, err := b.store.NewIterator(ctx, lower, upper, reverse)
	if err != nil {
		return nil, err
	}
	return storage.NewOverlayIterator(base, b.writesIn(lower, upper), lower, upper, reverse), nil
}

// Commit sends every write in one transaction, in one round trip. A cancel
// of ctx after it was sent leaves the outcome unknown (see timed).
func (b *batch) Commit(ctx context.Context) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	if b.store.closed.Load() {
		return storage.ErrClosed
	}
	if b.pending.Len() > 0 {
		if err := b.store.timed(ctx, func(ctx context.Context) error {
			conn, err := b.store.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			t := trip{ctx: ctx, conn: conn.Conn()}
			t.queue(beginStatement, nil, nil)
			b.tripWrites(&t)
			t.queue(commitStatement, nil, nil)
			return t.send()
		}); err != nil {
			return b.store.wrap(err)
		}
	}
	b.drop()
	return nil
}

// CommitPipelined is Commit: the server has made the batch durable when it
// answers.
func (b *batch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// Close discards an uncommitted batch.
func (b *batch) Close() error {
	if b.closed {
		return storage.ErrClosed
	}
	b.closed = true
	b.drop()
	return nil
}
