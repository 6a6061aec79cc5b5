package epk

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strings"
)

// Kind is the type of one partition key component: the marker Cosmos hashes
// in front of its value.
type Kind byte

// The type markers of partition key components.
const (
	Undefined Kind = 0x00
	Null      Kind = 0x01
	False     Kind = 0x02
	True      Kind = 0x03
	Number    Kind = 0x05
	String    Kind = 0x08
)

// Hash is the 16-byte effective partition key of one component under hash
// partitioning version 2. s is read for a String, num for a Number; other
// kinds hash their marker alone.
func Hash(k Kind, s string, num float64) [16]byte {
	buf := make([]byte, 0, 16+len(s))
	buf = append(buf, byte(k))
	switch k {
	case String:
		buf = append(buf, s...)
		buf = append(buf, 0xFF)
	case Number:
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(num))
	}
	h1, h2 := murmur3x64(buf)
	var le [16]byte
	binary.LittleEndian.PutUint64(le[:8], h1)
	binary.LittleEndian.PutUint64(le[8:], h2)
	var out [16]byte
	for i := range le {
		out[i] = le[15-i]
	}
	out[0] &= 0x3F
	return out
}

// Hex renders a binary effective partition key as the upper-case hex the
// SDKs compare feed range boundaries with.
func Hex(epk []byte) string { return strings.ToUpper(hex.EncodeToString(epk)) }
