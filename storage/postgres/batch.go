package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"

	"github.com/google/btree"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/orrery-db/orrery/storage"
)

// overlay is the pending writes of a batch, sorted by key.
type overlay struct {
	pending *btree.BTreeG[entry] // nil once committed or closed
	count   int
	deletes int // pending deletions among pending's entries
	// slab holds the copies of the keys and values written, one after
	// another: a write of an item (its record and ~12 keys) copies into
	// one or two allocations, not one per key. A full slab is left to the
	// entries that point into it, never written again, so what an
	// iterator was given stays as it was.
	slab []byte
}

// slabFirst is the size of a batch's first slab (an item's write of a
// few hundred bytes and its keys fit), slabMax that of its largest.
const (
	slabFirst = 2 << 10
	slabMax   = 32 << 10
)

// hold returns n bytes of the slab for a copy; a copy over half a first
// slab gets an allocation of its own.
func (o *overlay) hold(n int) []byte {
	if n > slabFirst/2 {
		return make([]byte, n)
	}
	if cap(o.slab)-len(o.slab) < n {
		o.slab = make([]byte, 0, min(max(2*cap(o.slab), slabFirst), slabMax))
	}
	at := len(o.slab)
	o.slab = o.slab[:at+n]
	return o.slab[at : at+n : at+n]
}

func (o *overlay) set(key, value []byte) error {
	if o.pending == nil {
		return storage.ErrClosed
	}
	buf := o.hold(len(key) + len(value))
	copy(buf, key)
	copy(buf[len(key):], value)
	old, replaced := o.pending.ReplaceOrInsert(entry{key: buf[:len(key):len(key)], value: buf[len(key):]})
	if replaced && old.deleted {
		o.deletes--
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
	o.count++
	return nil
}

// drop forgets the pending writes, giving the tree's nodes back for the
// next batch.
func (o *overlay) drop() {
	if o.pending != nil {
		o.pending.Clear(true)
		o.pending = nil
	}
	o.slab = nil
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
// are in keys.
func (o *overlay) own(keys, values [][]byte) (rest [][]byte, at []int) {
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

// The statements of tripWrites.
var (
	writeBothStatement = newStatement(`WITH d AS (DELETE FROM orrery_kv WHERE k = ANY($3::bytea[]))
			INSERT INTO orrery_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (k) DO UPDATE SET v = excluded.v`)
	writeSetsStatement = newStatement(`INSERT INTO orrery_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (k) DO UPDATE SET v = excluded.v`)
	writeDeletesStatement = newStatement(`DELETE FROM orrery_kv WHERE k = ANY($1::bytea[])`)
)

// tripWrites adds the overlay's writes to t in one statement: an upsert
// of every set key and a delete of every deleted key, each over arrays,
// keys in order (so that concurrent transactions lock rows in the same
// order); with both, the delete rides in the upsert's statement (a
// data-modifying WITH, run to completion whatever the upsert reads; the
// two touch different keys), one statement less to encode, bind and
// answer. The arrays are encoded straight into the trip's message.
func (o *overlay) tripWrites(t *trip) {
	sets := o.pending.Len() - o.deletes
	// Each column is appended by appendColumnParam, not through a
	// closure made per column (three allocations per write).
	switch {
	case sets > 0 && o.deletes > 0:
		t.queueEncoded(writeBothStatement, 3, nil, nil, func(buf []byte) (_ []byte, err error) {
			if buf, err = appendColumnParam(buf, o, sets, false, false); err != nil {
				return buf, err
			}
			if buf, err = appendColumnParam(buf, o, sets, false, true); err != nil {
				return buf, err
			}
			return appendColumnParam(buf, o, o.deletes, true, false)
		})
	case sets > 0:
		t.queueEncoded(writeSetsStatement, 2, nil, nil, func(buf []byte) (_ []byte, err error) {
			if buf, err = appendColumnParam(buf, o, sets, false, false); err != nil {
				return buf, err
			}
			return appendColumnParam(buf, o, sets, false, true)
		})
	case o.deletes > 0:
		t.queueEncoded(writeDeletesStatement, 1, nil, nil, func(buf []byte) ([]byte, error) {
			return appendColumnParam(buf, o, o.deletes, true, false)
		})
	}
}

// appendColumnParam appends appendColumn's array as a parameter, after
// its length (see appendParam).
func appendColumnParam(buf []byte, o *overlay, n int, deleted, values bool) ([]byte, error) {
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf, err := appendColumn(buf, o, n, deleted, values)
	if err != nil {
		return buf, err
	}
	if len(buf)-at-4 > math.MaxInt32 {
		return buf, errArrayTooLong
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf, nil
}

// appendColumn appends to buf, in the binary format of a bytea[], the
// keys (or, with values, the values) of the overlay's n pending entries
// whose deleted is deleted, in key order.
func appendColumn(buf []byte, o *overlay, n int, deleted, values bool) ([]byte, error) {
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
		if e.deleted != deleted {
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

func (b *batch) Set(key, value []byte) error { return b.set(key, value) }
func (b *batch) Delete(key []byte) error     { return b.del(key) }
func (b *batch) Count() int                  { return b.count }

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
