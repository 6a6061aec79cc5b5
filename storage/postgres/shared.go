package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orrery-db/orrery/storage"
)

// sharedBatch is a storage.SharedBatch: a transaction on a connection of
// its own, begun by its first statement. Its writes wait in an overlay
// and go with the commit.
//
// The transaction is implicit: no BEGIN and no COMMIT. Its round trips
// end with a Flush, not a Sync, so the server, which ends an implicit
// transaction at a Sync, keeps it open (its locks held) from one round
// trip to the next; the commit's round trip sends the writes and a Sync,
// which commits them (durably, before the server answers it). Two
// statements fewer per write than BEGIN ... COMMIT, each a bind and an
// execute on the server and a result on the gateway. A commit that reads
// the watermark after it (CommitWatermark, every item write's) sends a
// BEGIN, the writes, a COMMIT and the watermark before its one Sync
// instead: the server flushes its answer at each Sync, and a second piece
// costs the gateway more (a read that finds nothing, a park and a
// wake-up) than two statements do. An
// iterator's pages are round trips of the batch too, their statement
// prepared in them (queueParsed). What would need a Sync in the middle
// of the transaction (preparing a statement through the driver: a lock
// of modes not in fixedStatements) first turns it into an explicit one
// with a BEGIN, which the server allows in an implicit transaction,
// keeping what it did; a COMMIT then ends it.
type sharedBatch struct {
	store *Store
	// conn is taken from the pool under the same timeout as the first
	// round trip (one context and one watch of it, not two); slot is the
	// batch's place among the holders of a connection, taken at
	// NewSharedBatch and held until the batch ends.
	conn *pgxpool.Conn
	slot bool
	tx   txState
	seq  uint64
	// held is what its round trips keep on conn (see onConn), ended
	// before conn goes back.
	held held
	overlay
	closed bool
	// trip is the batch's round trip under way, reused from one to the
	// next (a trip of its own each would be an allocation).
	trip trip
	// keysA, atA and manyA hold what Begin reads of the store, for a
	// write's few keys, and seqRead the id it reads; wRead is the
	// watermark its commit reads.
	keysA   [4][]byte
	atA     [4]int
	manyA   [4][]byte
	seqRead int64
	wRead   int64
}

// txState is where a shared batch's transaction is.
type txState uint8

const (
	txNone     txState = iota // none open on the connection
	txImplicit                // open, implicit: its round trips end with a Flush
	txExplicit                // open, begun with a BEGIN (it may have failed)
	txFailed                  // a statement failed: it was rolled back
	txUnknown                 // the connection failed midway (it is closed)
)

// connState is what the store keeps of each of the pool's connections.
type connState struct {
	// ready is set once every statement of fixedStatements is prepared
	// on the connection.
	ready atomic.Bool
	// parsed is the statements a trip prepared itself (queueParsed);
	// only the connection's holder reads or writes it.
	parsed map[string]bool
	// interrupt moves the connection's deadline to the past (see onConn).
	interrupt func()
}

// fixedStatements are the statements that a shared batch's round trips
// queue once its implicit transaction is open, prepared on a connection
// before the first transaction on it opens (preparing one later would
// take a Sync, which would end the transaction). fixed is their set.
var (
	fixedStatements = []*statement{beginStatement, rollbackStatement, commitStatement, sequenceStatement, watermarkStatement,
		getManyStatement, getStatement, writeStatements[1], writeStatements[2], writeStatements[3], writeStatements[4],
		writeStatements[5], writeStatements[6], writeStatements[7], lockSXSeqStatement, lockXStatement, lockSStatement}
	fixed = func() map[*statement]bool {
		m := map[*statement]bool{}
		for _, st := range fixedStatements {
			m[st] = true
		}
		return m
	}()
)

// connState is c's state (nil for a connection not of the pool).
func (s *Store) connState(c *pgx.Conn) *connState {
	s.connsMu.RLock()
	defer s.connsMu.RUnlock()
	return s.conns[c]
}

// prepareFixed prepares fixedStatements on c unless they are.
func (s *Store) prepareFixed(ctx context.Context, c *pgx.Conn, st *connState) error {
	if st == nil || st.ready.Load() {
		return nil
	}
	for _, f := range fixedStatements {
		if _, err := c.Prepare(ctx, f.name, f.sql); err != nil {
			return err
		}
	}
	st.ready.Store(true)
	return nil
}

// NewSharedBatch starts a batch on a connection of its own, taken from the
// pool with its first round trip.
func (s *Store) NewSharedBatch(ctx context.Context) (storage.SharedBatch, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		// A free slot would otherwise win the select as often as not.
		return nil, &callerGone{err: err}
	}
	if _, err := s.takeSlot(ctx, true); err != nil {
		return nil, err
	}
	return &sharedBatch{store: s, slot: true, overlay: overlay{pending: newTree()}}, nil
}

// send runs the statements that queue adds in the transaction, beginning it
// first if need be, all in one round trip, taking the connection from the
// pool first if the batch has none yet, under one timeout.
func (b *sharedBatch) send(ctx context.Context, queue func(t *trip)) error {
	if b.pending == nil {
		return storage.ErrClosed
	}
	if b.store.closed.Load() {
		return storage.ErrClosed
	}
	if b.tx == txFailed {
		return errRolledBack
	}
	err := b.store.onConn(ctx, &b.conn, &b.held, func(ctx context.Context, c *pgx.Conn) error {
		if b.tx == txUnknown {
			return errConnLost
		}
		t := &b.trip
		*t = trip{ctx: ctx, conn: c, state: b.store.connState(c)}
		switch b.tx {
		case txNone:
			// Before the transaction opens: preparing is safe now, not
			// in it (see fixedStatements).
			if err := b.store.prepareFixed(ctx, c, t.state); err != nil {
				return err
			}
		case txImplicit:
			t.inImplicit, t.batch = true, b
		}
		queue(t)
		err := t.sendOpen(b.tx != txExplicit)
		switch {
		case c.PgConn().IsClosed():
			b.tx = txUnknown
		case t.rolledBack:
			b.tx = txFailed
		case b.tx == txNone && t.sent:
			b.tx = txImplicit
		}
		return err
	})
	if errors.Is(err, storage.ErrUnavailable) {
		return err
	}
	if err != nil {
		if ctx.Err() != nil {
			return &callerGone{err: ctx.Err(), during: err}
		}
		return b.store.wrap(err)
	}
	return nil
}

// errConnLost is a batch's round trip on a connection that had failed.
var errConnLost = errors.New("postgres: conn closed: the transaction's connection failed")

// explicit turns the batch's implicit transaction into an explicit one,
// with a BEGIN (and a Sync, which no longer ends it), so that a Sync may
// follow.
func (b *sharedBatch) explicit(ctx context.Context, c *pgx.Conn) error {
	t := trip{ctx: ctx, conn: c}
	t.queue(beginStatement, nil, nil)
	err := t.send()
	if c.PgConn().IsClosed() {
		b.tx = txUnknown
	} else if err == nil {
		b.tx = txExplicit
	}
	return err
}

// Lock takes a transaction-scoped advisory lock on a hash of key.
func (b *sharedBatch) Lock(ctx context.Context, key []byte, exclusive bool) error {
	return b.send(ctx, func(t *trip) {
		queueLocks(t, []storage.LockRequest{{Key: key, Exclusive: exclusive}}, nil)
	})
}

var (
	beginStatement     = newStatement(`BEGIN`)
	commitStatement    = newStatement(`COMMIT`)
	rollbackStatement  = newStatement(`ROLLBACK`)
	sequenceStatement  = newStatement(sequenceSQL)
	watermarkStatement = newStatement(watermarkSQL)
	getManyStatement   = newStatement(getManySQL)
	getStatement       = newStatement(`SELECT v FROM orrery_kv WHERE k = $1`)
)

// lockStatements is the statements of queueLocks, by their locks' modes
// (one letter each, S shared and X exclusive) and whether the id follows
// (+).
var lockStatements sync.Map // string -> *statement

// queueLocks queues the locks in one statement and, when seq is not nil,
// the transaction's id after them in the same statement, into *seq:
// PostgreSQL evaluates a select list's functions one after another, left
// to right, so the locks are taken in the order given, each after the one
// before it is held, and the id after the last (one statement instead of
// one per lock and one for the id: each statement costs the gateway its
// encoding, its bookkeeping in the pipeline and its result, and the server
// a bind and an execute).
func queueLocks(t *trip, locks []storage.LockRequest, seq *int64) {
	if len(locks) == 0 {
		return
	}
	var modes [16]byte
	key := modes[:0]
	for _, l := range locks {
		if l.Exclusive {
			key = append(key, 'X')
		} else {
			key = append(key, 'S')
		}
	}
	if seq != nil {
		key = append(key, '+')
	}
	var st *statement
	switch string(key) { // the shapes of fixedStatements, with no string made
	case "SX+":
		st = lockSXSeqStatement
	case "X":
		st = lockXStatement
	case "S":
		st = lockSStatement
	default:
		st = lockStatement(string(key))
	}
	// A write's few locks' parameters on the stack and in the trip
	// (queue copies them).
	var paramsA [4][]byte
	params, buf := paramsA[:0], t.lockKeys[:0]
	if len(locks) > len(paramsA) {
		params, buf = make([][]byte, 0, len(locks)), make([]byte, 0, 8*len(locks))
	}
	for i, l := range locks {
		buf = binary.BigEndian.AppendUint64(buf, uint64(hashKey(l.Key)))
		params = append(params, buf[8*i:8*i+8])
	}
	var read reader
	if seq != nil {
		read = t.readInt8(len(locks), seq)
	}
	t.queue(st, nil, read, params...)
}

// The lock statements of fixedStatements.
var (
	lockSXSeqStatement = lockStatement("SX+")
	lockXStatement     = lockStatement("X")
	lockSStatement     = lockStatement("S")
)

// lockStatement is the statement of queueLocks for the modes of key.
func lockStatement(key string) *statement {
	if st, ok := lockStatements.Load(key); ok {
		return st.(*statement)
	}
	seq := strings.HasSuffix(key, "+")
	locks := make([]storage.LockRequest, 0, len(key))
	for _, m := range strings.TrimSuffix(key, "+") {
		locks = append(locks, storage.LockRequest{Exclusive: m == 'X'})
	}
	st, _ := lockStatements.LoadOrStore(key, newStatement(locksSQL(locks, seq)))
	return st.(*statement)
}

// locksSQL is the statement of queueLocks.
func locksSQL(locks []storage.LockRequest, seq bool) string {
	var sql strings.Builder
	sql.WriteString("SELECT ")
	for i, l := range locks {
		if i > 0 {
			sql.WriteString(", ")
		}
		if l.Exclusive {
			sql.WriteString("pg_advisory_xact_lock($")
		} else {
			sql.WriteString("pg_advisory_xact_lock_shared($")
		}
		sql.WriteString(strconv.Itoa(i + 1))
		sql.WriteString(")")
	}
	if seq {
		sql.WriteString(", " + sequenceExpr)
	}
	return sql.String()
}

// Begin sends the locks, the reads and the sequence's statement in one
// round trip: the server takes the locks in order, waiting as it must, and
// gives the transaction its id (in the locks' statement, after them, when
// there are locks), then reads keys (read committed: as of after the
// locks).
func (b *sharedBatch) Begin(ctx context.Context, locks []storage.LockRequest, keys [][]byte, sequence bool) ([][]byte, error) {
	if b.pending == nil {
		return nil, storage.ErrClosed
	}
	values := make([][]byte, len(keys))
	rest, at := b.own(keys, values, b.keysA[:0], b.atA[:0])
	var many [][]byte // what one statement read of rest
	seq := &b.seqRead
	*seq = 0
	err := b.send(ctx, func(t *trip) {
		var seqAt *int64 // the id rides with the locks, after them
		if sequence && b.seq == 0 && len(locks) > 0 {
			seqAt = seq
		}
		queueLocks(t, locks, seqAt)
		if len(rest) > 1 {
			// Several keys (a write's item and its neighbours, a
			// transactional batch's items): one statement.
			if len(rest) <= len(b.manyA) {
				many = b.manyA[:len(rest)]
				clear(many)
			} else {
				many = make([][]byte, len(rest))
			}
			tripGetMany(t, rest, many)
		} else {
			for j, key := range rest {
				tripGet(t, key, &values[at[j]])
			}
		}
		if sequence && b.seq == 0 && seqAt == nil {
			t.queue(sequenceStatement, int8Column, t.readInt8(0, seq))
		}
	})
	if err != nil {
		return nil, err
	}
	for j, v := range many {
		values[at[j]] = v
	}
	clear(many) // the caller's now: not kept by the batch
	if *seq != 0 {
		b.seq = uint64(*seq)
	}
	return values, nil
}

// tripGet queues the read of key into *value (left nil when absent).
func tripGet(t *trip, key []byte, value *[]byte) {
	t.queue(getStatement, byteaColumn, rowReader(func(cols [][]byte) error {
		if cols[0] == nil || *value != nil {
			return errBadRow
		}
		*value = append([]byte{}, cols[0]...)
		return nil
	}), key) // no row: absent
}

// tripGetMany queues the read of keys into values (values[i] stays nil
// for an absent key).
func tripGetMany(t *trip, keys, values [][]byte) {
	p := newPlacer(keys)
	// The keys' array straight into the Bind, not into one of its own.
	t.queueEncoded(getManyStatement, 1, byteaColumns2, rowReader(func(cols [][]byte) error {
		if cols[1] == nil {
			return errBadRow
		}
		// The key is only compared: no copy of it.
		p.place(values, cols[0], append([]byte{}, cols[1]...))
		return nil
	}), func(buf []byte) ([]byte, error) {
		return appendParam(buf, func(buf []byte) ([]byte, error) {
			return encodeByteaArray{}.Encode(byteaArray(keys), buf)
		})
	})
}

// timelineSQL is the server's timeline shifted above the transaction ids
// (64-bit ids: 32 bits of epoch, 32 of id; 48 bits last 65,536 epochs):
// the part of a sequence number or a watermark that a promotion raises.
// The timeline is the first eight hexadecimal digits of the name of the
// WAL file being written.
const timelineSQL = `(('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint << 48)`

// sequenceSQL gives the transaction its id and returns it under the
// timeline. A promoted standby may give out again the ids of transactions
// that rolled back on the old primary (their WAL is not flushed at once,
// and so may never reach the standby), ids below a watermark read there;
// the timeline, one higher after each promotion, puts every number of the
// new primary above them.
const sequenceSQL = `SELECT ` + sequenceExpr

const sequenceExpr = timelineSQL + ` | pg_current_xact_id()::text::bigint`

// Sequence is the transaction's id, assigned at the first call.
func (b *sharedBatch) Sequence(ctx context.Context) (uint64, error) {
	if b.seq != 0 {
		return b.seq, nil
	}
	var seq int64
	if err := b.send(ctx, func(t *trip) { t.queue(sequenceStatement, int8Column, readInt8(0, &seq)) }); err != nil {
		return 0, err
	}
	b.seq = uint64(seq)
	return b.seq, nil
}

// Get returns the batch's own write of key, else the latest committed value.
func (b *sharedBatch) Get(ctx context.Context, key []byte) ([]byte, error) {
	if v, done, err := b.readOwn(ctx, key); done {
		return v, err
	}
	return present(b.Begin(ctx, nil, [][]byte{key}, false))
}

// GetMany reads keys as Get does, in one round trip: the batch's own
// writes from its overlay, the others in one statement, so all as of that
// statement's moment (a query in a stored procedure reads the items its
// index entries name this way, not one round trip each).
func (b *sharedBatch) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if b.pending == nil {
		return nil, storage.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, &callerGone{err: err}
	}
	values := make([][]byte, len(keys))
	rest, at := b.own(keys, values, nil, nil)
	if len(rest) == 0 {
		return values, nil
	}
	got := make([][]byte, len(rest))
	if err := b.send(ctx, func(t *trip) { tripGetMany(t, rest, got) }); err != nil {
		return nil, err
	}
	for j, i := range at {
		values[i] = got[j]
	}
	return values, nil
}

// NewIterator iterates over the latest committed keys under the batch's
// writes.
func (b *sharedBatch) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	if b.pending == nil {
		return nil, storage.ErrClosed
	}
	base := &pageIterator{ctx: ctx, store: b.store, lower: lower, upper: upper, reverse: reverse, read: b.readPage}
	if err := base.fetch(); err != nil {
		return nil, b.store.wrap(err)
	}
	return storage.NewOverlayIterator(base, b.writesIn(lower, upper), lower, upper, reverse), nil
}

func (b *sharedBatch) Set(key, value []byte) error    { return b.set(key, value, false) }
func (b *sharedBatch) Insert(key, value []byte) error { return b.set(key, value, true) }
func (b *sharedBatch) Delete(key []byte) error        { return b.del(key) }
func (b *sharedBatch) Count() int                     { return b.count }

// Commit sends the writes and the COMMIT in one round trip and returns the
// connection to the pool. A cancel of ctx after the COMMIT was sent leaves
// the outcome unknown (see timed).
func (b *sharedBatch) Commit(ctx context.Context) error {
	_, err := b.commit(ctx, false)
	return err
}

// CommitWatermark is Commit with the watermark read after the COMMIT, in
// the same round trip (a statement of its own, outside the transaction).
func (b *sharedBatch) CommitWatermark(ctx context.Context) (uint64, error) {
	return b.commit(ctx, true)
}

// errRolledBack is a COMMIT of a transaction that had failed.
var errRolledBack = errors.New("postgres: the transaction failed and was rolled back")

func (b *sharedBatch) commit(ctx context.Context, watermark bool) (uint64, error) {
	if b.pending == nil {
		return 0, storage.ErrClosed
	}
	if b.store.closed.Load() {
		return 0, storage.ErrClosed
	}
	var err error
	w := &b.wRead // the batch's: a variable of its own would be an allocation
	*w = 0
	if b.tx == txFailed {
		err = errRolledBack
	} else if b.tx != txNone || b.pending.Len() > 0 || watermark {
		err = b.store.onConn(ctx, &b.conn, &b.held, func(ctx context.Context, c *pgx.Conn) error {
			if b.tx == txUnknown {
				return errConnLost
			}
			// Every statement queued here is prepared before a
			// transaction opens (fixedStatements); one that is not
			// would end it.
			t := &b.trip
			*t = trip{ctx: ctx, conn: c}
			t.inImplicit = b.tx == txImplicit
			committed := false
			// began is set when this round trip turns the transaction
			// into an explicit one to commit it with a COMMIT (see
			// below).
			began := false
			switch {
			case b.tx == txExplicit || watermark && (b.tx == txImplicit || b.pending.Len() > 0):
				if b.tx != txExplicit {
					// With the watermark to read after the commit, a
					// commit by a Sync would make the server answer in
					// two parts, each flushed at its ReadyForQuery:
					// the second is read after a wait of its own (a
					// read that finds nothing, a park and a wake-up),
					// most of the time. A BEGIN, which the server
					// allows in the open implicit transaction, keeping
					// what it did, and a COMMIT make it one answer,
					// flushed at the one Sync after the watermark.
					t.queue(beginStatement, nil, nil)
					began = true
				}
				b.tripWrites(t)
				t.queue(commitStatement, nil, &t.commitRead)
			case b.tx == txImplicit || b.pending.Len() > 0:
				// The Sync commits the writes and what the transaction
				// did before, unless a statement failed.
				b.tripWrites(t)
				t.sync()
			default:
				committed = true // nothing to commit
			}
			if watermark {
				t.queue(watermarkStatement, int8Column, t.readInt8(0, w))
			}
			err := t.send()
			if t.commitRead.committed || b.tx != txExplicit && !began && t.synced > 0 {
				committed = true
			}
			switch {
			case err == nil || committed:
				b.tx = txNone
			case c.PgConn().IsClosed():
				b.tx = txUnknown
			case began:
				// Failed after the BEGIN: the transaction is open,
				// failed, until a ROLLBACK; failed before it: the Sync
				// ended it.
				if c.PgConn().TxStatus() == 'I' {
					b.tx = txNone
				} else {
					b.tx = txExplicit
				}
			case b.tx != txExplicit && t.sent:
				b.tx = txNone // the Sync ended it: rolled back
			}
			if err != nil && committed {
				// The commit went through; only the watermark is missing.
				err, *w = nil, 0
			}
			return err
		})
	}
	b.drop()
	b.releaseConn()
	return uint64(*w), b.store.wrap(err)
}

// CommitPipelined is Commit.
func (b *sharedBatch) CommitPipelined(ctx context.Context) (func() error, error) {
	return storage.CommitDurable(ctx, b.Commit)
}

// releaseConn ends the transaction if one is open and gives back the
// connection.
func (b *sharedBatch) releaseConn() {
	if b.conn != nil {
		b.store.releaseHeld(b.conn, &b.held)
		switch b.tx {
		case txNone, txFailed:
			b.conn.Release()
		case txImplicit:
			b.store.rollbackImplicit(b.conn)
		default:
			b.store.rollback(b.conn)
		}
		b.conn = nil
		b.tx = txNone
		// The last round trip's caller and connection are not kept
		// past the batch.
		b.trip = trip{}
	}
	if b.slot {
		b.slot = false
		<-b.store.slots
	}
}

// Close rolls back an uncommitted batch, releasing its locks.
func (b *sharedBatch) Close() error {
	if b.closed {
		return storage.ErrClosed
	}
	b.closed = true
	b.drop()
	b.releaseConn()
	return nil
}

// NextSequence returns a sequence number outside any batch: the id of a
// transaction of its own, one statement that commits at once. It takes no
// slot (see Options.MaxConns), so a holder of one may call it.
func (s *Store) NextSequence(ctx context.Context) (uint64, error) {
	if s.closed.Load() {
		return 0, storage.ErrClosed
	}
	var n int64
	if err := s.timed(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, sequenceSQL).Scan(&n)
	}); err != nil {
		return 0, s.wrap(err)
	}
	return uint64(n), nil
}

// Watermark is the oldest transaction id still running: every transaction
// with a lower id has committed or rolled back.
func (s *Store) Watermark(ctx context.Context) (uint64, error) {
	if s.closed.Load() {
		return 0, storage.ErrClosed
	}
	var w int64
	if err := s.timed(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, watermarkSQL).Scan(&w)
	}); err != nil {
		return 0, s.wrap(err)
	}
	return uint64(w), nil
}

// watermarkSQL reads the watermark: the oldest transaction id still
// running, as of the statement's snapshot.
const watermarkSQL = `SELECT ` + timelineSQL + ` | pg_snapshot_xmin(pg_current_snapshot())::text::bigint`

// getAllStatement reads keys, each numbered by its place and with NULL for
// an absent one, and the watermark.
var getAllStatement = newStatement(`SELECT x.i, kv.v, w.w
	FROM unnest($1::bytea[]) WITH ORDINALITY AS x(k, i) LEFT JOIN orrery_kv kv ON kv.k = x.k,
		(` + watermarkSQL + `) AS w(w)`)

// getAll is a point read's round trip (GetAll): its trip, the reader of
// its rows and the watermark it reads, one object taken from getAlls and
// given back after it, not four allocations a read (the trip, whose
// address its reads keep, the reader's closure, the watermark it fills in
// and the keys' array encoded apart from the trip's buffer).
type getAll struct {
	t      trip
	values [][]byte
	w      int64
}

var getAlls = sync.Pool{New: func() any { return new(getAll) }}

// row reads one of getAllStatement's rows into values and w.
func (g *getAll) row(cols [][]byte) error {
	if len(cols) != 3 {
		return errBadRow
	}
	i, ok := rawInt8(cols[0])
	if !ok || i < 1 || int(i) > len(g.values) {
		return errBadRow
	}
	if g.w, ok = rawInt8(cols[2]); !ok {
		return errBadRow
	}
	if cols[1] != nil { // NULL: absent (v is NOT NULL)
		g.values[i-1] = append([]byte{}, cols[1]...)
	}
	return nil
}

func (*getAll) end([]byte) error { return nil }

// GetAll reads keys and the watermark in one statement, so in one
// snapshot and one round trip; beyond a few such round trips in flight,
// the reads that wait share one (see readGroups).
func (s *Store) GetAll(ctx context.Context, keys [][]byte) ([][]byte, uint64, error) {
	if s.closed.Load() {
		return nil, 0, storage.ErrClosed
	}
	if len(keys) == 0 {
		w, err := s.Watermark(ctx)
		return [][]byte{}, w, err
	}
	if g, at := s.reads.join(keys); g != nil {
		return s.awaitGroup(ctx, g, at, len(keys))
	}
	values := make([][]byte, len(keys))
	w, err := s.getAllTrip(ctx, keys, values)
	s.landed()
	if err != nil {
		return nil, 0, s.wrap(err)
	}
	return values, w, nil
}

// getAllTrip reads keys into values and the watermark in one round trip
// (getAllStatement), under ctx.
func (s *Store) getAllTrip(ctx context.Context, keys, values [][]byte) (uint64, error) {
	g := getAlls.Get().(*getAll)
	g.values = values
	var conn *pgxpool.Conn
	err := s.onConn(ctx, &conn, nil, func(ctx context.Context, c *pgx.Conn) error {
		g.t = trip{ctx: ctx, conn: c}
		// The keys' array straight into the Bind.
		g.t.queueEncoded(getAllStatement, 1, getAllColumns, g, func(buf []byte) ([]byte, error) {
			return appendParam(buf, func(buf []byte) ([]byte, error) {
				return encodeByteaArray{}.Encode(byteaArray(keys), buf)
			})
		})
		return g.t.send()
	})
	if conn != nil {
		conn.Release()
	}
	w := g.w
	*g = getAll{}
	getAlls.Put(g)
	return uint64(w), err
}

// leadCheckEvery is how often a held duty's connection is checked.
const leadCheckEvery = 250 * time.Millisecond

// lead is a duty held: a session advisory lock on a connection of its own.
type lead struct {
	store    *Store
	conn     *pgx.Conn
	lost     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	lostOnce sync.Once
}

func (l *lead) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// Lead takes the session advisory lock of duty on a new connection,
// waiting while another process holds it. The duty is lost when that
// connection is: the server frees the lock as the session ends.
func (s *Store) Lead(ctx context.Context, duty string) (<-chan struct{}, func(), error) {
	if s.closed.Load() {
		return nil, nil, storage.ErrClosed
	}
	conn, err := pgx.ConnectConfig(ctx, s.connCfg)
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(lockClassLead), hashKey32(duty)); err != nil {
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, s.wrap(err)
	}
	l := &lead{store: s, conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.leadsMu.Lock()
	if s.closed.Load() {
		s.leadsMu.Unlock()
		conn.Close(context.Background())
		return nil, nil, storage.ErrClosed
	}
	s.leads[l] = struct{}{}
	s.leadsMu.Unlock()
	go l.watch()
	return l.lost, l.release, nil
}

// LeadPIDs returns the server process ids of the connections that hold
// this store's duties, so that a test can end them as a network fault
// would.
func (s *Store) LeadPIDs() []uint32 {
	s.leadsMu.Lock()
	defer s.leadsMu.Unlock()
	var pids []uint32
	for l := range s.leads {
		pids = append(pids, l.conn.PgConn().PID())
	}
	return pids
}

// watch checks the connection until it fails (the duty is lost) or the
// duty is released.
func (l *lead) watch() {
	defer close(l.done)
	t := time.NewTicker(leadCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := l.conn.Exec(ctx, "SELECT 1")
		cancel()
		if err != nil {
			l.markLost()
			l.conn.Close(context.Background())
			l.forget()
			return
		}
	}
}

func (l *lead) forget() {
	l.store.leadsMu.Lock()
	delete(l.store.leads, l)
	l.store.leadsMu.Unlock()
}

// release gives the duty up: closing the connection ends the session and
// so frees the lock.
func (l *lead) release() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		select {
		case <-l.lost:
		default:
			l.conn.Close(context.Background())
			l.forget()
		}
	})
}

// readPage reads a page of an iterator in the batch's transaction: each
// page sees the latest committed state (read committed), as the batch's
// reads do. It is a round trip of the batch's (send), its statement
// prepared in it the first time on a connection: the driver's query
// would end with a Sync, which would end an implicit transaction.
func (b *sharedBatch) readPage(ctx context.Context, sql string, params [][]byte) ([]entry, error) {
	if !b.slot {
		return nil, storage.ErrClosed
	}
	var page []entry
	err := b.send(ctx, func(t *trip) { queuePage(t, sql, params, &page) })
	return page, err
}
