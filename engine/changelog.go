package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

// changeOp is the kind of change an all-versions-and-deletes record describes.
type changeOp byte

const (
	opCreate  changeOp = 1
	opReplace changeOp = 2
	opDelete  changeOp = 3
)

func (op changeOp) String() string {
	switch op {
	case opCreate:
		return "create"
	case opReplace:
		return "replace"
	case opDelete:
		return "delete"
	}
	return "unknown"
}

// changeRecord is one entry of the all-versions-and-deletes log:
//
//	version(1) op(1) flags(1) crts(8) previous lsn(8) key len(2) item key doc
//
// doc is the new version for creates and replaces, the deleted version for
// deletes.
type changeRecord struct {
	lsn        uint64
	op         changeOp
	ttlExpired bool
	crts       int64
	prevLSN    uint64
	itemKey    []byte
	doc        []byte
}

const changeHeaderLen = 1 + 1 + 1 + 8 + 8 + 2

const flagTTLExpired byte = 1

func (r *changeRecord) encode() []byte {
	v := make([]byte, 0, changeHeaderLen+len(r.itemKey)+len(r.doc))
	var flags byte
	if r.ttlExpired {
		flags |= flagTTLExpired
	}
	v = append(v, 1, byte(r.op), flags)
	v = binary.BigEndian.AppendUint64(v, uint64(r.crts))
	v = binary.BigEndian.AppendUint64(v, r.prevLSN)
	v = binary.BigEndian.AppendUint16(v, uint16(len(r.itemKey)))
	v = append(v, r.itemKey...)
	return append(v, r.doc...)
}

func decodeChangeRecord(lsn uint64, v []byte) (*changeRecord, error) {
	if len(v) < changeHeaderLen || v[0] != 1 {
		return nil, errors.New("engine: corrupt change record")
	}
	n := int(binary.BigEndian.Uint16(v[19:]))
	if len(v) < changeHeaderLen+n {
		return nil, errors.New("engine: corrupt change record key")
	}
	return &changeRecord{
		lsn:        lsn,
		op:         changeOp(v[1]),
		ttlExpired: v[2]&flagTTLExpired != 0,
		crts:       int64(binary.BigEndian.Uint64(v[3:])),
		prevLSN:    binary.BigEndian.Uint64(v[11:]),
		itemKey:    v[changeHeaderLen : changeHeaderLen+n],
		doc:        v[changeHeaderLen+n:],
	}, nil
}

// logChange records the side effects of one item write in the transaction's
// batch: the all-versions-and-deletes record of the change (in containers
// with a changeFeedPolicy; others have no such feed and pay for none), and
// the item's entry in the expiry index. cur is the new version (nil for a delete) and
// prev the stored version it replaces (nil for a create); a prev that had
// already expired is logged as deleted by TTL before cur is logged as created.
func (t *txn) logChange(cur, prev *storedItem) error {
	c := t.p.c
	// A write within the second of the one it replaces, both with an
	// expiry entry, keeps the entry it has: deleting and setting the same
	// key to the same item key cost the store two entries for nothing.
	sameExpiry := false
	if prev != nil {
		pk := prev.expiryKey(c.rid)
		sameExpiry = cur != nil && prev.ttl != -1 && cur.ttl != -1 && bytes.Equal(prev.key, cur.key) &&
			bytes.Equal(pk, cur.expiryKey(c.rid))
		if !sameExpiry {
			if err := t.b.Delete(pk); err != nil {
				return err
			}
		}
	}
	logged := c.changeLogRetention() > 0
	if cur == nil {
		if !logged {
			return nil
		}
		return t.appendChange(&changeRecord{op: opDelete, ttlExpired: t.expiring, crts: t.now.Unix(),
			prevLSN: prev.lsn, itemKey: prev.key, doc: prev.doc})
	}
	op := opReplace
	var prevLSN uint64
	switch {
	case !logged:
	case prev == nil:
		op = opCreate
	case c.expired(prev, t.now.Unix()):
		op = opCreate
		if err := t.appendChange(&changeRecord{op: opDelete, ttlExpired: true, crts: t.now.Unix(),
			prevLSN: prev.lsn, itemKey: prev.key, doc: prev.doc}); err != nil {
			return err
		}
	default:
		prevLSN = prev.lsn
	}
	if logged {
		if err := t.appendChange(&changeRecord{op: op, crts: cur.ts, prevLSN: prevLSN, itemKey: cur.key, doc: cur.doc}); err != nil {
			return err
		}
	}
	if cur.ttl == -1 || sameExpiry {
		return nil
	}
	return t.b.Set(cur.expiryKey(c.rid), cur.key)
}

func (t *txn) appendChange(r *changeRecord) error {
	r.lsn = t.lsn
	k := keys.VersionKey(t.p.c.rid, t.lsn, t.nlog)
	t.nlog++
	return t.b.Set(k, r.encode())
}

// expiryKey is the item's entry in the expiry index. Items with ttl -1 never
// expire and have none, but deleting their (absent) key is harmless.
func (it *storedItem) expiryKey(collRID []byte) []byte {
	rid := binary.BigEndian.AppendUint64(nil, it.rid)
	if it.ttl > 0 {
		return keys.ExpiryKey(collRID, keys.ExpiryByDeadline, it.ts+int64(it.ttl), rid)
	}
	return keys.ExpiryKey(collRID, keys.ExpiryByModified, it.ts, rid)
}

// avadDocument renders a change record in the all-versions-and-deletes wire
// format: {"current":…,"previous":…,"metadata":{…}}.
func (c *Container) avadDocument(r *changeRecord) []byte {
	b := make([]byte, 0, len(r.doc)+256)
	if r.op == opDelete {
		b = append(b, `{"current":{},"previous":`...)
	} else {
		b = append(b, `{"current":`...)
	}
	b = append(b, r.doc...)
	b = append(b, `,"metadata":{"operationType":"`...)
	b = append(b, r.op.String()...)
	b = append(b, `","lsn":`...)
	b = strconv.AppendUint(b, r.lsn, 10)
	b = append(b, `,"crts":`...)
	b = strconv.AppendInt(b, r.crts, 10)
	if r.prevLSN != 0 {
		b = append(b, `,"previousImageLSN":`...)
		b = strconv.AppendUint(b, r.prevLSN, 10)
	}
	if r.op == opDelete {
		if id, pk, ok := c.splitItemKey(r.itemKey); ok {
			b = append(b, `,"id":`...)
			b = appendJSONString(b, id)
			b = append(b, `,"partitionKey":`...)
			b = append(b, c.partitionKeyObject(pk)...)
		}
		b = append(b, `,"timeToLiveExpired":`...)
		b = strconv.AppendBool(b, r.ttlExpired)
	}
	return append(b, "}}"...)
}

// epkLen is the length of the effective partition key in the container's
// item keys.
func (c *Container) epkLen() int { return 16 * len(c.pk.Paths) }

// itemEPK returns the effective partition key part of one of the container's
// item keys.
func (c *Container) itemEPK(key []byte) []byte {
	start := 1 + len(c.rid)
	end := start + c.epkLen()
	if len(key) < end {
		return nil
	}
	return key[start:end]
}

// splitItemKey returns the id and the encoded partition key of one of the
// container's item keys.
func (c *Container) splitItemKey(key []byte) (id string, pkEnc []byte, ok bool) {
	off := 1 + len(c.rid) + c.epkLen()
	if len(key) < off+2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(key[off:]))
	off += 2
	if len(key) < off+n {
		return "", nil, false
	}
	return string(key[off+n:]), key[off : off+n], true
}

// partitionKeyObject renders an encoded partition key as the object the
// change feed metadata carries: property path → value, undefined components
// left out.
func (c *Container) partitionKeyObject(pkEnc []byte) []byte {
	var vals []json.RawMessage
	if json.Unmarshal(pkEnc, &vals) != nil {
		return []byte("{}")
	}
	b := []byte{'{'}
	for i, v := range vals {
		if i >= len(c.pk.Paths) || string(v) == "{}" {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, strings.TrimPrefix(c.pk.Paths[i], "/"))
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}')
}
