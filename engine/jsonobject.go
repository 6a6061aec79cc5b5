package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// field is one top-level property of a JSON object, in document order.
type field struct {
	name  string
	value json.RawMessage
}

// object is a JSON object kept as its properties in order, so that a document
// reads back with its properties where the client put them.
type object []field

var errNotObject = errors.New("not a JSON object")

// parseObject splits a valid JSON object into its top-level properties. The
// input must already have passed json.Valid.
func parseObject(b []byte) (object, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errNotObject
	}
	i++
	var obj object
	// The plain names of the first properties are copied out of b into one
	// string at the end, not one string each.
	type span struct{ at, start, end int }
	var plain [16]span
	np, total := 0, 0
	var err error
	for {
		i = skipSpace(b, i)
		if i < len(b) && b[i] == '}' {
			if np > 0 {
				var sb strings.Builder
				sb.Grow(total)
				for _, s := range plain[:np] {
					sb.Write(b[s.start:s.end])
				}
				all, off := sb.String(), 0
				for _, s := range plain[:np] {
					obj[s.at].name = all[off : off+s.end-s.start]
					off += s.end - s.start
				}
			}
			return obj, nil
		}
		end := skipString(b, i)
		name := ""
		if isPlainName(b, i, end) {
			if np < len(plain) {
				plain[np] = span{len(obj), i + 1, end - 1}
				np++
				total += end - 1 - (i + 1)
			} else {
				name = string(b[i+1 : end-1])
			}
		} else if name, err = unmarshalName(b[i:end]); err != nil {
			return nil, err
		}
		i = skipSpace(b, end)
		i++ // ':'
		i = skipSpace(b, i)
		vend := skipValue(b, i)
		if obj == nil {
			obj = make(object, 0, 8) // most objects have a few properties: one allocation
		}
		obj = append(obj, field{name: name, value: json.RawMessage(b[i:vend])})
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// unmarshalName decodes a property name that is not plain: its own
// variable escapes to json.Unmarshal, not parseObject's.
func unmarshalName(b []byte) (string, error) {
	var name string
	err := json.Unmarshal(b, &name)
	return name, err
}

// isPlainName reports whether the property name b[i:end] is a string of
// printable ASCII without escapes, which is its bytes between the quotes;
// anything else is decoded by json.Unmarshal.
func isPlainName(b []byte, i, end int) bool {
	if end-i < 2 || end > len(b) || b[i] != '"' || b[end-1] != '"' {
		return false
	}
	for _, c := range b[i+1 : end-1] {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default:
		for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[i])) {
			i++
		}
		return i
	}
}

// get returns the raw value of a property.
func (o object) get(name string) (json.RawMessage, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].name == name {
			return o[i].value, true
		}
	}
	return nil, false
}

// without returns the properties whose names are not system properties.
func (o object) withoutSystem() object {
	out := make(object, 0, len(o))
	for _, f := range o {
		if !systemProperties[f.name] {
			out = append(out, f)
		}
	}
	return out
}

// encode writes the object, followed by extra properties.
func (o object) encode(extra ...field) []byte {
	n := o.encodedLen() + object(extra).encodedLen()
	return o.appendEncode(make([]byte, 0, n+128), extra...)
}

// encodedLen is about the length of the object's encoding (exact when its
// names need no escapes).
func (o object) encodedLen() int {
	n := 2
	for _, f := range o {
		n += len(f.name) + len(f.value) + 4
	}
	return n
}

// appendEncode appends the object's encoding, followed by extra properties,
// to buf.
func (o object) appendEncode(buf []byte, extra ...field) []byte {
	buf = append(buf, '{')
	first := true
	write := func(f field) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendJSONString(buf, f.name)
		buf = append(buf, ':')
		buf = append(buf, f.value...)
	}
	for _, f := range o {
		write(f)
	}
	for _, f := range extra {
		write(f)
	}
	return append(buf, '}')
}

// plainJSONString reports whether b is a JSON string literal of printable
// ASCII without escapes, which is what appendJSONString writes for it.
func plainJSONString(b []byte) bool {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return false
	}
	for _, c := range b[1 : len(b)-1] {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			q, _ := json.Marshal(s)
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// systemProperties are the properties the service owns on every resource;
// a client's values for them are ignored.
var systemProperties = map[string]bool{
	"_rid": true, "_self": true, "_etag": true, "_ts": true, "_attachments": true, "_lsn": true,
	"_colls": true, "_users": true, "_docs": true, "_sprocs": true, "_triggers": true,
	"_udfs": true, "_conflicts": true,
}
