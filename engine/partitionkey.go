package engine

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/orrery-db/orrery/engine/internal/epk"
)

// Limits on partition key values.
const (
	// MaxPartitionKeyValueBytes is the largest partition key component, in bytes.
	MaxPartitionKeyValueBytes = 2048
	// MaxPartitionKeyPaths is the most levels a hierarchical key may have.
	MaxPartitionKeyPaths = 3
)

// PartitionKeyDefinition is a container's partitionKey property.
type PartitionKeyDefinition struct {
	Paths     []string `json:"paths"`
	Kind      string   `json:"kind"`
	Version   int      `json:"version,omitempty"`
	SystemKey *bool    `json:"systemKey,omitempty"`
}

// normalize fills the defaults the service fills and validates the definition.
func (d *PartitionKeyDefinition) normalize() *Error {
	if len(d.Paths) == 0 {
		return BadRequest("The partition key definition must have at least one path.")
	}
	if len(d.Paths) > MaxPartitionKeyPaths {
		return BadRequest("The partition key definition can have at most %d paths.", MaxPartitionKeyPaths)
	}
	for _, p := range d.Paths {
		if !strings.HasPrefix(p, "/") || len(p) < 2 || strings.HasSuffix(p, "/") {
			return BadRequest("The partition key path %q is invalid: it must start with '/' and name a property.", p)
		}
	}
	switch {
	case d.Kind == "":
		d.Kind = "Hash"
		if len(d.Paths) > 1 {
			d.Kind = "MultiHash"
		}
	case d.Kind == "Hash" && len(d.Paths) > 1:
		return BadRequest("A partition key of kind Hash must have exactly one path; use MultiHash for hierarchical keys.")
	case d.Kind != "Hash" && d.Kind != "MultiHash" && d.Kind != "Range":
		return BadRequest("The partition key kind %q is not supported.", d.Kind)
	}
	if d.Version == 0 {
		d.Version = 2
	}
	if d.Kind == "MultiHash" && d.Version != 2 {
		return BadRequest("Hierarchical partition keys (MultiHash) require version 2.")
	}
	return nil
}

// PartitionKeyValue is one component of a partition key.
type PartitionKeyValue struct {
	kind epk.Kind
	str  string
	num  float64
}

// PartitionKey is a logical partition key: one component per path of the
// container's definition. An empty PartitionKey addresses a legacy
// non-partitioned container.
type PartitionKey []PartitionKeyValue

// StringKey returns a single-component partition key holding s.
func StringKey(s string) PartitionKey { return PartitionKey{{kind: epk.String, str: s}} }

// ParsePartitionKeyHeader parses the JSON array the SDKs send in
// x-ms-documentdb-partitionkey: strings, numbers, booleans, null, and {} for
// undefined.
func ParsePartitionKeyHeader(h string) (PartitionKey, error) {
	if s, ok := simpleStringKey(h); ok {
		return StringKey(s), nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(h), &raw); err != nil {
		return nil, BadRequest("The partition key header %q is not a JSON array: %v", h, err)
	}
	pk := make(PartitionKey, 0, len(raw))
	for _, r := range raw {
		v, err := parsePartitionKeyComponent(r)
		if err != nil {
			return nil, err
		}
		pk = append(pk, v)
	}
	return pk, nil
}

// simpleStringKey recognizes the common header ["value"] whose string needs
// no unescaping, without a JSON decoder.
func simpleStringKey(h string) (string, bool) {
	if len(h) < 4 || h[0] != '[' || h[1] != '"' || h[len(h)-2] != '"' || h[len(h)-1] != ']' {
		return "", false
	}
	s := h[2 : len(h)-2]
	if len(s) > MaxPartitionKeyValueBytes {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return s, true
}

func parsePartitionKeyComponent(r json.RawMessage) (PartitionKeyValue, *Error) {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return PartitionKeyValue{}, BadRequest("Invalid partition key component %s: %v", r, err)
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return PartitionKeyValue{kind: epk.Undefined}, nil
		}
	case nil:
		return PartitionKeyValue{kind: epk.Null}, nil
	default:
		return componentOf(v)
	}
	return PartitionKeyValue{}, BadRequest("Partition key component %s must be a string, number, boolean, null or {} (undefined).", r)
}

// componentOf converts a decoded JSON value found at a partition key path.
func componentOf(v any) (PartitionKeyValue, *Error) {
	switch x := v.(type) {
	case nil:
		return PartitionKeyValue{kind: epk.Null}, nil
	case bool:
		if x {
			return PartitionKeyValue{kind: epk.True}, nil
		}
		return PartitionKeyValue{kind: epk.False}, nil
	case float64:
		return PartitionKeyValue{kind: epk.Number, num: x}, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return PartitionKeyValue{}, BadRequest("Partition key number %s is out of range.", x)
		}
		return PartitionKeyValue{kind: epk.Number, num: f}, nil
	case string:
		if len(x) > MaxPartitionKeyValueBytes {
			return PartitionKeyValue{}, BadRequest("Partition key value exceeds the maximum size of %d bytes.", MaxPartitionKeyValueBytes)
		}
		return PartitionKeyValue{kind: epk.String, str: x}, nil
	}
	return PartitionKeyValue{}, BadRequest("The partition key value must be a string, number, boolean or null, not an object or array.")
}

// extractPartitionKey reads the partition key of a decoded document.
// A missing property gives the undefined component.
func extractPartitionKey(def *PartitionKeyDefinition, doc map[string]any) (PartitionKey, *Error) {
	pk := make(PartitionKey, 0, len(def.Paths))
	for _, path := range def.Paths {
		v, ok := lookupPath(doc, path)
		if !ok {
			pk = append(pk, PartitionKeyValue{kind: epk.Undefined})
			continue
		}
		c, err := componentOf(v)
		if err != nil {
			return nil, err
		}
		pk = append(pk, c)
	}
	return pk, nil
}

// lookupPath follows a partition key path such as /a/b through nested objects.
func lookupPath(doc map[string]any, path string) (any, bool) {
	var cur any = doc
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
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
func (pk PartitionKey) Equal(o PartitionKey) bool {
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
func (pk PartitionKey) IsUndefined() bool {
	for _, c := range pk {
		if c.kind != epk.Undefined {
			return false
		}
	}
	return true
}

// MarshalJSON writes the key as the SDKs send it: a JSON array, with {} for undefined.
func (pk PartitionKey) MarshalJSON() ([]byte, error) { return pk.encode(), nil }

// encode is the canonical JSON array form, used in storage keys.
func (pk PartitionKey) encode() []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, c := range pk {
		if i > 0 {
			b.WriteByte(',')
		}
		switch c.kind {
		case epk.Undefined:
			b.WriteString("{}")
		case epk.Null:
			b.WriteString("null")
		case epk.True:
			b.WriteString("true")
		case epk.False:
			b.WriteString("false")
		case epk.Number:
			b.WriteString(strconv.FormatFloat(c.num, 'g', -1, 64))
		case epk.String:
			s, _ := json.Marshal(c.str)
			b.Write(s)
		}
	}
	b.WriteByte(']')
	return b.Bytes()
}

// String returns the canonical JSON form.
func (pk PartitionKey) String() string { return string(pk.encode()) }

// hashV2 is the 16-byte effective partition key of one component under hash
// partitioning version 2.
func (c PartitionKeyValue) hashV2() [16]byte { return epk.Hash(c.kind, c.str, c.num) }

// effectivePartitionKey is the binary EPK that orders items in storage: for
// Hash, the hash of all components together; for MultiHash, one hash per
// component, concatenated (so a key prefix is an EPK prefix).
func effectivePartitionKey(def *PartitionKeyDefinition, pk PartitionKey) []byte {
	if len(pk) == 0 {
		return nil
	}
	if def.Kind == "MultiHash" {
		out := make([]byte, 0, 16*len(pk))
		for _, c := range pk {
			h := c.hashV2()
			out = append(out, h[:]...)
		}
		return out
	}
	if len(pk) == 1 {
		h := pk[0].hashV2()
		return h[:]
	}
	// A Hash key has one path; more components cannot reach here after validation.
	var buf []byte
	for _, c := range pk {
		h := c.hashV2()
		buf = append(buf, h[:]...)
	}
	return buf
}

// EPKHex renders a binary effective partition key as the upper-case hex the
// SDKs compare feed range boundaries with.
func EPKHex(b []byte) string { return epk.Hex(b) }

// validID checks an item or resource id.
func validID(id string) *Error {
	switch {
	case id == "":
		return BadRequest("The input content is invalid because the required property, id, is missing.")
	case len(id) > 1023:
		// The service's words; its documented limit is 1,023 bytes.
		shown := id
		if len(shown) > 64 {
			shown = strings.ToValidUTF8(shown[:60], "") + "..."
		}
		return BadRequest("The input name '%s' is invalid. Ensure to provide a unique non-empty string less than '1024' characters. (The id is %d bytes long; the limit is 1023 bytes.)", shown, len(id))
	case !utf8.ValidString(id):
		return BadRequest("The id is not valid UTF-8.")
	case strings.ContainsAny(id, "/\\?#"):
		return BadRequest("The id %q contains an invalid character: '/', '\\\\', '?' and '#' are not allowed.", id)
	case strings.TrimSpace(id) != id && strings.TrimSpace(id) == "":
		return BadRequest("The id must not be blank.")
	}
	return nil
}
