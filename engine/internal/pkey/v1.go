package pkey

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Hash partitioning version 1. A V1 effective partition key is the 32-bit
// MurmurHash3 of the key's first component, written as a number, followed
// by the component itself, both in the order-preserving binary encoding
// the service compares range boundaries in ("05C1D5AB55AB54" is the hash
// 1431655765). Strings count at most 100 UTF-16 code units.

// v1MaxStringChars is where V1 truncates string values.
const v1MaxStringChars = 100

// EPKV1 is the effective partition key of pk under hash partitioning
// version 1 (only the first component counts: V1 keys have one path).
func (pk Key) EPKV1() []byte {
	c := Value{kind: Undefined}
	if len(pk) > 0 {
		c = pk[0]
	}
	if c.kind == String {
		c.str = truncateUTF16(c.str, v1MaxStringChars)
	}
	var hashed []byte
	hashed = append(hashed, byte(c.kind))
	switch c.kind {
	case String:
		hashed = append(hashed, c.str...)
		hashed = append(hashed, 0x00)
	case Number:
		hashed = binary.LittleEndian.AppendUint64(hashed, math.Float64bits(c.num))
	}
	out := appendV1Number(nil, float64(murmur3x86(hashed)))
	return appendV1Component(out, c)
}

// V1Boundary is the V1 effective partition key of the hash h alone: the
// form of the service's range boundaries for V1 containers.
func V1Boundary(h uint32) []byte { return appendV1Number(nil, float64(h)) }

// appendV1Component appends the binary encoding of one component.
func appendV1Component(b []byte, c Value) []byte {
	switch c.kind {
	case Number:
		return appendV1Number(b, c.num)
	case String:
		// The value is truncated already, so it is always written whole,
		// each byte one up, with a terminator.
		b = append(b, byte(String))
		for _, ch := range []byte(c.str) {
			if ch < 0xFF {
				ch++
			}
			b = append(b, ch)
		}
		return append(b, 0x00)
	}
	return append(b, byte(c.kind))
}

// appendV1Number appends the number marker and an order-preserving
// encoding of f: its IEEE bits with the sign flipped (all bits for a
// negative number), the first byte whole, then seven bits a byte, each
// byte but the last with its low bit set.
func appendV1Number(b []byte, f float64) []byte {
	b = append(b, byte(Number))
	u := math.Float64bits(f)
	if u&(1<<63) == 0 {
		u ^= 1 << 63
	} else {
		u = ^u
	}
	b = append(b, byte(u>>56))
	u <<= 8
	for {
		ch := byte(u>>56) | 0x01
		u <<= 7
		if u == 0 {
			return append(b, ch&0xFE)
		}
		b = append(b, ch)
	}
}

// truncateUTF16 keeps the first n UTF-16 code units of s; a surrogate pair
// cut in half leaves a replacement character, as the service's UTF-8
// encoding of a lone surrogate does.
func truncateUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			if units < n {
				return s[:i] + string(utf8.RuneError)
			}
			return s[:i]
		}
		units += w
	}
	return s
}

// V1BoundaryHash is the hash a V1 range boundary (hex, as V1Boundary
// writes it) stands for: "" is 0 and "FF" the top of the hash space,
// 2³²−1, as the service counts them. ok is false for any other text.
func V1BoundaryHash(hex string) (h uint32, ok bool) {
	switch hex {
	case "":
		return 0, true
	case "FF", "ff":
		return math.MaxUint32, true
	}
	b := make([]byte, len(hex)/2)
	if len(hex)%2 != 0 || len(b) < 3 || len(b) > 10 {
		return 0, false
	}
	for i := range b {
		hi, ok1 := fromHexDigit(hex[2*i])
		lo, ok2 := fromHexDigit(hex[2*i+1])
		if !ok1 || !ok2 {
			return 0, false
		}
		b[i] = hi<<4 | lo
	}
	if b[0] != byte(Number) {
		return 0, false
	}
	u := uint64(b[1]) << 56
	for k, ch := range b[2:] {
		u |= uint64(ch>>1) << (49 - 7*k)
		if last := k == len(b)-3; (ch&1 == 0) != last {
			return 0, false
		}
	}
	if u&(1<<63) != 0 {
		u ^= 1 << 63
	} else {
		u = ^u
	}
	f := math.Float64frombits(u)
	if f < 0 || f > math.MaxUint32 || f != math.Trunc(f) {
		return 0, false
	}
	return uint32(f), true
}

func fromHexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
