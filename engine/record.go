package engine

import (
	"encoding/binary"
	"errors"

	"github.com/orrery-db/orrery/engine/internal/keys"
)

// The stored-record format of items: the record's header and its JSON, the
// ETag a record answers with, its time to live, and the keys of a logical
// partition's items.

// storedItem is an item as kept in storage: a fixed header, then its JSON.
//
//	version(1) lsn(8) ts(8) ttl(4, int32, 0 = none) rid suffix(8) write(2) json
//
// write numbers the writes of one transaction, so that an item written twice
// in one batch or stored procedure gets a new ETag each time.
type storedItem struct {
	key   []byte
	lsn   uint64
	ts    int64
	ttl   int32
	rid   uint64
	write uint16
	doc   []byte
}

const (
	itemRecordVersion = 2
	itemHeaderLen     = 1 + 8 + 8 + 4 + 8 + 2
)

func (it *storedItem) encode() []byte {
	return append(it.appendHeader(make([]byte, 0, itemHeaderLen+len(it.doc))), it.doc...)
}

// appendHeader appends the record's header, which the JSON follows.
func (it *storedItem) appendHeader(v []byte) []byte {
	v = append(v, itemRecordVersion)
	v = binary.BigEndian.AppendUint64(v, it.lsn)
	v = binary.BigEndian.AppendUint64(v, uint64(it.ts))
	v = binary.BigEndian.AppendUint32(v, uint32(it.ttl))
	v = binary.BigEndian.AppendUint64(v, it.rid)
	return binary.BigEndian.AppendUint16(v, it.write)
}

func decodeItem(key, v []byte) (*storedItem, error) {
	if len(v) < itemHeaderLen || v[0] != itemRecordVersion {
		return nil, errors.New("engine: corrupt item record")
	}
	return &storedItem{
		key:   key,
		lsn:   binary.BigEndian.Uint64(v[1:]),
		ts:    int64(binary.BigEndian.Uint64(v[9:])),
		ttl:   int32(binary.BigEndian.Uint32(v[17:])),
		rid:   binary.BigEndian.Uint64(v[21:]),
		write: binary.BigEndian.Uint16(v[29:]),
		doc:   v[itemHeaderLen:],
	}, nil
}

// etag is the item's current ETag: unique to this write of this item.
func (it *storedItem) etag() string {
	return string(it.appendETag(make([]byte, 0, etagLen)))
}

// etagLen is the length of an ETag, its quotes included.
const etagLen = 1 + 8 + 1 + 4 + 1 + 4 + 1 + 4 + 1 + 12 + 1

// appendETag appends the ETag, "%08x-%04x-%04x-0000-%012x" quoted, of the
// write's LSN (high 32 bits, low 48 bits), the rid's low 16 bits and the
// write's number in its transaction.
func (it *storedItem) appendETag(b []byte) []byte {
	b = append(b, '"')
	b = appendHex(b, it.lsn>>32&0xFFFFFFFF, 8)
	b = append(b, '-')
	b = appendHex(b, it.rid&0xFFFF, 4)
	b = append(b, '-')
	b = appendHex(b, uint64(it.write), 4)
	b = append(b, "-0000-"...)
	b = appendHex(b, it.lsn&0xFFFFFFFFFFFF, 12)
	return append(b, '"')
}

// appendHex appends v in lower-case hexadecimal, zero-padded to digits.
func appendHex(b []byte, v uint64, digits int) []byte {
	const hex = "0123456789abcdef"
	for i := digits - 1; i >= 0; i-- {
		b = append(b, hex[v>>(4*uint(i))&0xF])
	}
	return b
}

// expired reports whether the item's time to live has run out.
func (c *Container) expired(it *storedItem, now int64) bool {
	if c.ttl == nil {
		return false
	}
	ttl := int64(it.ttl)
	if ttl == 0 {
		ttl = *c.ttl
	}
	return ttl > 0 && it.ts+ttl <= now
}

// partition is one logical partition of a container.
type partition struct {
	c      *Container
	pk     PartitionKey
	enc    []byte
	prefix []byte
}

func (c *Container) partition(pk PartitionKey) (*partition, *Error) {
	pk = c.legacyKey(pk)
	if len(pk) != len(c.pk.Paths) && !c.nonPartitioned() {
		return nil, BadRequest("The partition key supplied has %d components, but the container's partition key definition has %d paths.", len(pk), len(c.pk.Paths))
	}
	enc := pk.Encode()
	return &partition{c: c, pk: pk, enc: enc, prefix: keys.ItemPartitionPrefix(c.rid, effectivePartitionKey(&c.pk, pk), enc)}, nil
}

// nonPartitioned reports whether c is a legacy non-partitioned container:
// created without a partition key by an API version before 2018-12-31, its
// definition is the service's system key /_partitionKey.
func (c *Container) nonPartitioned() bool {
	return c.pk.SystemKey != nil && *c.pk.SystemKey && len(c.pk.Paths) == 1 && c.pk.Paths[0] == "/_partitionKey"
}

// legacyKey maps the key that addresses a legacy non-partitioned
// container's one partition to the empty key its items are stored under:
// the JS SDK sends [] for it, the others [{}] (the undefined key), and an
// item without /_partitionKey extracts as undefined. Any other key is
// returned as given.
func (c *Container) legacyKey(pk PartitionKey) PartitionKey {
	if c.nonPartitioned() && pk.IsUndefined() {
		return PartitionKey{}
	}
	return pk
}

// scope is the key prefix of the items a feed or query reads: the logical
// partition (or hierarchical key prefix) when a partition key is given, else
// the whole container.
func (c *Container) scope(pk PartitionKey, hasPK bool) ([]byte, *Error) {
	if !hasPK {
		return keys.ItemContainerPrefix(c.rid), nil
	}
	return c.queryScope(pk)
}

func (p *partition) itemKey(id string) []byte {
	return append(append(make([]byte, 0, len(p.prefix)+len(id)), p.prefix...), id...)
}
