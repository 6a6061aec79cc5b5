package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// statement is a statement of the paths every request takes (a point
// read, a write's two round trips), prepared on each connection once, by
// its name, and from then on sent by reference: a Bind and an Execute,
// its parameters and results in the binary format, written by the store
// itself into a buffer of its own and read back message by message. The
// driver's query layer would, for each statement, look it up in an LRU
// cache, box and plan each argument, track it in its pipeline's lists and
// scan each result through a plan of its own; its protocol layer's batch
// grows a buffer of its own and copies each parameter into it.
type statement struct{ name, sql string }

func newStatement(sql string) *statement {
	h := fnv.New64a()
	h.Write([]byte(sql))
	return &statement{name: "orrery_" + strconv.FormatUint(h.Sum64(), 36), sql: sql}
}

// binaryFormat is the format of every parameter and result column of a
// trip's statements.
var binaryFormat = []int16{pgtype.BinaryFormatCode}

// reader reads one statement's result in a trip: row is given each row's
// columns (valid until it returns), end the command tag once the rows are
// read. A nil reader reads nothing (the result is only checked for an
// error).
type reader interface {
	row(cols [][]byte) error
	end(tag []byte) error
}

// rowReader is a reader of rows only.
type rowReader func(cols [][]byte) error

func (f rowReader) row(cols [][]byte) error { return f(cols) }
func (rowReader) end([]byte) error          { return nil }

// tripBufs holds the buffers that trips encode their messages into: a
// write's (its ~13 keys and the item, a few KiB) is reused, not grown
// anew for each.
var tripBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// tripBufMax is the largest buffer tripBufs keeps: a transactional
// batch's megabytes are not held for the next write.
const tripBufMax = 256 << 10

// trip is one round trip of statements on a connection. Each statement is
// prepared on the connection first if it is not yet (a round trip of its
// own, once per connection and statement), then its Bind and Execute are
// appended to buf; send ends buf with a Sync (or, for a transaction left
// open, a Flush), writes it in one write and reads each statement's result
// in order.
type trip struct {
	ctx   context.Context
	conn  *pgx.Conn
	buf   *[]byte
	reads []reader
	err   error
	// syncs is, for each Sync queued (see sync), the number of statements
	// queued before it; synced is how many of them the server answered
	// with no error before it (each Sync ends an implicit transaction: a
	// commit when none of its statements failed).
	syncs  []int
	synced int
	// inImplicit is set when an implicit transaction is open on the
	// connection: a statement not prepared on every connection (see
	// fixedStatements) must not be prepared through the driver, whose
	// Prepare takes a Sync of its own, which would end it. batch, when
	// set, makes the transaction explicit first; without it such a
	// statement is an error.
	inImplicit bool
	batch      *sharedBatch
	// rolledBack is set when a statement of an open implicit transaction
	// failed: send ended it with a Sync (it rolled back).
	rolledBack bool
	// sent is set once the trip's messages are written.
	sent bool
	// state is the connection's, for statements the trip prepares itself
	// (queueParsed); parsing is the names of those it sent, in order,
	// until the server confirms them.
	state   *connState
	parsing []string
	// few and fewSyncs hold reads and syncs for a round trip of a few
	// statements (a write's has at most five) without a growing slice.
	few      [6]reader
	fewSyncs [2]int
	// int8s are the readers of readInt8 for the first statements that
	// read a bigint (a write's id, its watermark): no allocation each.
	int8s  [2]int8Reader
	nint8s int
	// commitRead reads the answer to a commit's COMMIT, held by the
	// trip (a closure and its flag would be two allocations a write).
	commitRead commitReader
	// lockKeys holds a write's locks' keys as queueLocks encodes them
	// (on its stack, they would be moved to the heap).
	lockKeys [32]byte
}

// commitReader reads a COMMIT's command tag: committed is set when it is
// COMMIT; a transaction that had failed ends in a ROLLBACK.
type commitReader struct{ committed bool }

func (*commitReader) row([][]byte) error { return nil }

func (r *commitReader) end(tag []byte) error {
	if string(tag) != "COMMIT" {
		return errRolledBack
	}
	r.committed = true
	return nil
}

// readInt8 is the package's readInt8, its reader held by the trip.
func (t *trip) readInt8(col int, dst *int64) reader {
	if t.nint8s == len(t.int8s) {
		return readInt8(col, dst)
	}
	r := &t.int8s[t.nint8s]
	t.nint8s++
	*r = int8Reader{col: col, dst: dst}
	return r
}

// prepare returns st's description on the trip's connection, checking
// that its parameters number nparams and its result columns are of the
// types oids (nil: not checked).
func (t *trip) prepare(st *statement, nparams int, oids []uint32) *pgconn.StatementDescription {
	if t.err != nil {
		return nil
	}
	if t.inImplicit && !fixed[st] {
		if t.batch == nil {
			t.err = errors.New("postgres: a statement not prepared in an implicit transaction")
			return nil
		}
		if t.err = t.batch.explicit(t.ctx, t.conn); t.err != nil {
			return nil
		}
		t.inImplicit = false
	}
	sd, err := t.conn.Prepare(t.ctx, st.name, st.sql)
	if err != nil {
		t.err = err
		return nil
	}
	if len(sd.ParamOIDs) != nparams || oids != nil && !fieldTypes(sd.Fields, oids) {
		t.err = fmt.Errorf("postgres: statement %s takes %d parameters and gives %d columns, not what the store sends and reads", st.name, len(sd.ParamOIDs), len(sd.Fields))
		return nil
	}
	t.init()
	return sd
}

func (t *trip) init() {
	if t.buf == nil {
		t.buf = tripBufs.Get().(*[]byte)
		*t.buf = (*t.buf)[:0]
	}
	if t.reads == nil {
		t.reads = t.few[:0]
		t.syncs = t.fewSyncs[:0]
	}
}

// sync queues a Sync: the end of an implicit transaction (a commit of the
// statements before it, if none failed), and where the server resumes
// after a failed statement.
func (t *trip) sync() {
	if t.err != nil {
		return
	}
	t.init()
	*t.buf = append(*t.buf, 'S', 0, 0, 0, 4)
	t.syncs = append(t.syncs, len(t.reads))
}

// queue adds st with params (each already in the binary format, copied)
// and r, which reads its result; oids are the types of its result's
// columns (nil: it gives none that are read).
func (t *trip) queue(st *statement, oids []uint32, r reader, params ...[]byte) {
	sd := t.prepare(st, len(params), oids)
	if sd == nil {
		return
	}
	buf, at := appendBindStart(*t.buf, sd.Name, len(params))
	for _, p := range params {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(p)))
		buf = append(buf, p...)
	}
	*t.buf = appendBindEnd(buf, at)
	t.reads = append(t.reads, r)
}

// queueEncoded adds st with nparams parameters that params appends to buf
// in the binary format, each after its length (see appendParam); oids are
// as for queue.
func (t *trip) queueEncoded(st *statement, nparams int, oids []uint32, r reader, params func(buf []byte) ([]byte, error)) {
	sd := t.prepare(st, nparams, oids)
	if sd == nil {
		return
	}
	buf, at := appendBindStart(*t.buf, sd.Name, nparams)
	buf, err := params(buf)
	if err != nil {
		t.err = err
		return
	}
	if len(buf)-at > math.MaxInt32 {
		t.err = errArrayTooLong
		return
	}
	*t.buf = appendBindEnd(buf, at)
	t.reads = append(t.reads, r)
}

// queueParsed is queue for a statement of sql with params, all bytea,
// prepared, when the connection has not got it yet, by a Parse in the
// same round trip (no Sync of its own, so an implicit transaction stays
// open); its result columns are not checked.
func (t *trip) queueParsed(sql string, r reader, params ...[]byte) {
	if t.err != nil {
		return
	}
	if t.state == nil {
		t.err = errors.New("postgres: a statement parsed in a round trip needs its connection's state")
		return
	}
	st := parsedStatement(sql)
	t.init()
	if !t.state.parsed[st.name] {
		buf := *t.buf
		at := len(buf)
		buf = append(buf, 'P', 0, 0, 0, 0)
		buf = append(buf, st.name...)
		buf = append(buf, 0)
		buf = append(buf, st.sql...)
		buf = append(buf, 0, 0, 0) // no parameter types: inferred
		binary.BigEndian.PutUint32(buf[at+1:], uint32(len(buf)-at-1))
		*t.buf = buf
		t.parsing = append(t.parsing, st.name)
	}
	buf, at := appendBindStart(*t.buf, st.name, len(params))
	for _, p := range params {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(p)))
		buf = append(buf, p...)
	}
	*t.buf = appendBindEnd(buf, at)
	t.reads = append(t.reads, r)
}

// parsedStatements is the statements of queueParsed, by their SQL.
var parsedStatements sync.Map // string -> *statement

func parsedStatement(sql string) *statement {
	if st, ok := parsedStatements.Load(sql); ok {
		return st.(*statement)
	}
	st, _ := parsedStatements.LoadOrStore(sql, newStatement(sql))
	return st.(*statement)
}

// appendBindStart appends a Bind of the prepared statement name to the
// unnamed portal, its nparams parameters in the binary format, up to the
// parameters' values; at is where the message begins.
func appendBindStart(buf []byte, name string, nparams int) (out []byte, at int) {
	at = len(buf)
	buf = append(buf, 'B', 0, 0, 0, 0) // its length, set by appendBindEnd
	buf = append(buf, 0)               // the unnamed portal
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint16(buf, 1) // one format for all
	buf = binary.BigEndian.AppendUint16(buf, uint16(pgtype.BinaryFormatCode))
	buf = binary.BigEndian.AppendUint16(buf, uint16(nparams))
	return buf, at
}

// appendBindEnd ends the Bind begun at at (results in the binary format)
// and appends an Execute of all its rows.
func appendBindEnd(buf []byte, at int) []byte {
	buf = binary.BigEndian.AppendUint16(buf, 1)
	buf = binary.BigEndian.AppendUint16(buf, uint16(pgtype.BinaryFormatCode))
	binary.BigEndian.PutUint32(buf[at+1:], uint32(len(buf)-at-1))
	return append(buf, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0)
}

// appendParam appends a parameter that value appends to buf, after its
// length.
func appendParam(buf []byte, value func(buf []byte) ([]byte, error)) ([]byte, error) {
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf, err := value(buf)
	if err != nil {
		return buf, err
	}
	if len(buf)-at-4 > math.MaxInt32 {
		return buf, errArrayTooLong
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf, nil
}

// send sends the statements queued, ending with a Sync, and reads their
// results. The first error (a statement's, the connection's) is returned;
// the server skips the statements after a failed one up to the next Sync.
// A connection that failed mid-trip (a write or read that did not
// complete: the caller gone, the timeout, the server) is closed: what it
// would read next is not known.
func (t *trip) send() error {
	return t.sendOpen(false)
}

// sendOpen is send; with open, the statements after the last Sync queued
// are followed by a Flush, not a Sync: they run in an implicit
// transaction that stays open (the next round trip's Sync commits it).
// If one of them fails, a Sync is sent to end it and rolledBack is set.
func (t *trip) sendOpen(open bool) error {
	if t.buf != nil {
		defer func() {
			if cap(*t.buf) <= tripBufMax {
				tripBufs.Put(t.buf)
			}
			t.buf = nil
		}()
	}
	if t.err != nil {
		return t.err
	}
	if open && len(t.reads) == 0 && len(t.syncs) == 0 {
		return nil // nothing to send
	}
	tail := !open || len(t.syncs) == 0 || t.syncs[len(t.syncs)-1] != len(t.reads)
	switch {
	case !open && tail:
		t.sync()
	case open && tail:
		t.init()
		*t.buf = append(*t.buf, 'H', 0, 0, 0, 4)
	}
	open = open && tail // statements after the last Sync, left open
	pg := t.conn.PgConn()
	if pg.IsClosed() {
		return errors.New("postgres: conn closed")
	}
	if _, err := pg.Conn().Write(*t.buf); err != nil {
		abandon(pg)
		return err
	}
	t.sent = true
	var first error
	i, seg := 0, 0
	failed := false // a statement of the current segment failed
	for {
		if open && seg == len(t.syncs) && i == len(t.reads) && !failed {
			return first // the open transaction's statements are answered
		}
		msg, err := pg.ReceiveMessage(context.Background())
		if err != nil {
			abandon(pg)
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ParseComplete:
			if len(t.parsing) > 0 {
				if t.state.parsed == nil {
					t.state.parsed = map[string]bool{}
				}
				t.state.parsed[t.parsing[0]] = true
				t.parsing = t.parsing[1:]
			}
		case *pgproto3.DataRow:
			if first == nil && i < len(t.reads) && t.reads[i] != nil {
				first = t.reads[i].row(m.Values)
			}
		case *pgproto3.CommandComplete:
			if first == nil && i < len(t.reads) && t.reads[i] != nil {
				first = t.reads[i].end(m.CommandTag)
			}
			i++
		case *pgproto3.EmptyQueryResponse:
			i++
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
			failed = true
			if open && seg == len(t.syncs) {
				// The server skips what follows until a Sync, which
				// ends the open transaction (a rollback, as it failed).
				if _, err := pg.Conn().Write([]byte{'S', 0, 0, 0, 4}); err != nil {
					abandon(pg)
					return first
				}
				t.syncs = append(t.syncs, len(t.reads))
				t.rolledBack = true
				open = false
			}
		case *pgproto3.ReadyForQuery:
			if seg >= len(t.syncs) {
				abandon(pg)
				return errBadRow
			}
			if !failed && i != t.syncs[seg] {
				if first == nil {
					first = errBadRow
				}
				failed = true
			}
			if !failed && t.synced == seg {
				t.synced++
			}
			i, failed = t.syncs[seg], false
			seg++
			if !open && seg == len(t.syncs) {
				return first
			}
		}
		if pg.IsClosed() { // a fatal error the driver closed it on
			if first == nil {
				first = errors.New("postgres: conn closed")
			}
			return first
		}
	}
}

// abandon closes a connection whose round trip failed midway, first asking
// the server to cancel what it runs (it may be waiting on a lock), as the
// driver does with a connection it gives up.
func abandon(pg *pgconn.PgConn) {
	if pg.IsClosed() {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		pg.CancelRequest(ctx)
	}()
	// Close's Terminate must not wait on a peer that stopped reading.
	pg.Conn().SetDeadline(time.Now())
	pg.Close(context.Background())
}

// fieldTypes reports whether fields are of the types oids.
func fieldTypes(fields []pgconn.FieldDescription, oids []uint32) bool {
	if len(fields) != len(oids) {
		return false
	}
	for i, f := range fields {
		if f.DataTypeOID != oids[i] {
			return false
		}
	}
	return true
}

// The result types that readers check.
var (
	int8Column    = []uint32{pgtype.Int8OID}
	byteaColumn   = []uint32{pgtype.ByteaOID}
	byteaColumns2 = []uint32{pgtype.ByteaOID, pgtype.ByteaOID}
	getAllColumns = []uint32{pgtype.Int8OID, pgtype.ByteaOID, pgtype.Int8OID}
)

// readInt8 reads the one row of a result into *dst: its column col, a
// bigint (the other columns, void results of locks, are skipped).
func readInt8(col int, dst *int64) reader {
	return &int8Reader{col: col, dst: dst}
}

type int8Reader struct {
	col int
	dst *int64
	got bool
}

func (r *int8Reader) row(cols [][]byte) error {
	if r.col >= len(cols) {
		return errBadRow
	}
	n, ok := rawInt8(cols[r.col])
	if !ok {
		return errBadRow
	}
	*r.dst, r.got = n, true
	return nil
}

func (r *int8Reader) end([]byte) error {
	if !r.got {
		return pgx.ErrNoRows
	}
	return nil
}
