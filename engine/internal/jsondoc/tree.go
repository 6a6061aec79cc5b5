package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The decoded form of a document: nil, bool, json.Number, string, []any
// and *Members, objects keeping their members in document order, and Raw,
// a value not decoded yet. Patch edits documents in this form and writes
// them back with every untouched property where it was.

// Raw is a valid JSON value left undecoded: DecodeLazy and Expand leave the
// members of the value they decode so, Expand decodes one when it is looked
// into, and AppendValue writes an untouched one back byte for byte. A patch
// of one property of a large document then decodes and writes again only
// the values on its path. The decoded form holds a *Raw, which points into
// an array of them kept with the object or array it is a value of: a Raw
// (a slice) in an any would be an allocation of its own.
type Raw []byte

// lazyMembers is the members an expanded object or array has room for in
// its own allocation; more grow apart.
const lazyMembers = 8

// lazyObject is an object Expand decoded, with room for its first members'
// names, values and Raw values, in one allocation.
type lazyObject struct {
	Members
	names  [lazyMembers]string
	values [lazyMembers]any
	raws   [lazyMembers]Raw
}

// storedMembers is the members DecodeLazy's object has room for in its
// own allocation: a stored item's five system properties and up to 11 of
// its own (an item of 9 to 16 members grew its three arrays apart from an
// object's room for lazyMembers, three more allocations per patch).
const storedMembers = 16

// lazyStored is the object DecodeLazy decodes, a stored item: lazyObject
// with room for storedMembers.
type lazyStored struct {
	Members
	names  [storedMembers]string
	values [storedMembers]any
	raws   [storedMembers]Raw
}

// lazyArray is an array Expand decoded, with room for its first elements
// and their Raw values, in one allocation.
type lazyArray struct {
	values [lazyMembers]any
	raws   [lazyMembers]Raw
}

// Members is a decoded JSON object: its members' names and values, in
// document order.
type Members struct {
	Names  []string
	Values []any
}

// Index returns the position of a member, or -1.
func (o *Members) Index(name string) int {
	for i, n := range o.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// Set creates or overwrites a member; a new member goes last.
func (o *Members) Set(name string, v any) {
	if i := o.Index(name); i >= 0 {
		o.Values[i] = v
		return
	}
	if o.Names == nil {
		// Most objects have a few members: room for them at once, not
		// four growths of each slice.
		o.Names, o.Values = make([]string, 0, 8), make([]any, 0, 8)
	}
	o.Names = append(o.Names, name)
	o.Values = append(o.Values, v)
}

// Remove deletes the member at position i.
func (o *Members) Remove(i int) {
	o.Names = append(o.Names[:i], o.Names[i+1:]...)
	o.Values = append(o.Values[:i], o.Values[i+1:]...)
}

// Decode decodes one JSON value into the decoded form. It walks the bytes
// itself once they are known valid: json.Decoder's Token allocated an
// error for every value followed by a comma (its scanner's end of a
// top-level value), which made a patch's tree cost about as much as the
// rest of the write.
func Decode(b []byte) (any, error) {
	if !Valid(b) {
		return nil, errors.New("not a single valid JSON value")
	}
	v, _, err := decodeValue(b, SkipSpace(b, 0))
	return v, err
}

// DecodeLazy decodes one JSON value one level deep, as Expand does. An
// object (a patch's stored item) is checked valid and its members listed
// in one scan, the validator's, which hands them to a lazyBuild: the
// answer of Valid and then expandAt, which scanned each member again.
func DecodeLazy(b []byte) (any, error) {
	if i := SkipSpace(b, 0); i < len(b) && b[i] == '{' {
		lo := new(lazyStored)
		o := &lo.Members
		o.Names, o.Values = lo.names[:0], lo.values[:0]
		p := validator{b: b, err: errNoCheck, lazy: lazyBuild{o: o, raws: lo.raws[:0]}}
		if j := p.value(p.space(0), 0); j < 0 || p.space(j) != len(b) {
			return nil, errors.New("not a single valid JSON value")
		}
		if p.lazy.err != nil {
			return nil, p.lazy.err
		}
		return o, nil
	}
	if !Valid(b) {
		return nil, errors.New("not a single valid JSON value")
	}
	return expandAt(b, SkipSpace(b, 0))
}

// lazyBuild lists a lazy object's members as the validator passes them,
// as expandAt lists them: each name decoded (appendName, its first error
// kept and the rest not listed), each value a Raw of its bytes, a
// repeated name keeping the last value.
type lazyBuild struct {
	o     *Members
	raws  []Raw
	names strings.Builder
	err   error
}

// add lists the member named by b[name:end] (a string), of value
// b[v:vend]; plain reports that the name has no escape and is ASCII.
func (l *lazyBuild) add(b []byte, name, end, v, vend int, plain bool) {
	if l.err != nil {
		return
	}
	s, err := appendName(&l.names, b[name:end], plain)
	if err != nil {
		l.err = err
		return
	}
	l.raws = append(l.raws, Raw(b[v:vend:vend]))
	l.o.Set(s, &l.raws[len(l.raws)-1])
}

// Expand decodes v one level deep when it is a *Raw: an object into
// *Members and an array into []any whose values are *Raw, a scalar as
// Decode does. Any other value is returned as it is.
func Expand(v any) (any, error) {
	r, ok := v.(*Raw)
	if !ok {
		return v, nil
	}
	return expandAt(*r, 0)
}

// expandAt decodes the valid JSON value at b[i] one level deep. An
// object's or array's Raw values are kept in its allocation's array of
// them, and in arrays grown from it past lazyMembers: a *Raw into an array
// that was grown from stays valid, as nothing writes to a Raw once it is
// made.
func expandAt(b []byte, i int) (any, error) {
	switch b[i] {
	case '{':
		lo := new(lazyObject)
		o := &lo.Members
		o.Names, o.Values = lo.names[:0], lo.values[:0]
		raws := lo.raws[:0]
		var names strings.Builder
		i = SkipSpace(b, i+1)
		if b[i] == '}' {
			return o, nil
		}
		for {
			// A plain name (printable ASCII, no escape) is its bytes:
			// appendName's checks of it are skipped.
			end, plain := skipName(b, i)
			name, err := appendName(&names, b[i:end], plain)
			if err != nil {
				return nil, err
			}
			i = SkipSpace(b, SkipSpace(b, end)+1) // ':'
			vend := SkipValue(b, i)
			raws = append(raws, Raw(b[i:vend:vend]))
			// A repeated name keeps the last value, as Parse does.
			o.Set(name, &raws[len(raws)-1])
			i = SkipSpace(b, vend)
			if b[i] == '}' {
				return o, nil
			}
			i = SkipSpace(b, i+1) // ','
		}
	case '[':
		la := new(lazyArray)
		a, raws := la.values[:0], la.raws[:0]
		i = SkipSpace(b, i+1)
		if b[i] == ']' {
			return a, nil
		}
		for {
			vend := SkipValue(b, i)
			raws = append(raws, Raw(b[i:vend:vend]))
			a = append(a, &raws[len(raws)-1])
			i = SkipSpace(b, vend)
			if b[i] == ']' {
				return a, nil
			}
			i = SkipSpace(b, i+1) // ','
		}
	}
	v, _, err := decodeValue(b, i)
	return v, err
}

// decodeValue decodes the valid JSON value at b[i] and returns the index
// just past it.
func decodeValue(b []byte, i int) (any, int, error) {
	switch b[i] {
	case '{':
		o := &Members{}
		i = SkipSpace(b, i+1)
		if b[i] == '}' {
			return o, i + 1, nil
		}
		for {
			end := SkipString(b, i)
			name, err := decodeString(b[i:end])
			if err != nil {
				return nil, 0, err
			}
			i = SkipSpace(b, SkipSpace(b, end)+1) // ':'
			v, vend, err := decodeValue(b, i)
			if err != nil {
				return nil, 0, err
			}
			// A repeated name keeps the last value, as Parse does.
			o.Set(name, v)
			i = SkipSpace(b, vend)
			if b[i] == '}' {
				return o, i + 1, nil
			}
			i = SkipSpace(b, i+1) // ','
		}
	case '[':
		a := []any{}
		i = SkipSpace(b, i+1)
		if b[i] == ']' {
			return a, i + 1, nil
		}
		for {
			v, vend, err := decodeValue(b, i)
			if err != nil {
				return nil, 0, err
			}
			a = append(a, v)
			i = SkipSpace(b, vend)
			if b[i] == ']' {
				return a, i + 1, nil
			}
			i = SkipSpace(b, i+1) // ','
		}
	case '"':
		end := SkipString(b, i)
		s, err := decodeString(b[i:end])
		return s, end, err
	case 't':
		return true, i + 4, nil
	case 'f':
		return false, i + 5, nil
	case 'n':
		return nil, i + 4, nil
	default:
		end := SkipValue(b, i)
		return json.Number(b[i:end]), end, nil
	}
}

// decodeString decodes a valid JSON string: its bytes between the quotes
// when it has no escapes and is valid UTF-8, else as json.Unmarshal decodes
// it.
func decodeString(raw []byte) (string, error) {
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// appendName is decodeString for a member's name: a plain one (no escapes,
// valid UTF-8) is written into names and is a part of it, so that the
// names of an object share an allocation (a few as it grows: a name made
// before stays valid, as a Builder never writes over what it holds).
// plain reports that skipName found it printable ASCII without an escape:
// it is not looked at again.
func appendName(names *strings.Builder, raw []byte, plain bool) (string, error) {
	inner := raw[1 : len(raw)-1]
	if !plain && (bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner)) {
		return decodeString(raw)
	}
	if names.Cap() == 0 {
		names.Grow(objectNames)
	}
	start := names.Len()
	names.Write(inner)
	return names.String()[start:], nil
}

// objectNames is the room an expanded object's names get at first.
const objectNames = 64

// AppendValue appends the JSON encoding of a decoded value.
func AppendValue(buf []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, x)
	case json.Number:
		return append(buf, x...)
	case *Raw:
		return append(buf, *x...)
	case string:
		return AppendString(buf, x)
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = AppendValue(buf, e)
		}
		return append(buf, ']')
	case *Members:
		buf = append(buf, '{')
		for i, n := range x.Names {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = AppendString(buf, n)
			buf = append(buf, ':')
			buf = AppendValue(buf, x.Values[i])
		}
		return append(buf, '}')
	}
	panic("jsondoc: unexpected decoded value")
}
