package postgres

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orrery-db/orrery/storage"
)

// pageIterator walks a key range a page of rows at a time.
type pageIterator struct {
	ctx          context.Context // bounds every page's read
	store        *Store
	lower, upper []byte
	reverse      bool
	// snap reads the pages after the first: the snapshot the iterator was
	// opened on, or, for a range of the store longer than a page, one of
	// the iterator's own (ownSnap), opened with its first page.
	snap *snapshot
	// read, when set, reads every page instead (a shared batch's own
	// connection).
	read func(ctx context.Context, sql string, params [][]byte) ([]entry, error)
	// params holds a page query's parameters (see pageQuery).
	params  [3][]byte
	ownSnap bool
	cleanup runtime.Cleanup // closes an own snapshot of an iterator never closed
	page    []entry
	pos     int
	last    []byte // the last key read, where the next page starts
	done    bool   // no page after this one
	err     error
	cur     entry
	closed  bool
}

// pageQuery is the statement and parameters that read up to limit rows
// after last (from the start of the range when last is nil): the
// statement one of pageSQLs, the parameters in the iterator's own array.
func (it *pageIterator) pageQuery(limit int) (string, [][]byte) {
	params := it.params[:0]
	shape := 0
	if it.lower != nil {
		params = append(params, it.lower)
		shape |= shapeLower
	}
	if it.upper != nil {
		params = append(params, it.upper)
		shape |= shapeUpper
	}
	if it.last != nil {
		params = append(params, it.last)
		shape |= shapeLast
	}
	if it.reverse {
		shape |= shapeReverse
	}
	switch limit {
	case pageSize:
		return pageSQLs[0][shape], params
	case pageSize + 1:
		return pageSQLs[1][shape], params
	}
	return pageQuerySQL(shape, limit), params
}

// The parts of a page query's shape.
const (
	shapeLower = 1 << iota
	shapeUpper
	shapeLast
	shapeReverse
	shapes
)

// pageSQLs is the page query of each shape with a limit of pageSize and
// of pageSize+1 (a store iterator's first page and one more row).
var pageSQLs = func() (sqls [2][shapes]string) {
	for shape := range shapes {
		sqls[0][shape] = pageQuerySQL(shape, pageSize)
		sqls[1][shape] = pageQuerySQL(shape, pageSize+1)
	}
	return sqls
}()

// pageQuerySQL is the page query of shape with limit: its parameters are
// the range's lower and upper bounds and the last key read, those of
// them the shape has, in that order.
func pageQuerySQL(shape, limit int) string {
	var conds []string
	add := func(cond string) {
		conds = append(conds, fmt.Sprintf(cond, len(conds)+1))
	}
	if shape&shapeLower != 0 {
		add("k >= $%d")
	}
	if shape&shapeUpper != 0 {
		add("k < $%d")
	}
	order := "k"
	if shape&shapeLast != 0 {
		if shape&shapeReverse != 0 {
			add("k < $%d")
		} else {
			add("k > $%d")
		}
	}
	if shape&shapeReverse != 0 {
		order = "k DESC"
	}
	sql := "SELECT k, v FROM orrery_kv"
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	return fmt.Sprintf("%s ORDER BY %s LIMIT %d", sql, order, limit)
}

// pageArgs is a page query's parameters as the driver's arguments.
func pageArgs(params [][]byte) []any {
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = p
	}
	return args
}

// readPage runs the page query on q, one round trip under the store's
// timeout.
func (s *Store) readPage(parent context.Context, q querier, sql string, args []any) (page []entry, err error) {
	err = s.timed(parent, func(ctx context.Context) (err error) {
		page, err = readPage(ctx, q, sql, args)
		return err
	})
	return page, err
}

// readPage runs the page query on q.
func readPage(ctx context.Context, q querier, sql string, args []any) ([]entry, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return scanPage(rows)
}

// scanPage reads the rows of a page query and closes them.
func scanPage(rows pgx.Rows) ([]entry, error) {
	var page []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.key, &e.value); err != nil {
			rows.Close()
			return nil, err
		}
		if e.value == nil {
			e.value = []byte{}
		}
		page = append(page, e)
	}
	rows.Close()
	return page, rows.Err()
}

// newStoreIterator opens an iterator of the store's latest committed keys
// that is a point-in-time view however many pages it spans, at the cost of
// one round trip for a range that fits in a page (the common case):
//
//   - it reads the range's first page and one more row in one statement,
//     outside any transaction, on a connection it gives back at once; if
//     the range ends within the page, that is the whole range, read in one
//     snapshot;
//   - else it reads the first page again, in a repeatable-read, read-only
//     transaction begun in the same round trip, and reads every later page
//     in it, so all pages see the same snapshot. The transaction holds a
//     connection until the last page is read, the iterator fails or is
//     closed (or, if its user never closes it, is garbage collected).
//
// A long range thus pays one more round trip and one page read twice; a
// transaction for every range would cost every short one a second round
// trip (the ROLLBACK) and a connection held between the two.
func (s *Store) newStoreIterator(ctx context.Context, lower, upper []byte, reverse bool) (*pageIterator, error) {
	it := &pageIterator{ctx: ctx, store: s, lower: lower, upper: upper, reverse: reverse}
	sql, params := it.pageQuery(pageSize + 1)
	page, err := s.readPage(ctx, s.pool, sql, pageArgs(params))
	if err != nil {
		return nil, err
	}
	if len(page) <= pageSize {
		it.page, it.done = page, true
		return it, nil
	}
	sql, params = it.pageQuery(pageSize)
	snap, page, err := s.newSnapshot(ctx, sql, pageArgs(params))
	if err != nil {
		return nil, err
	}
	it.snap, it.ownSnap = snap, true
	it.cleanup = runtime.AddCleanup(it, func(snap *snapshot) { go snap.Close() }, snap)
	it.setPage(page)
	return it, nil
}

// setPage makes page the current page, read with a limit of pageSize; an
// own snapshot is closed after the last page, so that an iterator read to
// its end holds no connection.
func (it *pageIterator) setPage(page []entry) {
	it.page, it.pos = page, 0
	if len(page) < pageSize {
		it.done = true
		it.closeSnap()
	} else {
		it.last = page[len(page)-1].key
	}
}

// closeSnap closes the iterator's own snapshot, if it has one open.
func (it *pageIterator) closeSnap() {
	if it.ownSnap {
		it.ownSnap = false
		it.cleanup.Stop()
		it.snap.Close()
	}
}

// fetch reads the next page through the iterator's reader.
func (it *pageIterator) fetch() error {
	sql, params := it.pageQuery(pageSize)
	var page []entry
	var err error
	if it.read != nil {
		page, err = it.read(it.ctx, sql, params)
	} else {
		page, err = it.snap.readPage(it.ctx, sql, params)
	}
	if err != nil {
		return err
	}
	it.setPage(page)
	return nil
}

// Next advances to the next key of the range.
func (it *pageIterator) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	for it.pos >= len(it.page) {
		if it.done {
			it.cur = entry{}
			return false
		}
		if err := it.fetch(); err != nil {
			it.err = it.store.wrap(err)
			it.closeSnap()
			return false
		}
	}
	it.cur = it.page[it.pos]
	it.pos++
	return true
}

// Key is the current key.
func (it *pageIterator) Key() []byte { return it.cur.key }

// Value is the current value.
func (it *pageIterator) Value() []byte { return it.cur.value }

// Err is the first error met.
func (it *pageIterator) Err() error { return it.err }

// Close releases the iterator and the transaction it opened, if any.
func (it *pageIterator) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.page, it.cur = nil, entry{}
	it.closeSnap()
	return nil
}

// snapshot is a repeatable-read, read-only transaction on one connection,
// shared by its readers under mu. The transaction begins with its first
// read, in the same round trip.
//
// Its round trips are the store's own (trip), as a shared batch's are:
// each statement bound by reference to one prepared on the connection
// (its page queries prepared in the round trip that first sends them),
// with no description asked for, its answer read message by message; the
// store's timeout kept by the connection's deadline, set once for the
// snapshot's round trips (onConn, held), not by a context, a timer and
// the driver's watch of it per round trip. A query page's three round
// trips (the snapshot with its checks, the entries, the items) all go
// this way; its ROLLBACK goes with the next snapshot's first (see
// lingerFor).
type snapshot struct {
	store *Store
	mu    sync.Mutex
	// conn is taken from the pool with the first round trip (see onConn)
	// unless the snapshot was opened with one (newSnapshot).
	conn  *pgxpool.Conn
	begun bool // the BEGIN has been sent
	// stale is set for a connection that lingered (see lingerFor): its
	// transaction is a closed snapshot's, rolled back by the first round
	// trip ahead of the BEGIN.
	stale bool
	err   error // the error every read returns: storage.ErrClosed once closed
	slot  bool  // it holds one of the store's slots
	// held is what its round trips keep on conn (see onConn), ended
	// before conn goes back.
	held held
	// ended is the highest transaction id that had ended when the
	// snapshot was taken (SnapshotAll; see storage.Ended), under the
	// timeline as the watermark is.
	ended uint64
}

// Ended is the highest transaction id, under the server's timeline, that
// had ended when SnapshotAll took the snapshot: one below the snapshot's
// xmax (storage.Ended).
func (s *snapshot) Ended() uint64 { return s.ended }

var (
	beginSnapshotStatement = newStatement(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	snapshotMarksStatement = newStatement(snapshotMarksSQL)
	selectOneStatement     = newStatement(`SELECT 1`)
	int8Columns2           = []uint32{pgtype.Int8OID, pgtype.Int8OID}
)

// send runs the statements queue adds in the snapshot's transaction,
// beginning it first if need be, in one round trip. The caller holds mu.
func (s *snapshot) send(ctx context.Context, queue func(t *trip)) error {
	if s.err != nil {
		return s.err
	}
	return s.store.onConn(ctx, &s.conn, &s.held, func(ctx context.Context, c *pgx.Conn) error {
		t := trip{ctx: ctx, conn: c, state: s.store.connState(c)}
		if s.stale {
			t.queue(rollbackStatement, nil, nil)
		}
		if !s.begun || s.stale {
			t.queue(beginSnapshotStatement, nil, nil)
		}
		queue(&t)
		err := t.send()
		if t.sent {
			s.begun, s.stale = true, false
		}
		return err
	})
}

// queuePage queues the page query sql with params, its rows into *page.
func queuePage(t *trip, sql string, params [][]byte, page *[]entry) {
	t.queueParsed(sql, rowReader(func(cols [][]byte) error {
		if len(cols) != 2 || cols[0] == nil {
			return errBadRow
		}
		// The key and the value in one allocation (a NULL value, which
		// v NOT NULL rules out, would read as empty).
		k, v := cols[0], cols[1]
		kv := make([]byte, len(k)+len(v))
		copy(kv, k)
		copy(kv[len(k):], v)
		e := entry{key: kv[:len(k):len(k)], value: kv[len(k):]}
		if *page == nil {
			// Room for a short page's rows in one allocation, not five.
			*page = make([]entry, 0, 16)
		}
		*page = append(*page, e)
		return nil
	}), params...)
}

// readPage reads one page of an iterator in the snapshot.
func (s *snapshot) readPage(ctx context.Context, sql string, params [][]byte) ([]entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var page []entry
	err := s.send(ctx, func(t *trip) { queuePage(t, sql, params, &page) })
	return page, err
}

// Get returns the value under key as of the snapshot.
func (s *snapshot) Get(ctx context.Context, key []byte) ([]byte, error) {
	return present(s.GetMany(ctx, [][]byte{key}))
}

// GetMany reads keys as of the snapshot, in one statement.
func (s *snapshot) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	values := make([][]byte, len(keys))
	if len(keys) == 0 {
		return values, s.err
	}
	err := s.send(ctx, func(t *trip) { tripGetMany(t, keys, values) })
	if err != nil {
		return nil, s.store.wrap(err)
	}
	return values, nil
}

// getManySQL reads the keys of an array that are present. (A join with
// the array unnested would number the rows, but the planner may hash the
// whole table for a few hundred keys: this is an index scan always.)
const getManySQL = `SELECT k, v FROM orrery_kv WHERE k = ANY($1::bytea[])`

// placer puts the rows of a read of keys where the keys are.
type placer struct {
	keys [][]byte
	// at is each key's first place, nil for a few keys (compared one by
	// one); its strings are the keys' own bytes, not copies (the keys
	// are not changed while they are read). next is, for a key that
	// appears more than once, its next place (-1: none); nil when every
	// key appears once.
	at   map[string]int
	next []int
}

func newPlacer(keys [][]byte) placer {
	p := placer{keys: keys}
	if len(keys) > 8 {
		p.at = make(map[string]int, len(keys))
		for i := len(keys) - 1; i >= 0; i-- { // the first place last
			k := unsafe.String(unsafe.SliceData(keys[i]), len(keys[i]))
			if j, ok := p.at[k]; ok {
				if p.next == nil {
					p.next = make([]int, len(keys))
					for n := range p.next {
						p.next[n] = -1
					}
				}
				p.next[i] = j
			}
			p.at[k] = i
		}
	}
	return p
}

// place puts v, key k's value, at each of k's places in values.
func (p placer) place(values [][]byte, k, v []byte) {
	if p.at == nil {
		for i, key := range p.keys {
			if bytes.Equal(key, k) {
				values[i] = v
			}
		}
		return
	}
	i, ok := p.at[string(k)]
	for ok && i >= 0 {
		values[i] = v
		if p.next == nil {
			return
		}
		i = p.next[i]
	}
}

// NewIterator iterates over the snapshot's keys in [lower, upper).
func (s *snapshot) NewIterator(ctx context.Context, lower, upper []byte, reverse bool) (storage.Iterator, error) {
	it := &pageIterator{ctx: ctx, store: s.store, lower: lower, upper: upper, reverse: reverse, snap: s}
	if err := it.fetch(); err != nil {
		return nil, s.store.wrap(err)
	}
	return it, nil
}

// Close ends the transaction and returns the connection to the pool.
func (s *snapshot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.err = storage.ErrClosed
	if conn := s.conn; conn != nil {
		s.conn = nil
		switch {
		case !s.begun:
			s.store.releaseHeld(conn, &s.held)
			conn.Release()
		case s.slot && s.store.lingerSound(conn, &s.held):
			return nil // the slot lingers with the connection
		default:
			s.store.rollbackHeld(conn, &s.held)
		}
	}
	if s.slot {
		<-s.store.slots
	}
	return nil
}
