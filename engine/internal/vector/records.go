package vector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The index's keyspace:
//
//	"m"             meta: the format, the configuration, the next node id,
//	                the graph's entry node and consolidation state
//	"c"             the product quantizer's codebooks, once trained
//	"v" id          a node: its item's key and its vector as stored
//	"e" id          a diskANN node's out-neighbours
//	"q" id          a node's product-quantized code (quantizedFlat)
//	"d" id          a diskANN node deleted but still linked (its epoch)
//	"k" key         the node id of an item's key
//
// Node ids are 4-byte big-endian, so a scan of "v" visits nodes in id order.
const (
	recMeta     = 'm'
	recCodebook = 'c'
	recNode     = 'v'
	recEdges    = 'e'
	recCode     = 'q'
	recDead     = 'd'
	recKey      = 'k'
)

// formatVersion is the layout of the keyspace written by this code.
const formatVersion = 1

// ErrCorrupt reports a keyspace that this package did not write, or that was
// written by another configuration.
var ErrCorrupt = errors.New("vector: index keyspace is corrupt")

func idKey(kind byte, id uint32) []byte {
	k := make([]byte, 5)
	k[0] = kind
	binary.BigEndian.PutUint32(k[1:], id)
	return k
}

func itemKey(key []byte) []byte { return append([]byte{recKey}, key...) }

// meta is the index's small mutable state.
type meta struct {
	cfg      Config
	nextID   uint32
	entry    uint32
	hasEntry bool
	epoch    uint32 // consolidation sweeps completed
	cursor   uint32 // the next node the sweep repairs
}

func (m meta) encode() []byte {
	b := []byte{formatVersion}
	b = binary.AppendUvarint(b, uint64(m.cfg.Kind))
	b = binary.AppendUvarint(b, uint64(m.cfg.Dimensions))
	b = binary.AppendUvarint(b, uint64(m.cfg.DataType))
	b = binary.AppendUvarint(b, uint64(m.cfg.Metric))
	b = binary.AppendUvarint(b, uint64(m.cfg.QuantizationByteSize))
	b = binary.AppendUvarint(b, uint64(m.cfg.SearchListSize))
	b = binary.AppendUvarint(b, uint64(m.cfg.MaxDegree))
	b = binary.AppendUvarint(b, uint64(m.nextID))
	b = binary.AppendUvarint(b, uint64(m.entry))
	if m.hasEntry {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(m.epoch))
	b = binary.AppendUvarint(b, uint64(m.cursor))
	return b
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) == 0 || b[0] != formatVersion {
		return meta{}, fmt.Errorf("%w: meta of format %v", ErrCorrupt, b[:min(1, len(b))])
	}
	r := reader{b: b[1:]}
	var m meta
	m.cfg.Kind = Kind(r.uvarint())
	m.cfg.Dimensions = int(r.uvarint())
	m.cfg.DataType = DataType(r.uvarint())
	m.cfg.Metric = Metric(r.uvarint())
	m.cfg.QuantizationByteSize = int(r.uvarint())
	m.cfg.SearchListSize = int(r.uvarint())
	m.cfg.MaxDegree = int(r.uvarint())
	m.nextID = uint32(r.uvarint())
	m.entry = uint32(r.uvarint())
	m.hasEntry = r.byte() == 1
	m.epoch = uint32(r.uvarint())
	m.cursor = uint32(r.uvarint())
	if r.err {
		return meta{}, fmt.Errorf("%w: short meta", ErrCorrupt)
	}
	return m, nil
}

// reader decodes varints and bytes, remembering a short read.
type reader struct {
	b   []byte
	err bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.err = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// encodeNode is a node record: its item key and its vector as stored.
func encodeNode(t DataType, key []byte, v []float32) []byte {
	b := make([]byte, 0, binary.MaxVarintLen32+len(key)+len(v)*t.size())
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	for _, x := range v {
		switch t {
		case Float16:
			b = binary.LittleEndian.AppendUint16(b, floatToHalf(x))
		case Int8:
			b = append(b, byte(int8(x)))
		case Uint8:
			b = append(b, byte(x))
		default:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}

// decodeNode reads a node record; with dst non-nil the vector is decoded
// into it (len dims), else it is only checked.
func decodeNode(t DataType, dims int, b []byte, dst []float32) (key []byte, err error) {
	r := reader{b: b}
	n := r.uvarint()
	key = r.bytes(int(n))
	raw := r.bytes(dims * t.size())
	if r.err || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: node record of %d bytes", ErrCorrupt, len(b))
	}
	if dst == nil {
		return key, nil
	}
	for i := range dims {
		switch t {
		case Float16:
			dst[i] = halfToFloat(binary.LittleEndian.Uint16(raw[2*i:]))
		case Int8:
			dst[i] = float32(int8(raw[i]))
		case Uint8:
			dst[i] = float32(raw[i])
		default:
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	return key, nil
}

func encodeEdges(nbrs []uint32) []byte {
	b := make([]byte, 0, 2+4*len(nbrs))
	b = binary.AppendUvarint(b, uint64(len(nbrs)))
	for _, n := range nbrs {
		b = binary.BigEndian.AppendUint32(b, n)
	}
	return b
}

func decodeEdges(b []byte) ([]uint32, error) {
	r := reader{b: b}
	n := r.uvarint()
	raw := r.bytes(int(n) * 4)
	if r.err || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: edge record", ErrCorrupt)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.BigEndian.Uint32(raw[4*i:])
	}
	return out, nil
}
