package postgres

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/jackc/pgx/v5/pgtype"
)

// byteaArray is a bytea[] parameter (keys, values). On a connection of the
// store's pool (see registerTypes) it is written straight into the
// statement's binary parameters, one length and the bytes per element: the
// driver's array codec would ask every element for its value as an
// interface (one allocation each, 28 for a write of 14 rows) and plan its
// encoding. Elsewhere it is an ordinary array (pgtype.ArrayGetter).
type byteaArray [][]byte

func (a byteaArray) Dimensions() []pgtype.ArrayDimension {
	return pgtype.FlatArray[[]byte](a).Dimensions()
}

func (a byteaArray) Index(i int) any { return a[i] }

func (a byteaArray) IndexType() any { return []byte{} }

// byteaArrayCodec is the driver's codec of bytea[] with byteaArray's
// binary encoding in front; everything else (decoding, other Go types) is
// the driver's.
type byteaArrayCodec struct{ pgtype.Codec }

func (c byteaArrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(byteaArray); ok && format == pgtype.BinaryFormatCode {
		return encodeByteaArray{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// registerTypes puts byteaArrayCodec in front of m's bytea[] codec.
func registerTypes(m *pgtype.Map) {
	t, ok := m.TypeForOID(pgtype.ByteaArrayOID)
	if !ok {
		return
	}
	if _, done := t.Codec.(byteaArrayCodec); done {
		return
	}
	m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: byteaArrayCodec{t.Codec}})
}

type encodeByteaArray struct{}

var errArrayTooLong = errors.New("postgres: a bytea[] parameter of more than 2^31-1 elements or bytes")

// Encode writes PostgreSQL's binary array format (array_recv): the number
// of dimensions, a flag for NULL elements, the element type, each
// dimension's length and lower bound, then each element's length (-1 for
// NULL) and bytes. A nil array is NULL.
func (encodeByteaArray) Encode(value any, buf []byte) ([]byte, error) {
	a := value.(byteaArray)
	if a == nil {
		return nil, nil
	}
	if len(a) > math.MaxInt32 {
		return nil, errArrayTooLong
	}
	hasNull := uint32(0)
	size := 0
	for _, e := range a {
		if e == nil {
			hasNull = 1
		}
		size += 4 + len(e)
	}
	dims := uint32(1)
	if len(a) == 0 {
		dims = 0
	}
	buf = binary.BigEndian.AppendUint32(buf, dims)
	buf = binary.BigEndian.AppendUint32(buf, hasNull)
	buf = binary.BigEndian.AppendUint32(buf, pgtype.ByteaOID)
	if len(a) == 0 {
		return buf, nil
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(a)))
	buf = binary.BigEndian.AppendUint32(buf, 1)
	if cap(buf)-len(buf) < size {
		grown := make([]byte, len(buf), len(buf)+size)
		copy(grown, buf)
		buf = grown
	}
	for _, e := range a {
		if e == nil {
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
			continue
		}
		if len(e) > math.MaxInt32 {
			return nil, errArrayTooLong
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(e)))
		buf = append(buf, e...)
	}
	return buf, nil
}

// rawInt8 decodes a bigint in the binary format; ok is false for NULL or
// another length.
func rawInt8(b []byte) (n int64, ok bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// errBadRow is a row that is not what the statement gives.
var errBadRow = errors.New("postgres: an unexpected row in a result")
