package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// A JSON tree, decoded so that objects keep their properties in document
// order: nil, bool, json.Number, string, []any and *jsonObject. Patch edits
// documents in this form and writes them back with every untouched property
// where it was.

// jsonObject is a JSON object whose members keep their order.
type jsonObject struct {
	names  []string
	values []any
}

// index returns the position of a member, or -1.
func (o *jsonObject) index(name string) int {
	for i, n := range o.names {
		if n == name {
			return i
		}
	}
	return -1
}

// set creates or overwrites a member; a new member goes last.
func (o *jsonObject) set(name string, v any) {
	if i := o.index(name); i >= 0 {
		o.values[i] = v
		return
	}
	if o.names == nil {
		// Most objects have a few members: room for them at once, not
		// four growths of each slice.
		o.names, o.values = make([]string, 0, 8), make([]any, 0, 8)
	}
	o.names = append(o.names, name)
	o.values = append(o.values, v)
}

// remove deletes the member at position i.
func (o *jsonObject) remove(i int) {
	o.names = append(o.names[:i], o.names[i+1:]...)
	o.values = append(o.values[:i], o.values[i+1:]...)
}

// decodeTree decodes one JSON value. It walks the bytes itself once they
// are known valid: json.Decoder's Token allocated an error for every value
// followed by a comma (its scanner's end of a top-level value), which made
// a patch's tree cost about as much as the rest of the write.
func decodeTree(b []byte) (any, error) {
	if !json.Valid(b) {
		return nil, errors.New("not a single valid JSON value")
	}
	v, _, err := treeValue(b, skipSpace(b, 0))
	return v, err
}

// treeValue decodes the valid JSON value at b[i] and returns the index just
// past it.
func treeValue(b []byte, i int) (any, int, error) {
	switch b[i] {
	case '{':
		o := &jsonObject{}
		i = skipSpace(b, i+1)
		if b[i] == '}' {
			return o, i + 1, nil
		}
		for {
			end := skipString(b, i)
			name, err := treeString(b[i:end])
			if err != nil {
				return nil, 0, err
			}
			i = skipSpace(b, skipSpace(b, end)+1) // ':'
			v, vend, err := treeValue(b, i)
			if err != nil {
				return nil, 0, err
			}
			// A repeated name keeps the last value, as parseObject does.
			o.set(name, v)
			i = skipSpace(b, vend)
			if b[i] == '}' {
				return o, i + 1, nil
			}
			i = skipSpace(b, i+1) // ','
		}
	case '[':
		a := []any{}
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return a, i + 1, nil
		}
		for {
			v, vend, err := treeValue(b, i)
			if err != nil {
				return nil, 0, err
			}
			a = append(a, v)
			i = skipSpace(b, vend)
			if b[i] == ']' {
				return a, i + 1, nil
			}
			i = skipSpace(b, i+1) // ','
		}
	case '"':
		end := skipString(b, i)
		s, err := treeString(b[i:end])
		return s, end, err
	case 't':
		return true, i + 4, nil
	case 'f':
		return false, i + 5, nil
	case 'n':
		return nil, i + 4, nil
	default:
		end := skipValue(b, i)
		return json.Number(b[i:end]), end, nil
	}
}

// treeString decodes a valid JSON string: its bytes between the quotes when
// it has no escapes and is valid UTF-8, else as json.Unmarshal decodes it.
func treeString(raw []byte) (string, error) {
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// appendTree appends the JSON encoding of a tree.
func appendTree(buf []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, x)
	case json.Number:
		return append(buf, x...)
	case string:
		return appendJSONString(buf, x)
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendTree(buf, e)
		}
		return append(buf, ']')
	case *jsonObject:
		buf = append(buf, '{')
		for i, n := range x.names {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, n)
			buf = append(buf, ':')
			buf = appendTree(buf, x.values[i])
		}
		return append(buf, '}')
	}
	panic("engine: unexpected JSON tree node")
}
