package feed

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/jsondoc"
	"github.com/orrery-db/orrery/engine/internal/keys"
)

// Op is the kind of change an all-versions-and-deletes record describes.
type Op byte

const (
	Create  Op = 1
	Replace Op = 2
	Delete  Op = 3
)

func (op Op) String() string {
	switch op {
	case Create:
		return "create"
	case Replace:
		return "replace"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// Record is one entry of the all-versions-and-deletes log:
//
//	version(1) op(1) flags(1) crts(8) previous lsn(8) key len(2) item key doc
//
// Doc is the new version for creates and replaces, the deleted version for
// deletes. LSN is the sequence number of the transaction that wrote it; it
// is the record's key, not part of its value.
type Record struct {
	LSN        uint64
	Op         Op
	TTLExpired bool
	Crts       int64
	PrevLSN    uint64
	ItemKey    []byte
	Doc        []byte
}

const headerLen = 1 + 1 + 1 + 8 + 8 + 2

const flagTTLExpired byte = 1

// Encode returns the record's stored value.
func (r *Record) Encode() []byte {
	v := make([]byte, 0, headerLen+len(r.ItemKey)+len(r.Doc))
	var flags byte
	if r.TTLExpired {
		flags |= flagTTLExpired
	}
	v = append(v, 1, byte(r.Op), flags)
	v = binary.BigEndian.AppendUint64(v, uint64(r.Crts))
	v = binary.BigEndian.AppendUint64(v, r.PrevLSN)
	v = binary.BigEndian.AppendUint16(v, uint16(len(r.ItemKey)))
	v = append(v, r.ItemKey...)
	return append(v, r.Doc...)
}

// DecodeRecord reads the stored value v of the record at sequence number
// lsn. The record's item key and document alias v.
func DecodeRecord(lsn uint64, v []byte) (*Record, error) {
	if len(v) < headerLen || v[0] != 1 {
		return nil, errors.New("engine: corrupt change record")
	}
	n := int(binary.BigEndian.Uint16(v[19:]))
	if len(v) < headerLen+n {
		return nil, errors.New("engine: corrupt change record key")
	}
	return &Record{
		LSN:        lsn,
		Op:         Op(v[1]),
		TTLExpired: v[2]&flagTTLExpired != 0,
		Crts:       int64(binary.BigEndian.Uint64(v[3:])),
		PrevLSN:    binary.BigEndian.Uint64(v[11:]),
		ItemKey:    v[headerLen : headerLen+n],
		Doc:        v[headerLen+n:],
	}, nil
}

// Container is what the feed knows of a container: its RID, which its
// keys start with, and its partition key paths, which size the effective
// partition key in its item keys and name the partition key's components
// in a delete's metadata.
type Container struct {
	RID   []byte
	Paths []string
}

// epkLen is the length of the effective partition key in the container's
// item keys.
func (c Container) epkLen() int { return 16 * len(c.Paths) }

// ItemEPK returns the effective partition key part of one of the
// container's item keys.
func (c Container) ItemEPK(key []byte) []byte { return keys.ItemEPK(c.RID, c.epkLen(), key) }

// Document renders a change record in the all-versions-and-deletes wire
// format: {"current":…,"previous":…,"metadata":{…}}.
func (c Container) Document(r *Record) []byte {
	b := make([]byte, 0, len(r.Doc)+256)
	if r.Op == Delete {
		b = append(b, `{"current":{},"previous":`...)
	} else {
		b = append(b, `{"current":`...)
	}
	b = append(b, r.Doc...)
	b = append(b, `,"metadata":{"operationType":"`...)
	b = append(b, r.Op.String()...)
	b = append(b, `","lsn":`...)
	b = strconv.AppendUint(b, r.LSN, 10)
	b = append(b, `,"crts":`...)
	b = strconv.AppendInt(b, r.Crts, 10)
	if r.PrevLSN != 0 {
		b = append(b, `,"previousImageLSN":`...)
		b = strconv.AppendUint(b, r.PrevLSN, 10)
	}
	if r.Op == Delete {
		if id, pk, ok := keys.SplitItemKey(c.RID, c.epkLen(), r.ItemKey); ok {
			b = append(b, `,"id":`...)
			b = jsondoc.AppendString(b, id)
			b = append(b, `,"partitionKey":`...)
			b = append(b, c.partitionKeyObject(pk)...)
		}
		b = append(b, `,"timeToLiveExpired":`...)
		b = strconv.AppendBool(b, r.TTLExpired)
	}
	return append(b, "}}"...)
}

// partitionKeyObject renders an encoded partition key as the object the
// change feed metadata carries: property path → value, undefined components
// left out.
func (c Container) partitionKeyObject(pkEnc []byte) []byte {
	var vals []json.RawMessage
	if json.Unmarshal(pkEnc, &vals) != nil {
		return []byte("{}")
	}
	b := []byte{'{'}
	for i, v := range vals {
		if i >= len(c.Paths) || string(v) == "{}" {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = jsondoc.AppendString(b, strings.TrimPrefix(c.Paths[i], "/"))
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}')
}
