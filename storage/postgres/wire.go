package postgres

import (
	"context"
	"hash/fnv"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// statement is a statement of the paths every request takes (a point
// read, a write's two round trips), prepared on each connection once, by
// its name, and from then on sent by reference: a Bind and an Execute,
// its parameters and results in the binary format, straight through the
// driver's protocol layer. The driver's query layer would, for each
// statement, look it up in an LRU cache, box and plan each argument,
// track it in its pipeline's lists and scan each result through a plan
// of its own.
type statement struct{ name, sql string }

func newStatement(sql string) *statement {
	h := fnv.New64a()
	h.Write([]byte(sql))
	return &statement{name: "orrery_" + strconv.FormatUint(h.Sum64(), 36), sql: sql}
}

// binaryFormat is the format of every parameter and result column of a
// trip's statements.
var binaryFormat = []int16{pgtype.BinaryFormatCode}

// trip is one round trip of statements on a connection. Each statement is
// prepared on the connection first if it is not yet (a round trip of its
// own, once per connection and statement), then queued; send sends them
// all with one Sync and reads each one's result in order.
type trip struct {
	ctx   context.Context
	conn  *pgx.Conn
	batch pgconn.Batch
	reads []func(*pgconn.ResultReader) error
	err   error
	// few holds reads for a round trip of a few statements (a write's
	// has at most five) without a growing slice.
	few [6]func(*pgconn.ResultReader) error
}

// queue adds st with params (each already in the binary format) and read,
// which reads its result (nil: no rows are read, the result is only
// checked for an error).
func (t *trip) queue(st *statement, read func(*pgconn.ResultReader) error, params ...[]byte) {
	if t.err != nil {
		return
	}
	sd, err := t.conn.Prepare(t.ctx, st.name, st.sql)
	if err != nil {
		t.err = err
		return
	}
	// The Bind message copies params: the caller may reuse their memory.
	t.batch.ExecStatement(sd, params, binaryFormat, binaryFormat)
	if t.reads == nil {
		t.reads = t.few[:0]
	}
	t.reads = append(t.reads, read)
}

// send sends the statements queued and reads their results. The first
// error (a statement's, the connection's) is returned; the server skips
// the statements after a failed one.
func (t *trip) send() error {
	if t.err != nil {
		return t.err
	}
	mrr := t.conn.PgConn().ExecBatch(t.ctx, &t.batch)
	var err error
	for i := 0; mrr.NextResult(); i++ {
		rr := mrr.ResultReader()
		if err == nil && i < len(t.reads) && t.reads[i] != nil {
			err = t.reads[i](rr)
		}
		if _, cerr := rr.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := mrr.Close(); cerr != nil {
		return cerr
	}
	return err
}

// byteaArrayParam is a bytea[] parameter in the binary format.
func byteaArrayParam(a [][]byte) ([]byte, error) {
	size := 20
	for _, e := range a {
		size += 4 + len(e)
	}
	return encodeByteaArray{}.Encode(byteaArray(a), make([]byte, 0, size))
}

// fieldsAre reports whether rr's columns are of the types oids, in the
// binary format.
func fieldsAre(rr *pgconn.ResultReader, oids ...uint32) bool {
	return binaryColumns(rr.FieldDescriptions(), oids)
}

// readInt8 reads the one row of a result into *dst: its column col, a
// bigint (the other columns, void results of locks, are skipped).
func readInt8(col int, dst *int64) func(*pgconn.ResultReader) error {
	return func(rr *pgconn.ResultReader) error {
		if !rr.NextRow() {
			if _, err := rr.Close(); err != nil {
				return err
			}
			return pgx.ErrNoRows
		}
		fields := rr.FieldDescriptions()
		if col >= len(fields) || fields[col].Format != pgtype.BinaryFormatCode || fields[col].DataTypeOID != pgtype.Int8OID {
			return errBadRow
		}
		n, ok := rawInt8(rr.Values()[col])
		if !ok {
			return errBadRow
		}
		*dst = n
		return nil
	}
}
