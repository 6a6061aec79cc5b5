package engine

import (
	"encoding/binary"
	"errors"
)

// The stored-record format of items: the record's header and its JSON and
// the ETag a record answers with. It uses no other name of the engine, so
// that every file may read records without tying itself into a cycle; a
// container's logical partitions and their keys are the container's
// (catalogmodel.go), and so is the key of a record's expiry entry
// (expiryKeyOf, expiry.go), which depends on the container's defaultTtl.

// storedItem is an item as kept in storage: a fixed header, then its JSON.
//
//	version(1) lsn(8) ts(8) ttl(4, int32, 0 = none) rid suffix(8) write(2) json
//
// write numbers the writes of one transaction, so that an item written twice
// in one batch or stored procedure gets a new ETag each time.
type storedItem struct {
	key []byte
	lsn uint64
	ts  int64
	rid uint64
	doc []byte
	// etagText is the ETag when put formatted it for the record (a write's
	// answer gives it back), else "" and etag formats it.
	etagText string
	// ttl and write after the words: the struct is 96 bytes with
	// etagText, as it was without it in the header's order.
	ttl   int32
	write uint16
}

const (
	itemRecordVersion = 2
	itemHeaderLen     = 1 + 8 + 8 + 4 + 8 + 2
)

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
	s := new(storedItem)
	if err := decodeItemInto(s, key, v); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeItemInto is decodeItem into s.
func decodeItemInto(s *storedItem, key, v []byte) error {
	if len(v) < itemHeaderLen || v[0] != itemRecordVersion {
		return errors.New("engine: corrupt item record")
	}
	*s = storedItem{
		key:   key,
		lsn:   binary.BigEndian.Uint64(v[1:]),
		ts:    int64(binary.BigEndian.Uint64(v[9:])),
		ttl:   int32(binary.BigEndian.Uint32(v[17:])),
		rid:   binary.BigEndian.Uint64(v[21:]),
		write: binary.BigEndian.Uint16(v[29:]),
		doc:   v[itemHeaderLen:],
	}
	return nil
}

// etag is the item's current ETag: unique to this write of this item.
func (it *storedItem) etag() string {
	if it.etagText != "" {
		return it.etagText
	}
	return string(it.appendETag(make([]byte, 0, etagLen)))
}

// etagLen is the length of an ETag, its quotes included.
const etagLen = 1 + 8 + 1 + 4 + 1 + 4 + 1 + 4 + 1 + 12 + 1

// appendETag appends the ETag, "%08x-%04x-%04x-0000-%012x" quoted, of the
// write's LSN (high 32 bits, low 48 bits), the rid's low 16 bits and the
// write's number in its transaction.
func (it *storedItem) appendETag(b []byte) []byte {
	n := len(b)
	b = append(b, `"00000000-0000-0000-0000-000000000000"`...)
	e := b[n : n+etagLen]
	putHex(e[1:9], it.lsn>>32&0xFFFFFFFF)
	putHex(e[10:14], it.rid&0xFFFF)
	putHex(e[15:19], uint64(it.write))
	putHex(e[25:37], it.lsn&0xFFFFFFFFFFFF)
	return b
}

// putHex writes v in lower-case hexadecimal into d, zero-padded to its
// length, which is even (every field of an ETag's is): two digits, one
// byte of v, at a time.
func putHex(d []byte, v uint64) {
	for i := len(d) - 2; i >= 0; i -= 2 {
		b := v & 0xFF
		d[i], d[i+1] = hexPairs[2*b], hexPairs[2*b+1]
		v >>= 8
	}
}

// hexPairs is the two lower-case hexadecimal digits of each byte, in order.
const hexPairs = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" +
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f" +
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f" +
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f" +
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f" +
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf" +
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf" +
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"
