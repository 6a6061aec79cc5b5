package transfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// systemProperties are the properties the service adds to every item; an
// export leaves them out so that an import elsewhere starts them afresh.
var systemProperties = map[string]bool{"_rid": true, "_self": true, "_etag": true, "_attachments": true, "_ts": true}

// stripSystemProperties returns the item's JSON object without the system
// properties, every other member kept byte for byte in its order.
func stripSystemProperties(item []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(item))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("an item is not a JSON object")
	}
	out := make([]byte, 0, len(item))
	out = append(out, '{')
	first := true
	for dec.More() {
		keyStart := skipSpace(item, int(dec.InputOffset()))
		if keyStart < len(item) && item[keyStart] == ',' {
			keyStart = skipSpace(item, keyStart+1)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		keyEnd := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if systemProperties[key] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, item[keyStart:keyEnd]...)
		out = append(out, ':')
		out = append(out, raw...)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// itemKey is what a write needs to know of an item besides its body.
type itemKey struct {
	id string
	// pk is the partition key value as the SDK sends it. When a component
	// is undefined (the item lacks that path), which the SDK cannot
	// express, pk is empty and header holds the value as the other SDKs
	// send it: a JSON array with {} for each undefined component.
	pk     azcosmos.PartitionKey
	header string
	// canon is equal for two items exactly when their partition key values
	// are: the batch an item joins.
	canon string
}

// undefined reports whether the key needs the header the SDK cannot send.
func (k itemKey) undefined() bool { return k.header != "" }

// keyOf reads an item's id and its partition key under the container's
// definition. A path the item lacks is the undefined component, as the
// service and the other SDKs take it; a path holding an object or an array
// is refused, as the service refuses it.
func keyOf(def azcosmos.PartitionKeyDefinition, item []byte) (itemKey, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(item, &top); err != nil {
		return itemKey{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var k itemKey
	rawID, ok := top["id"]
	if !ok {
		return k, errors.New(`the item has no "id" (the service requires one, a string)`)
	}
	if err := json.Unmarshal(rawID, &k.id); err != nil {
		return k, fmt.Errorf(`the item's "id" is %s, not a string`, rawID)
	}
	pk := azcosmos.NewPartitionKey()
	var canon strings.Builder
	canon.WriteByte('[')
	undefined := false
	for i, path := range def.Paths {
		if i > 0 {
			canon.WriteByte(',')
		}
		raw, found := lookupPath(top, path)
		if !found {
			undefined = true
			canon.WriteString("{}")
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return k, fmt.Errorf("partition key %s: %w", path, err)
		}
		switch x := v.(type) {
		case string:
			pk = pk.AppendString(x)
			canon.WriteString(asciiJSONString(x))
		case bool:
			pk = pk.AppendBool(x)
			canon.WriteString(strconv.FormatBool(x))
		case nil:
			pk = pk.AppendNull()
			canon.WriteString("null")
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return k, fmt.Errorf("partition key %s: %s is out of range", path, x)
			}
			pk = pk.AppendNumber(f)
			canon.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		default:
			return k, fmt.Errorf("the partition key path %s holds an object or array; the service takes a string, number, boolean or null there, or no value", path)
		}
	}
	canon.WriteByte(']')
	k.canon = canon.String()
	if undefined {
		k.pk, k.header = azcosmos.NewPartitionKey(), k.canon
	} else {
		k.pk = pk
	}
	return k, nil
}

// lookupPath follows a partition key path such as /a/b through nested
// objects; found is false when a step is missing or not an object.
func lookupPath(top map[string]json.RawMessage, path string) (json.RawMessage, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	cur := top
	for i, seg := range segs {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		raw, ok := cur[seg]
		if !ok {
			return nil, false
		}
		if i == len(segs)-1 {
			return raw, true
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, false
		}
		cur = nil
		if json.Unmarshal(raw, &cur) != nil {
			return nil, false
		}
	}
	return nil, false
}

// asciiJSONString quotes s as JSON with every character outside printable
// ASCII escaped (\uXXXX, surrogate pairs beyond the BMP), as a header value
// must be.
func asciiJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// dupKey identifies an item within a container (its partition key value and
// id) in 16 bytes: two seeded hashes, so that an input cannot be crafted to
// collide.
type dupKey [2]uint64

var dupSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func (k itemKey) dupKey() dupKey {
	s := k.canon + "\x00" + k.id
	return dupKey{maphash.String(dupSeeds[0], s), maphash.String(dupSeeds[1], s)}
}

// sameItem reports whether an item read back from the service holds what
// record does: the same values, system properties aside. The service keeps
// values, not their spelling, so numbers compare as the service stores them.
func sameItem(stored, record []byte) bool {
	var a, b map[string]any
	if json.Unmarshal(stored, &a) != nil || json.Unmarshal(record, &b) != nil {
		return false
	}
	for p := range systemProperties {
		delete(a, p)
		delete(b, p)
	}
	return jsonEqual(a, b)
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
