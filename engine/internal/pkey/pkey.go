package pkey

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxValueBytes is the largest string a partition key value may hold, in bytes.
const MaxValueBytes = 2048

// Kind is the type of one partition key value: the marker Cosmos hashes in
// front of it.
type Kind byte

// The type markers of partition key values.
const (
	Undefined Kind = 0x00
	Null      Kind = 0x01
	False     Kind = 0x02
	True      Kind = 0x03
	Number    Kind = 0x05
	String    Kind = 0x08
)

// Value is one component of a partition key. The zero Value is undefined.
type Value struct {
	kind Kind
	str  string
	num  float64
}

// Key is a logical partition key: one Value per path of the container's
// definition. An empty Key addresses a legacy non-partitioned container.
type Key []Value

// StringValue is the value s.
func StringValue(s string) Value { return Value{kind: String, str: s} }

// AsString returns the value's string, ok false when it is not a string.
func (c Value) AsString() (s string, ok bool) { return c.str, c.kind == String }

// StringKey is a single-component key holding s.
func StringKey(s string) Key { return Key{{kind: String, str: s}} }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// ParseHeader parses the JSON array the SDKs send in
// x-ms-documentdb-partitionkey: strings, numbers, booleans, null, and {} for
// undefined.
func ParseHeader(h string) (Key, error) {
	if s, ok := simpleStringKey(h); ok {
		return StringKey(s), nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(h), &raw); err != nil {
		return nil, errorf("The partition key header %q is not a JSON array: %v", h, err)
	}
	pk := make(Key, 0, len(raw))
	for _, r := range raw {
		v, err := ParseValue(r)
		if err != nil {
			return nil, err
		}
		pk = append(pk, v)
	}
	return pk, nil
}

// ParseHeaderIn is ParseHeader, the common key of one plain string held
// in *one instead of an allocation of its own: the key is one[:1:1], so
// that an append to it copies. The caller keeps *one for as long as the
// key, and does not parse another header into it meanwhile.
func ParseHeaderIn(one *[1]Value, h string) (Key, error) {
	if s, ok := simpleStringKey(h); ok {
		one[0] = StringValue(s)
		return one[:1:1], nil
	}
	return ParseHeader(h)
}

// simpleStringKey recognizes the common header ["value"] whose string needs
// no unescaping, without a JSON decoder.
func simpleStringKey(h string) (string, bool) {
	if len(h) < 4 || h[0] != '[' || h[1] != '"' || h[len(h)-2] != '"' || h[len(h)-1] != ']' {
		return "", false
	}
	s := h[2 : len(h)-2]
	if len(s) > MaxValueBytes {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return s, true
}

// ParseValue parses one component as the SDKs write it: a JSON string,
// number, boolean, null, or {} for undefined.
func ParseValue(r json.RawMessage) (Value, error) {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return Value{}, errorf("Invalid partition key component %s: %v", r, err)
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return Value{kind: Undefined}, nil
		}
	case nil:
		return Value{kind: Null}, nil
	default:
		return Of(v)
	}
	return Value{}, errorf("Partition key component %s must be a string, number, boolean, null or {} (undefined).", r)
}

// Of converts a decoded JSON value found at a partition key path.
func Of(v any) (Value, error) {
	switch x := v.(type) {
	case nil:
		return Value{kind: Null}, nil
	case bool:
		if x {
			return Value{kind: True}, nil
		}
		return Value{kind: False}, nil
	case float64:
		return Value{kind: Number, num: x}, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return Value{}, errorf("Partition key number %s is out of range.", x)
		}
		return Value{kind: Number, num: f}, nil
	case string:
		if len(x) > MaxValueBytes {
			return Value{}, errorf("Partition key value exceeds the maximum size of %d bytes.", MaxValueBytes)
		}
		return Value{kind: String, str: x}, nil
	}
	return Value{}, errorf("The partition key value must be a string, number, boolean or null, not an object or array.")
}

// Extract reads the partition key of a decoded document at paths (such as
// /a/b, with JSON Pointer escapes). A missing property gives undefined.
func Extract(paths []string, doc map[string]any) (Key, error) {
	pk := make(Key, 0, len(paths))
	for _, path := range paths {
		v, ok := lookupPath(doc, path)
		if m, isObj := v.(map[string]any); isObj && len(m) == 0 {
			// {} is how the SDKs write the undefined component (their
			// NonePartitionKey): an item holding it at a key path is in
			// the undefined partition, as on the service.
			ok = false
		}
		if !ok {
			pk = append(pk, Value{kind: Undefined})
			continue
		}
		c, err := Of(v)
		if err != nil {
			return nil, err
		}
		pk = append(pk, c)
	}
	return pk, nil
}

// lookupPath follows a partition key path such as /a/b through nested objects.
func lookupPath(doc map[string]any, path string) (any, bool) {
	rest := strings.TrimPrefix(path, "/")
	if !strings.ContainsAny(rest, "/~") {
		// One plain segment, the usual key: no split to allocate.
		v, ok := doc[rest]
		return v, ok
	}
	var cur any = doc
	for _, seg := range strings.Split(rest, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Equal reports whether two partition keys are the same value.
func (pk Key) Equal(o Key) bool {
	if len(pk) != len(o) {
		return false
	}
	for i := range pk {
		if pk[i] != o[i] {
			return false
		}
	}
	return true
}

// IsUndefined reports whether every component is undefined.
func (pk Key) IsUndefined() bool {
	for _, c := range pk {
		if c.kind != Undefined {
			return false
		}
	}
	return true
}

// MarshalJSON writes the key as the SDKs send it: a JSON array, with {} for undefined.
func (pk Key) MarshalJSON() ([]byte, error) { return pk.Encode(), nil }

// Encode is the canonical JSON array form, used in storage keys.
func (pk Key) Encode() []byte { return pk.AppendEncode(nil) }

// AppendEncode appends the canonical JSON array form (Encode's) to b.
func (pk Key) AppendEncode(b []byte) []byte {
	b = append(b, '[')
	for i, c := range pk {
		if i > 0 {
			b = append(b, ',')
		}
		switch c.kind {
		case Undefined:
			b = append(b, "{}"...)
		case Null:
			b = append(b, "null"...)
		case True:
			b = append(b, "true"...)
		case False:
			b = append(b, "false"...)
		case Number:
			b = strconv.AppendFloat(b, c.num, 'g', -1, 64)
		case String:
			if plainJSONString(c.str) {
				b = append(append(append(b, '"'), c.str...), '"')
				break
			}
			s, _ := json.Marshal(c.str)
			b = append(b, s...)
		}
	}
	return append(b, ']')
}

// plainJSONString reports whether encoding/json writes s as it is between
// quotes: printable ASCII without the quote, the backslash and the three
// characters it escapes for HTML (<, >, &).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7E, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// String returns the canonical JSON form.
func (pk Key) String() string { return string(pk.Encode()) }

// EPK is the binary effective partition key that orders items in storage:
// the version 2 hashes of the components, concatenated (one component for a
// Hash key, one per level for MultiHash, so that a key prefix is an EPK
// prefix). An empty key has none.
func (pk Key) EPK() []byte {
	if len(pk) == 0 {
		return nil
	}
	return pk.AppendEPK(make([]byte, 0, 16*len(pk)))
}

// AppendEPK appends the binary effective partition key (EPK's) to b.
func (pk Key) AppendEPK(b []byte) []byte {
	for _, c := range pk {
		h := c.Hash()
		b = append(b, h[:]...)
	}
	return b
}

// Hash is the 16-byte effective partition key of one value under hash
// partitioning version 2.
func (c Value) Hash() [16]byte { return Hash(c.kind, c.str, c.num) }

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
