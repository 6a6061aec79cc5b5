package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
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
	o.names = append(o.names, name)
	o.values = append(o.values, v)
}

// remove deletes the member at position i.
func (o *jsonObject) remove(i int) {
	o.names = append(o.names[:i], o.names[i+1:]...)
	o.values = append(o.values[:i], o.values[i+1:]...)
}

// decodeTree decodes one JSON value.
func decodeTree(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeTreeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeTreeValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsonObject{}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeTreeValue(d)
				if err != nil {
					return nil, err
				}
				// A repeated name keeps the last value, as parseObject does.
				o.set(k.(string), v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := []any{}
			for d.More() {
				v, err := decodeTreeValue(d)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := d.Token()
			return a, err
		}
		return nil, errors.New("unexpected delimiter")
	default:
		return t, nil
	}
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
